"""Settings: the environment and ``labbot.toml``, read once at start-up into one typed object.

Every variable is optional and has an embedded default (README "Configuration"). Secrets are held here and passed
to the parts that need them; ``Settings.__repr__`` never shows them.
"""

from __future__ import annotations

import os
import secrets
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from labbot.agents.babysitter.deadman import DeadmanSettings
from labbot.agents.babysitter.pagerduty import EVENTS_URL
from labbot.agents.babysitter.policy import PagingPolicy, WatchdogPolicy
from labbot.agents.feedback.ab import AbTest
from labbot.agents.fleet.model import ModelSettings
from labbot.bot.integrations import Integrations
from labbot.common.api_client import given_admin_token
from labbot.common.durations import parse_duration
from labbot.common.errors import BadRequest
from labbot.evals.running.model_keys import eval_job_env
from labbot.training.capacity import ComputePolicy

DEFAULT_PORT = 3000
# the variables of the AWS SDK a job needs to reach S3 (or an S3-compatible store) when its checkpoints live there
STORAGE_ENV = frozenset(
    {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_CA_BUNDLE",
        "AWS_MAX_ATTEMPTS",
        "AWS_RETRY_MODE",
    }
)
# the key pair labbot hands jobs instead of its own, when given (docs/deploy.md: one an IAM policy limits to the runs'
# prefix of the bucket); both or neither
JOB_KEY_ID_ENV = "LABBOT_JOB_AWS_ACCESS_KEY_ID"
JOB_SECRET_ENV = "LABBOT_JOB_AWS_SECRET_ACCESS_KEY"
# labbot's own credentials among STORAGE_ENV: what the job key pair replaces
OWN_STORAGE_CREDENTIALS = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"})
SLACK_API_URL = "https://slack.com/api/"


@dataclass(frozen=True)
class SlackSettings:
    """Slack credentials (never shown by repr) and how chatty run threads are."""

    bot_token: str | None = field(default=None, repr=False)
    signing_secret: str | None = field(default=None, repr=False)
    app_token: str | None = field(default=None, repr=False)
    api_url: str = SLACK_API_URL
    command: str = "/lab"
    admins: frozenset[str] = frozenset()
    card_every_s: float = 120.0
    progress_every_s: float = 600.0
    plot_milestones: tuple[int, ...] = (50,)

    @classmethod
    def from_env(cls, env: Mapping[str, str], config: Mapping[str, Any]) -> SlackSettings:
        table = config.get("slack", {})
        roles = config.get("roles", {})
        api_url = env.get("SLACK_API_URL") or SLACK_API_URL
        milestones = table.get("plot_milestones", [50])
        if not isinstance(milestones, list) or not all(isinstance(m, int) and 0 < m < 100 for m in milestones):
            raise BadRequest("labbot.toml: [slack] plot_milestones must be a list of percentages, e.g. [25, 50, 75]")
        return cls(
            bot_token=env.get("SLACK_BOT_TOKEN") or None,
            signing_secret=env.get("SLACK_SIGNING_SECRET") or None,
            app_token=env.get("SLACK_APP_TOKEN") or None,
            api_url=api_url if api_url.endswith("/") else api_url + "/",
            command=str(table.get("command", "/lab")),
            admins=frozenset(str(u) for u in roles.get("admins", [])),
            card_every_s=parse_duration(str(table.get("card_every", "2m"))),
            progress_every_s=parse_duration(str(table.get("progress_every", "10m"))),
            plot_milestones=tuple(sorted(milestones)),
        )

    @property
    def configured(self) -> bool:
        return bool(self.bot_token)


LOG_FORMATS = ("text", "json")


@dataclass(frozen=True)
class LeaderSettings:
    """``[leader]``: the lease that makes one replica run the singletons. ``lease`` is how long a leader that stops
    renewing (killed, cut off, paused) keeps it: a follower takes over within about that plus ``renew``.
    ``LABBOT_REPLICA`` names this replica in the lease and in ``/readyz`` (a pod's name; the host's by default)."""

    lease_s: float = 6.0
    renew_s: float = 1.0
    replica: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any], env: Mapping[str, str]) -> LeaderSettings:
        table = config.get("leader") or {}
        if not isinstance(table, Mapping):
            raise BadRequest('labbot.toml: [leader] must be a table, e.g. [leader] then lease = "6s"')
        unknown = sorted(set(table) - {"lease", "renew"})
        if unknown:
            raise BadRequest(f"labbot.toml: [leader] has no {', '.join(unknown)}; it takes lease and renew")
        lease = parse_duration(str(table.get("lease", "6s")))
        renew = parse_duration(str(table.get("renew", "1s")))
        if lease < 1 or renew <= 0 or renew * 2 > lease:
            raise BadRequest(
                f"labbot.toml: [leader] lease = {lease:g}s and renew = {renew:g}s: the lease must be at least 1s and "
                'renewed at least twice within it, e.g. lease = "6s", renew = "1s"'
            )
        replica = (env.get("LABBOT_REPLICA") or "").strip() or None
        if replica is not None and (len(replica) > 120 or ":" in replica):
            raise BadRequest(f"LABBOT_REPLICA={replica[:40]!r}: a name of at most 120 characters, without ':'")
        return cls(lease_s=lease, renew_s=renew, replica=replica)


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str = field(repr=False)  # may hold a password: shown as Database.display_url
    artifacts_root: Path | None
    port: int
    host: str
    public_url: str
    config_path: Path | None
    config: dict[str, Any] = field(repr=False)
    ray_address: str | None = None
    ray_token: str | None = field(default=None, repr=False)
    slack: SlackSettings = field(default_factory=lambda: SlackSettings())
    watchdog: WatchdogPolicy = field(default_factory=WatchdogPolicy)
    paging: PagingPolicy = field(default_factory=PagingPolicy)
    pagerduty_key: str | None = field(default=None, repr=False)
    pagerduty_url: str = EVENTS_URL
    deadman: DeadmanSettings | None = None
    model: ModelSettings = field(default_factory=lambda: ModelSettings.from_env({}))
    artifacts_url: str = ""  # LABBOT_ARTIFACTS_URL as given (an fsspec URL); the local folder when unset
    integrations: Integrations = field(default_factory=Integrations)
    codebase_root: Path = field(default_factory=Path.cwd)  # LABBOT_CODEBASE_ROOT: what `codebase` serves, evals use
    compute: ComputePolicy = field(default_factory=ComputePolicy)  # [compute]: each purpose's cap of the cluster
    log_format: str = "text"  # LABBOT_LOG_FORMAT: text (for people) or json (one object a line, for a collector)
    # LABBOT_METRICS_TOKEN: /metrics needs it when set; it also shows /readyz's detail (labbot.bot.api.probes)
    metrics_token: str | None = field(default=None, repr=False)
    # LABBOT_OPEN_PROBES: /readyz and /metrics answer anyone, also on a listener beyond loopback (labbot.bot.api.probes)
    open_probes: bool = False
    # LABBOT_ADMIN_TOKEN: the API's token given (every replica the same one, from a Secret) instead of the file's
    admin_token_env: str | None = field(default=None, repr=False)
    # the AWS variables labbot was given (credentials among them): what a job needs to write to an object store
    storage_env: dict[str, str] = field(default_factory=dict, repr=False)
    # LABBOT_JOB_AWS_*: the key pair jobs get instead of labbot's own (as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)
    job_storage_keys: dict[str, str] = field(default_factory=dict, repr=False)
    leader: LeaderSettings = field(default_factory=LeaderSettings)  # [leader] and LABBOT_REPLICA
    # LABBOT_EVAL_MODEL and LABBOT_EVAL_<PROVIDER KEY>: the eval jobs' default model and keys for agent solvers
    eval_model_env: dict[str, str] = field(default_factory=dict, repr=False)
    # LABBOT_INTERNAL_URL: where jobs (their telemetry) reach the control plane; "" is
    # public_url (plot links always use public_url: Slack fetches them from outside)
    internal_url: str = ""

    def __post_init__(self) -> None:
        if not self.internal_url:
            object.__setattr__(self, "internal_url", self.public_url)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        home = Path(env.get("LABBOT_HOME") or ".labbot").expanduser().resolve()
        port_text = env.get("LABBOT_PORT") or str(DEFAULT_PORT)
        try:
            port = int(port_text)
            if not 0 < port < 65536:
                raise ValueError
        except ValueError:
            raise BadRequest(f"LABBOT_PORT={port_text!r} is not a port number (1-65535)") from None
        log_format = (env.get("LABBOT_LOG_FORMAT") or "text").strip().lower()
        if log_format not in LOG_FORMATS:
            raise BadRequest(
                f"LABBOT_LOG_FORMAT={env.get('LABBOT_LOG_FORMAT')!r} is not a log format: use text (default) or json"
            )
        config_path = _config_path(env)
        config = load_toml(config_path) if config_path else {}
        public_url = (env.get("LABBOT_PUBLIC_URL") or f"http://127.0.0.1:{port}").rstrip("/")
        internal_url = (env.get("LABBOT_INTERNAL_URL") or "").strip().rstrip("/")
        if internal_url and urlparse(internal_url).scheme not in ("http", "https"):
            raise BadRequest(
                f"LABBOT_INTERNAL_URL={internal_url[:80]!r} is not an http(s) URL: the address jobs reach the "
                "control plane at, e.g. http://labbot.labbot.svc"
            )
        artifacts_url = env.get("LABBOT_ARTIFACTS_URL") or str(home / "artifacts")
        _check_store_url(artifacts_url, "LABBOT_ARTIFACTS_URL")
        artifacts_root = _local_root(artifacts_url)
        configured_ckpt = (config.get("training") or {}).get("checkpoint_root")
        if configured_ckpt is not None:
            if not isinstance(configured_ckpt, str) or not configured_ckpt.strip():
                raise BadRequest(
                    "labbot.toml: [training] checkpoint_root must be a folder every Ray node can reach or an object "
                    'store\'s URL, e.g. "/shared/ckpt" or "s3://bucket/labbot/runs"'
                )
            _check_store_url(configured_ckpt, "[training] checkpoint_root")
        return cls(
            home=home,
            database_url=env.get("LABBOT_DATABASE_URL") or f"sqlite:///{home / 'labbot.db'}",
            artifacts_root=artifacts_root,
            port=port,
            host=env.get("LABBOT_HOST") or "127.0.0.1",
            public_url=public_url,
            internal_url=internal_url or public_url,
            config_path=config_path,
            config=config,
            ray_address=env.get("RAY_ADDRESS") or None,
            ray_token=env.get("RAY_AUTH_TOKEN") or None,
            codebase_root=Path(env.get("LABBOT_CODEBASE_ROOT") or ".").expanduser().resolve(),
            slack=SlackSettings.from_env(env, config),
            watchdog=WatchdogPolicy.from_config(config),
            paging=PagingPolicy.from_config(config),
            pagerduty_key=env.get("PAGERDUTY_ROUTING_KEY") or None,
            pagerduty_url=env.get("PAGERDUTY_EVENTS_URL") or EVENTS_URL,
            deadman=DeadmanSettings.from_config(config.get("deadman") or {}),
            model=ModelSettings.from_env(env),
            artifacts_url=artifacts_url,
            integrations=Integrations.from_env(env, config),
            compute=ComputePolicy.from_config(config.get("compute")),
            log_format=log_format,
            metrics_token=(env.get("LABBOT_METRICS_TOKEN") or "").strip() or None,
            open_probes=_switch("LABBOT_OPEN_PROBES", env.get("LABBOT_OPEN_PROBES")),
            admin_token_env=_admin_token(env),
            storage_env={k: v for k, v in env.items() if k in STORAGE_ENV and v},
            job_storage_keys=_job_storage_keys(env),
            leader=LeaderSettings.from_config(config, env),
            eval_model_env=eval_job_env(env),
        )

    @property
    def checkpoint_url(self) -> str:
        """Where runs keep their checkpoints: ``[training] checkpoint_root`` (a folder or a URL), else ``runs/``
        under LABBOT_ARTIFACTS_URL (``s3://bucket/prefix/runs`` for an object store: no shared folder needed)."""
        configured = (self.config.get("training") or {}).get("checkpoint_root")
        if configured:
            local = _local_root(configured)
            return str(local) if local is not None else configured.rstrip("/")
        if self.artifacts_root is not None:
            return str(self.artifacts_root / "runs")
        return self.artifacts_url.rstrip("/") + "/runs"

    @property
    def checkpoint_root_declared(self) -> bool:
        """``[training] checkpoint_root`` is set: declared a folder every Ray node mounts (or an object store)."""
        return bool((self.config.get("training") or {}).get("checkpoint_root"))

    @property
    def checkpoint_remote(self) -> bool:
        return _local_root(self.checkpoint_url) is None

    @property
    def checkpoint_root(self) -> Path:
        """The local folder of runs' files the control plane itself reads (an eval run's results): the checkpoint
        folder when that is local, else ``LABBOT_HOME/runs``."""
        local = _local_root(self.checkpoint_url)
        return local if local is not None else self.home / "runs"

    @property
    def job_storage_env(self) -> dict[str, str]:
        """What a job is given to reach the object store its checkpoints go to, only when checkpoints are in one:
        the AWS variables labbot has (``STORAGE_ENV``), its own credentials among them replaced by the job key pair
        (``LABBOT_JOB_AWS_*``) when that is given; nothing of labbot's other secrets."""
        if not self.checkpoint_remote:
            return {}
        if not self.job_storage_keys:
            return dict(self.storage_env)
        kept = {k: v for k, v in self.storage_env.items() if k not in OWN_STORAGE_CREDENTIALS}
        return kept | self.job_storage_keys

    @property
    def jobs_get_labbots_own_keys(self) -> bool:
        """Jobs are handed labbot's own object-store key pair (no ``LABBOT_JOB_AWS_*`` given): worth a warning."""
        return self.checkpoint_remote and not self.job_storage_keys and "AWS_ACCESS_KEY_ID" in self.storage_env

    @property
    def eval_suites_root(self) -> Path:
        """Where eval suites are unpacked for the eval jobs (``[eval] suites_root``; beside the runs by default)."""
        configured = (self.config.get("eval") or {}).get("suites_root")
        if configured:
            return Path(configured).expanduser().resolve()
        return self.checkpoint_root.parent / "eval-suites"

    @property
    def eval_allow_hosts(self) -> list[str]:
        """``[eval] allow_hosts``: the hosts an eval sandbox may reach through labbot's proxy (none by default)."""
        hosts = (self.config.get("eval") or {}).get("allow_hosts") or []
        if not isinstance(hosts, list) or not all(isinstance(h, str) and h.strip() for h in hosts):
            raise BadRequest('labbot.toml: [eval] allow_hosts must be a list of host names, e.g. ["pypi.org"]')
        return [h.strip() for h in hosts]

    @property
    def eval_solver_hosts(self) -> list[str]:
        """``[eval] solver_hosts``: the hosts a run may give its command solver with ``--allow-host`` (none by
        default); unlike ``allow_hosts``, a run gets only those it names."""
        hosts = (self.config.get("eval") or {}).get("solver_hosts") or []
        if not isinstance(hosts, list) or not all(isinstance(h, str) and h.strip() for h in hosts):
            raise BadRequest(
                'labbot.toml: [eval] solver_hosts must be a list of host names, e.g. ["api.anthropic.com"]'
            )
        return [h.strip() for h in hosts]

    @property
    def eval_solver_dirs(self) -> dict[str, Path]:
        """``[eval] solver_dirs``: the folders (installed agents) a command solver may have at ``/solver``, by name;
        none may overlap labbot's own files (``evals.running.solver_access.check_solver_dirs``)."""
        from labbot.evals.running.solver_access import check_solver_dirs

        protected = [self.home, self.eval_suites_root, self.checkpoint_root]
        if self.config_path is not None:
            protected.append(self.config_path)
        return check_solver_dirs((self.config.get("eval") or {}).get("solver_dirs"), protected)

    @property
    def ab_test(self) -> AbTest | None:
        """``[agents.ab]``: the A/B test of the agents' models, or None (checked strictly: a bad table is refused); a
        renamed role's old name in its ``roles`` is read as the new one."""
        from labbot.agents.fleet.roles import current_name  # the roles import the agent runtime: only when read

        agents = self.config.get("agents") or {}
        if not isinstance(agents, dict):
            raise BadRequest("labbot.toml: [agents] must be a table")
        ab = AbTest.from_config(agents.get("ab"))
        if ab is None:
            return None

        def where(role: str) -> str:
            return f'[agents.ab] roles "{role}"'

        return replace(ab, roles=tuple(current_name(role, ab.roles, where) for role in ab.roles))

    @property
    def jobs_table(self) -> dict[str, Any]:
        jobs = dict(self.config.get("jobs", {}))
        base = self.config_path.parent if self.config_path else Path.cwd()
        for body in jobs.values():  # working_dir is relative to labbot.toml, wherever labbot runs from
            if isinstance(body, dict) and body.get("working_dir"):
                body["working_dir"] = str((base / body["working_dir"]).resolve())
        return jobs

    @property
    def admin_token_file(self) -> Path:
        return self.home / "admin_token"

    def admin_token(self, *, create: bool = False) -> str | None:
        """The bearer token of ``/api/v1``: ``LABBOT_ADMIN_TOKEN`` when given, else the file in LABBOT_HOME (mode
        0600), created by ``serve`` on first start."""
        if self.admin_token_env is not None:
            return self.admin_token_env
        path = self.admin_token_file
        if not path.exists():
            if not create:
                return None
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32))
        return path.read_text().strip()


def _job_storage_keys(env: Mapping[str, str]) -> dict[str, str]:
    """``LABBOT_JOB_AWS_*`` as the AWS variables a job reads; both or neither."""
    key_id = (env.get(JOB_KEY_ID_ENV) or "").strip()
    secret = (env.get(JOB_SECRET_ENV) or "").strip()
    if bool(key_id) != bool(secret):
        missing = JOB_SECRET_ENV if key_id else JOB_KEY_ID_ENV
        raise BadRequest(
            f"{missing} is not set: {JOB_KEY_ID_ENV} and {JOB_SECRET_ENV} are the key pair jobs write their "
            "checkpoints with; set both, or neither (jobs then get labbot's own)"
        )
    return {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret} if key_id else {}


def _switch(name: str, given: str | None) -> bool:
    """The on/off variable ``name`` whose value is ``given``: ``1``, ``true``, ``yes`` or ``on`` is on; unset, empty,
    ``0``, ``false``, ``no`` or ``off`` is off; anything else is refused, naming it (a typo must not open a door, nor
    leave one shut unnoticed)."""
    value = (given or "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise BadRequest(f"{name}={(given or '')[:40]!r} is not on or off: use 1 (on) or 0 (off)")


def _admin_token(env: Mapping[str, str]) -> str | None:
    try:
        return given_admin_token(env)
    except ValueError as e:
        raise BadRequest(str(e)) from None


def _config_path(env: Mapping[str, str]) -> Path | None:
    given = env.get("LABBOT_CONFIG")
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise BadRequest(f"LABBOT_CONFIG={given!r}: no such file; point it at a labbot.toml or unset it")
        return path.resolve()
    default = Path("labbot.toml")
    return default.resolve() if default.is_file() else None


def load_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise BadRequest(f"{path.name} is not valid TOML: {e}") from None


def _check_store_url(url: str, what: str) -> None:
    """A local folder, ``file://…`` or a URL fsspec knows (``s3://bucket/prefix``, ``gs://…``, ``az://…``)."""
    scheme = urlparse(url).scheme
    if scheme in ("", "file") or len(scheme) == 1:  # C:\… is a path
        return
    import fsspec

    if scheme not in fsspec.available_protocols():
        raise BadRequest(
            f"{what}={_shown(url)!r}: {scheme}:// is not a storage URL labbot knows; use a local folder or an fsspec "
            "URL such as s3://bucket/prefix (S3 and S3-compatible stores; gs:// and az:// with gcsfs or adlfs "
            "installed)"
        )


def _shown(url: str) -> str:
    """A URL without any user:password in it (fsspec accepts some), for messages."""
    parsed = urlparse(url)
    if parsed.username or parsed.password:
        return parsed._replace(netloc=parsed.hostname or "").geturl()
    return url


def _local_root(url: str) -> Path | None:
    """The local folder of an fsspec URL, or None for a remote store (s3://, gs://, ...)."""
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else url).expanduser().resolve()
    return None
