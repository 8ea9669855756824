"""What a command solver may be given beyond its task, so that an installed agent can be evaluated as it is: a folder
of its own read-only at ``/solver``, hosts it may reach through the allow-list proxy, and secrets of its own.

Each is checked twice: where a run is asked for (the control plane, :class:`SolverAccess`, before anything is
created) and where the eval job runs (possibly another machine: :func:`job_solver_dir`, :func:`read_secrets`).

- **Folder**: only by *name*, from ``[eval] solver_dirs`` (``{my-agent = "/opt/agents/my-agent"}``), at every front
  door (CLI, API, Slack, agents): nobody asking for a run can name a host path. The admin's paths are checked when
  labbot.toml is read (:func:`check_solver_dirs`): absolute, and neither inside nor above labbot's home, its suites,
  its runs' files or labbot.toml itself (so the database, tokens and Ray's state are never bindable). The job gets
  the table in ``LABBOT_EVAL_SOLVER_DIRS`` and the name in ``--solver-dir``, and checks the folder exists there.
- **Hosts**: ``--allow-host HOST`` per run, each one allowed by ``[eval] solver_hosts`` (exact names, ``*.domain``
  wildcards, IPs: a wildcard entry lets a run name any host under it). They go to the run's sandboxes with
  ``[eval] allow_hosts`` (what every run gets); scoring never has a network.
- **Secrets**: ``--solver-env NAME`` names variables the *caller* sends with the launch (the CLI reads them from its
  own environment; labbot serve's environment is never read). The control plane writes them to a file readable by
  its user only, under the suites root (``.solver-env/ID.json``, where the job already reads its suite); the run's
  params hold the names and that file's random id, never a value. The job reads the file and deletes it before
  anything else, and they reach only the command solver's environment (a file bound read-only with its task
  statement and sourced before the command, not on bwrap's command line): not the battery, not scoring, not the
  logs; what the command printed is kept with every value replaced by ``[redacted]``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from labbot.common.errors import BadRequest
from labbot.common.redact import REDACTED
from labbot.evals.sandbox.proxy import AllowList

SOLVER_DIR = "/solver"  # where the folder is bound, read-only
ENV_SOLVER_DIRS = "LABBOT_EVAL_SOLVER_DIRS"  # the job's copy of [eval] solver_dirs, as JSON {name: path}
SECRETS_DIR = ".solver-env"  # under the suites root
SECRET_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
DIR_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
RESERVED_ENV = frozenset({"PATH", "HOME", "USER", "TMPDIR", "LANG", "VIRTUAL_ENV", "PWD"})
MIN_SECRET = 8  # a shorter value could not be told apart from ordinary text when it is redacted
MAX_SECRETS = 16
MAX_SECRET_BYTES = 16 * 1024
STALE_SECRETS_S = 24 * 3600.0  # a file whose run never started is removed by the next launch after this


def _overlaps(a: Path, b: Path) -> bool:
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


def check_solver_dirs(table: object, protected: Sequence[Path]) -> dict[str, Path]:
    """``[eval] solver_dirs`` checked: names of lowercase letters, digits, ``-_.``; absolute paths, resolved, that
    overlap none of ``protected`` (labbot's home, suites, runs, labbot.toml)."""
    if table is None:
        return {}
    example = '[eval] solver_dirs = {my-agent = "/opt/agents/my-agent"}'
    if not isinstance(table, Mapping):
        raise BadRequest(f"labbot.toml: [eval] solver_dirs must be a table of names to folders, e.g. {example}")
    out: dict[str, Path] = {}
    for name, raw in table.items():
        if not isinstance(name, str) or not DIR_NAME.fullmatch(name):
            raise BadRequest(
                f"labbot.toml: [eval] solver_dirs name {str(name)[:60]!r} must be lowercase letters, digits, - _ . "
                f"(e.g. {example})"
            )
        if not isinstance(raw, str) or not raw.startswith("/"):
            raise BadRequest(f"labbot.toml: [eval] solver_dirs.{name} must be an absolute path, e.g. {example}")
        path = Path(os.path.realpath(raw))
        for guarded in protected:
            if _overlaps(path, Path(os.path.realpath(guarded))):
                raise BadRequest(
                    f"labbot.toml: [eval] solver_dirs.{name} = {raw!r} overlaps {guarded} (labbot's own files: its "
                    "home, database, tokens, suites or runs): give the agent a folder of its own, e.g. /opt/agents/NAME"
                )
        out[name] = path
    return out


class SolverAccess:
    """The control plane's checks of what a run asks for its command solver (``EvalService.launch``)."""

    def __init__(
        self,
        solver_dirs: Mapping[str, Path] | None = None,
        solver_hosts: Sequence[str] = (),
        base_hosts: Sequence[str] = (),
    ) -> None:
        self.solver_dirs = dict(solver_dirs or {})
        self.solver_hosts = tuple(solver_hosts)
        AllowList.parse([*solver_hosts, *base_hosts])  # a bad entry is refused when labbot starts, not at a launch

    def solver_dir(self, name: str) -> str:
        configured = ", ".join(sorted(self.solver_dirs)) or "none: an admin adds them to [eval] solver_dirs"
        if name not in self.solver_dirs:
            shown = name if len(name) <= 80 else name[:80] + "…"
            hint = " (a name, not a path: the folders are labbot.toml's)" if "/" in name else ""
            raise BadRequest(f"--solver-dir {shown!r} is not one of [eval] solver_dirs{hint}; configured: {configured}")
        return name

    def hosts(self, asked: Sequence[str]) -> list[str]:
        """The hosts asked for, each allowed by ``[eval] solver_hosts`` (a wildcard asked for must be listed as is)."""
        allowed = AllowList.parse(self.solver_hosts)
        listed = ", ".join(self.solver_hosts) or "none: an admin adds them to [eval] solver_hosts"
        out: list[str] = []
        for raw in asked:
            host = raw.strip().lower().rstrip(".")
            AllowList.parse([host])  # BadRequest naming the accepted forms
            if host.startswith("*."):
                refused = host not in {h.strip().lower().rstrip(".") for h in self.solver_hosts}
            else:
                refused = allowed.refusal(host) is not None
            if refused:
                raise BadRequest(f"--allow-host {host[:100]!r} is not allowed by [eval] solver_hosts ({listed})")
            out.append(host)
        return list(dict.fromkeys(out))


def check_secret_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables a caller sends for its solver: names of a variable's form (not ``LABBOT_*`` nor the
    sandbox's own), values long enough to be redacted. Messages name the variable, never its value."""
    if len(env) > MAX_SECRETS:
        raise BadRequest(f"--solver-env: at most {MAX_SECRETS} variables per run, got {len(env)}")
    out: dict[str, str] = {}
    for name, value in env.items():
        if not ENV_NAME.fullmatch(name) or name.startswith("LABBOT_") or name in RESERVED_ENV:
            raise BadRequest(
                f"--solver-env {name[:60]!r} is not a variable a solver may be given: a name such as "
                f"ANTHROPIC_API_KEY, not LABBOT_* nor {', '.join(sorted(RESERVED_ENV))}"
            )
        if not isinstance(value, str) or len(value.strip()) < MIN_SECRET or len(value) > MAX_SECRET_BYTES:
            raise BadRequest(
                f"--solver-env {name}: its value must be {MIN_SECRET} to {MAX_SECRET_BYTES} characters (a secret such "
                "as an API key; set it in your environment before `labbot eval run`, and pass settings in the command)"
            )
        if "\0" in value:
            raise BadRequest(f"--solver-env {name}: its value holds a NUL character")
        out[name] = value
    return out


def write_secrets(suites_root: Path, env: Mapping[str, str]) -> str:
    """Keep ``env`` for one run's job: a file only labbot's user can read; returns its id (the run's params hold it).
    Files older than a day (runs that never started) are removed on the way."""
    folder = suites_root / SECRETS_DIR
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.chmod(0o700)
    now = time.time()
    for old in folder.glob("*.json"):
        try:
            if now - old.stat().st_mtime > STALE_SECRETS_S:
                old.unlink()
        except OSError:
            continue
    ident = secrets.token_urlsafe(24)
    fd = os.open(folder / f"{ident}.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(dict(env), f)
    return ident


def drop_secrets(suites_root: Path, ident: str) -> None:
    if SECRET_ID.fullmatch(ident):
        (suites_root / SECRETS_DIR / f"{ident}.json").unlink(missing_ok=True)


def read_secrets(suites_root: Path, ident: str, names: Sequence[str]) -> dict[str, str]:
    """The job's side: the variables kept for it, read once (the file is deleted); they must be ``names``."""
    if not SECRET_ID.fullmatch(ident):
        raise BadRequest("--solver-env-file is not an id labbot wrote")
    path = suites_root / SECRETS_DIR / f"{ident}.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise BadRequest(
            f"the solver's variables ({', '.join(names)}) are gone: they are read once, by the run's first start "
            "(launch the run again with --solver-env)"
        ) from None
    finally:
        path.unlink(missing_ok=True)
    if not isinstance(doc, dict) or sorted(doc) != sorted(names):
        raise BadRequest(f"the solver's variables kept for this run are not {', '.join(names)}")
    return {str(k): str(v) for k, v in doc.items()}


def redact_values(text: str, values: Sequence[str]) -> str:
    for value in sorted((v for v in values if v), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


def job_solver_dir(name: str, environ: Mapping[str, str] | None = None) -> Path:
    """The folder ``--solver-dir`` names, where the job runs: a name of ``LABBOT_EVAL_SOLVER_DIRS`` (set by labbot
    for its eval jobs), or, only in a job run by hand (no table), an absolute path. It must exist here."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_SOLVER_DIRS)
    if raw is None:
        if not name.startswith("/"):
            raise BadRequest(
                f"--solver-dir {name!r}: a name needs ${ENV_SOLVER_DIRS} (labbot sets it); by hand give a path"
            )
        path = Path(os.path.realpath(name))
    else:
        table = json.loads(raw)
        if name not in table:
            configured = ", ".join(sorted(table)) or "none"
            raise BadRequest(f"--solver-dir {name[:80]!r} is not one of [eval] solver_dirs; configured: {configured}")
        path = Path(os.path.realpath(table[name]))
    if not path.is_dir():
        raise BadRequest(
            f"the solver dir {name} ({path}) does not exist on this machine ({os.uname().nodename}), where the eval "
            "job runs: install the agent there (every Ray node that runs eval jobs needs it)"
        )
    protect = [Path(os.path.realpath(p)) for p in env.get("LABBOT_EVAL_PROTECT", "").split(os.pathsep) if p]
    for guarded in protect:
        if _overlaps(path, guarded):
            raise BadRequest(f"the solver dir {name} ({path}) overlaps {guarded}, labbot's own files: it is not bound")
    return path
