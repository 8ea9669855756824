"""labbot.bot.config: embedded defaults, labbot.toml, and clear messages for bad settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from labbot.bot.config import Settings
from labbot.common.errors import BadRequest
from labbot.training.registry import JobRegistry


def test_embedded_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = Settings.from_env({})
    assert s.home == tmp_path / ".labbot"
    assert s.database_url == f"sqlite:///{tmp_path / '.labbot' / 'labbot.db'}"
    assert s.port == 3000 and s.public_url == "http://127.0.0.1:3000" and s.host == "127.0.0.1"
    assert s.checkpoint_root == tmp_path / ".labbot" / "artifacts" / "runs"
    assert s.ray_address is None and s.config_path is None


def test_labbot_toml_jobs_and_checkpoint_root(tmp_path: Path) -> None:
    cfg = tmp_path / "conf" / "labbot.toml"
    cfg.parent.mkdir()
    cfg.write_text(
        '[training]\ncheckpoint_root = "/shared/ckpt"\n'
        '[jobs.sft]\nentrypoint = "python train.py"\nworking_dir = "sft"\n'
    )
    s = Settings.from_env({"LABBOT_CONFIG": str(cfg), "LABBOT_HOME": str(tmp_path / "h"), "RAY_AUTH_TOKEN": "tok"})
    assert s.checkpoint_root == Path("/shared/ckpt")
    assert s.jobs_table["sft"]["working_dir"] == str(tmp_path / "conf" / "sft")  # relative to labbot.toml
    assert "tok" not in repr(s)


def test_a_database_url_with_a_password_is_not_in_the_settings_repr(tmp_path: Path) -> None:
    url = "postgresql://labbot:hunter2@db.internal/labbot"
    s = Settings.from_env({"LABBOT_HOME": str(tmp_path), "LABBOT_DATABASE_URL": url})
    assert s.database_url == url and "hunter2" not in repr(s)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LABBOT_PORT": "eighty"}, "LABBOT_PORT='eighty' is not a port number"),
        ({"LABBOT_PORT": "70000"}, "not a port number"),
        ({"LABBOT_CONFIG": "/nonexistent/labbot.toml"}, "no such file"),
        ({"LABBOT_ARTIFACTS_URL": "nosuch://bucket/labbot"}, r"nosuch:// is not a storage URL.*s3://bucket/prefix"),
    ],
)
def test_bad_settings_say_what_is_wrong(env: dict[str, str], message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        Settings.from_env(env)


def test_an_s3_artifacts_url_keeps_checkpoints_under_it(tmp_path: Path) -> None:
    env = {
        "LABBOT_HOME": str(tmp_path / "h"),
        "LABBOT_ARTIFACTS_URL": "s3://bucket/labbot/",
        "AWS_ACCESS_KEY_ID": "AKIA" + "EXAMPLEEXAMPLE00",
        "AWS_SECRET_ACCESS_KEY": "very-secret-" + "value-0123456789",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "SLACK_BOT_TOKEN": "xoxb-" + "not-for-jobs-0123456789",
        "PAGERDUTY_ROUTING_KEY": "not-for-jobs-either",
    }
    s = Settings.from_env(env)
    # no [training] checkpoint_root needed: runs go under the store, no folder shared by every node
    assert s.checkpoint_url == "s3://bucket/labbot/runs" and s.checkpoint_remote
    assert s.checkpoint_root == tmp_path / "h" / "runs"  # what the control plane itself reads (eval results)
    # a job gets the AWS variables, and none of labbot's own secrets
    assert s.job_storage_env == {k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL")}
    assert "very-secret-value" not in repr(s) and "AKIAEXAMPLE" not in repr(s)


def test_jobs_get_their_own_key_pair_instead_of_labbots_when_given(tmp_path: Path) -> None:
    labbots = {
        "AWS_ACCESS_KEY_ID": "AKIA" + "LABBOTSOWNKEY000",
        "AWS_SECRET_ACCESS_KEY": "labbots-own-" + "secret-0123456789",
        "AWS_SESSION_TOKEN": "labbots-own-" + "session-token-0123",
    }
    jobs = {
        "LABBOT_JOB_AWS_ACCESS_KEY_ID": "AKIA" + "JOBSKEYONLYRUNS0",
        "LABBOT_JOB_AWS_SECRET_ACCESS_KEY": "jobs-" + "s3cr3t",
    }
    where = {"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}
    base = {"LABBOT_HOME": str(tmp_path / "h"), "LABBOT_ARTIFACTS_URL": "s3://bucket/prod", **labbots, **where}
    s = Settings.from_env(base | jobs)
    # the job pair under the names the AWS SDK reads, the non-secret variables as before, nothing of labbot's own
    assert s.job_storage_env == {
        "AWS_ACCESS_KEY_ID": jobs["LABBOT_JOB_AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": jobs["LABBOT_JOB_AWS_SECRET_ACCESS_KEY"],
        **where,
    }
    assert not s.jobs_get_labbots_own_keys
    assert not any(v in repr(s) for v in [*labbots.values(), *jobs.values()])
    # without them: labbot's own, which serve warns about
    s = Settings.from_env(base)
    assert s.job_storage_env == labbots | where and s.jobs_get_labbots_own_keys
    # checkpoints in a shared folder: a job gets no key at all
    cfg = tmp_path / "labbot.toml"
    cfg.write_text('[training]\ncheckpoint_root = "/shared/ckpt"\n')
    s = Settings.from_env(base | jobs | {"LABBOT_CONFIG": str(cfg)})
    assert s.job_storage_env == {} and not s.jobs_get_labbots_own_keys


@pytest.mark.parametrize("given", ["LABBOT_JOB_AWS_ACCESS_KEY_ID", "LABBOT_JOB_AWS_SECRET_ACCESS_KEY"])
def test_the_job_key_pair_is_both_or_neither(tmp_path: Path, given: str) -> None:
    missing = ({"LABBOT_JOB_AWS_ACCESS_KEY_ID", "LABBOT_JOB_AWS_SECRET_ACCESS_KEY"} - {given}).pop()
    with pytest.raises(BadRequest, match=f"^{missing} is not set") as e:
        Settings.from_env({"LABBOT_HOME": str(tmp_path), given: "half-of-a-pair-0123456789"})
    assert "half-of-a-pair" not in e.value.message


def test_the_internal_url_jobs_and_labbots_mcp_servers_use(tmp_path: Path) -> None:
    home = {"LABBOT_HOME": str(tmp_path)}
    s = Settings.from_env(home | {"LABBOT_PUBLIC_URL": "https://labbot.example.com/"})
    assert s.internal_url == s.public_url == "https://labbot.example.com"  # one URL unless told otherwise
    s = Settings.from_env(
        home | {"LABBOT_PUBLIC_URL": "https://labbot.example.com", "LABBOT_INTERNAL_URL": "http://labbot.labbot.svc/"}
    )
    assert (s.public_url, s.internal_url) == ("https://labbot.example.com", "http://labbot.labbot.svc")
    with pytest.raises(BadRequest, match=r"LABBOT_INTERNAL_URL='labbot\.labbot\.svc' is not an http\(s\) URL"):
        Settings.from_env(home | {"LABBOT_INTERNAL_URL": "labbot.labbot.svc"})


def test_checkpoint_root_may_be_a_url_or_a_folder(tmp_path: Path) -> None:
    cfg = tmp_path / "labbot.toml"
    cfg.write_text('[training]\ncheckpoint_root = "s3://ckpts/labbot/runs/"\n')
    s = Settings.from_env({"LABBOT_CONFIG": str(cfg), "LABBOT_HOME": str(tmp_path), "AWS_REGION": "eu-west-1"})
    assert s.checkpoint_url == "s3://ckpts/labbot/runs" and s.job_storage_env == {"AWS_REGION": "eu-west-1"}
    cfg.write_text('[training]\ncheckpoint_root = "/shared/ckpt"\n')
    s = Settings.from_env({"LABBOT_CONFIG": str(cfg), "LABBOT_ARTIFACTS_URL": "s3://b/p", "AWS_REGION": "eu-west-1"})
    assert s.checkpoint_url == "/shared/ckpt" and not s.checkpoint_remote and s.job_storage_env == {}
    cfg.write_text("[training]\ncheckpoint_root = 3\n")
    with pytest.raises(BadRequest, match=r"checkpoint_root must be a folder .* or an object store's URL"):
        Settings.from_env({"LABBOT_CONFIG": str(cfg)})


def test_invalid_toml(tmp_path: Path) -> None:
    bad = tmp_path / "labbot.toml"
    bad.write_text("[jobs\n")
    with pytest.raises(BadRequest, match=r"labbot\.toml is not valid TOML"):
        Settings.from_env({"LABBOT_CONFIG": str(bad)})


def test_admin_token_is_created_once_and_private(tmp_path: Path) -> None:
    s = Settings.from_env({"LABBOT_HOME": str(tmp_path)})
    assert s.admin_token() is None
    token = s.admin_token(create=True)
    assert token and s.admin_token(create=True) == token
    assert (tmp_path / "admin_token").stat().st_mode & 0o077 == 0


def test_an_admin_token_given_is_the_one_used_and_none_is_written(tmp_path: Path) -> None:
    given = "replicas-share-" + "this-one-from-a-secret-0123"
    (tmp_path / "admin_token").write_text("an-older-token-of-this-home-0123456789")
    s = Settings.from_env({"LABBOT_HOME": str(tmp_path / "fresh"), "LABBOT_ADMIN_TOKEN": f" {given}\n"})
    assert s.admin_token() == s.admin_token(create=True) == given
    assert not (tmp_path / "fresh" / "admin_token").exists()
    assert given not in repr(s)
    s = Settings.from_env({"LABBOT_HOME": str(tmp_path), "LABBOT_ADMIN_TOKEN": given})
    assert s.admin_token(create=True) == given, "the variable wins over a file left from before"
    assert Settings.from_env({"LABBOT_HOME": str(tmp_path), "LABBOT_ADMIN_TOKEN": ""}).admin_token() != given


@pytest.mark.parametrize(
    "value", ["short-" + "token", "x" * 20 + " " + "y" * 20, "z" * 40 + '"', "é" * 40, "a" * 30 + "\t" + "b" * 10]
)
def test_an_admin_token_that_cannot_be_one_is_refused_without_showing_it(tmp_path: Path, value: str) -> None:
    with pytest.raises(BadRequest) as e:
        Settings.from_env({"LABBOT_HOME": str(tmp_path), "LABBOT_ADMIN_TOKEN": value})
    message = str(e.value)
    assert "LABBOT_ADMIN_TOKEN" in message and "at least 32" in message and "openssl rand" in message
    assert value.strip() not in message


def test_watchdog_rl_thresholds_and_a_jobs_alerts_from_labbot_toml(tmp_path: Path) -> None:
    cfg = tmp_path / "labbot.toml"
    cfg.write_text(
        "[watchdog]\nkl_max = 4.0\nno_signal_points = 30\n"
        '[jobs.my-rl]\nentrypoint = "python rl.py"\n'
        '[[jobs.my-rl.alerts]]\nmetric = "pass_rate"\ncondition = "below"\nthreshold = 0.2\nfor = "10m"\n'
    )
    s = Settings.from_env({"LABBOT_CONFIG": str(cfg), "LABBOT_HOME": str(tmp_path / "h"), "RAY_AUTH_TOKEN": "tok"})
    assert dict(s.watchdog.watch) == {"kl_max": 4.0, "no_signal_points": 30.0}
    [alert] = JobRegistry.from_config(s.jobs_table).get("my-rl").alerts
    assert alert == {
        "name": "pass_rate-below",
        "metric": "pass_rate",
        "condition": "below",
        "threshold": 0.2,
        "for_s": 600.0,
        "severity": "page",
    }
    cfg.write_text("[watchdog]\nentropy_floor = -1\n")
    with pytest.raises(BadRequest, match=r"\[watchdog\]: threshold entropy_floor=-1 must be a number ≥ 0"):
        Settings.from_env({"LABBOT_CONFIG": str(cfg), "LABBOT_HOME": str(tmp_path / "h"), "RAY_AUTH_TOKEN": "tok"})


def test_leader_lease_defaults_labbot_toml_and_the_replica_name(tmp_path: Path) -> None:
    home = {"LABBOT_HOME": str(tmp_path / "home")}
    s = Settings.from_env(home)
    assert (s.leader.lease_s, s.leader.renew_s, s.leader.replica) == (6.0, 1.0, None)
    cfg = tmp_path / "labbot.toml"
    cfg.write_text('[leader]\nlease = "10s"\nrenew = "2s"\n')
    s = Settings.from_env({**home, "LABBOT_CONFIG": str(cfg), "LABBOT_REPLICA": "labbot-7d9f-x2"})
    assert (s.leader.lease_s, s.leader.renew_s, s.leader.replica) == (10.0, 2.0, "labbot-7d9f-x2")


@pytest.mark.parametrize(
    ("toml", "env", "message"),
    [
        ('[leader]\nlease = "2s"\nrenew = "1.5s"\n', {}, "renewed at least twice"),
        ('[leader]\nlease = "0.5s"\n', {}, "at least 1s"),
        ('[leader]\nttl = "6s"\n', {}, "has no ttl; it takes lease and renew"),
        ("leader = 3\n", {}, "must be a table"),
        ("", {"LABBOT_REPLICA": "pod:1"}, "without ':'"),
    ],
)
def test_bad_leader_settings_say_what_would_do(tmp_path: Path, toml: str, env: dict[str, str], message: str) -> None:
    cfg = tmp_path / "labbot.toml"
    cfg.write_text(toml)
    with pytest.raises(BadRequest, match=message):
        Settings.from_env({"LABBOT_HOME": str(tmp_path / "home"), "LABBOT_CONFIG": str(cfg), **env})
