"""An installed agent evaluated as it is: a folder of its own read-only at ``/solver`` (``--solver-dir``), hosts of
its own through the proxy (``--allow-host``), secrets of its own (``--solver-env``), and the battery measured with
that folder and those hosts in place. Real bubblewrap, real inspect runs, over ``run_fixtures``' ``mul`` suite.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log
from run_fixtures import CANARY, build_pytest_venv, make_suite
from seal_repo import HOST_BODY

from labbot.common.errors import BadRequest
from labbot.evals.running import job
from labbot.evals.running.runner import RESULTS_FILE, run_suite
from labbot.evals.running.solver_access import (
    ENV_SOLVER_DIRS,
    SECRETS_DIR,
    SolverAccess,
    check_secret_env,
    check_solver_dirs,
    job_solver_dir,
    read_secrets,
    write_secrets,
)
from labbot.evals.running.solvers import MAX_COMMAND, parse_solver
from labbot.evals.sandbox.bwrap import Limits
from labbot.evals.sandbox.venvs import base_python
from labbot.evals.seal.battery import battery
from labbot.evals.seal.contamination import PROBE_NAME as CONTENT_PROBE
from labbot.evals.suite import load

FAST = Limits(timeout_s=60.0, memory_mb=4096, file_mb=256)
AGENT = textwrap.dedent(
    """\
    import os, sys
    statement = open(os.environ["LABBOT_TASK_FILE"]).read()
    print("venv:", sys.prefix)
    print("statement:", statement.strip()[:40])
    try:
        open("/solver/planted", "w")
        print("SOLVER-WRITABLE")
    except OSError:
        print("SOLVER-READONLY")
    body = "return a + b" if "--wrong" in sys.argv else "return a * b"  # the wrong fix: a sum
    path = "mathlib/ops.py"
    src = open(path).read()
    open(path, "w").write(src.replace('raise NotImplementedError("mul")', body))
    print("fixed mul with", body)
    """
)
AGENT_CMD = '/solver/venv/bin/python /solver/agent.py --task "$LABBOT_TASK_FILE"'


@pytest.fixture(scope="session")
def pytest_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pytest_venv(tmp_path_factory.mktemp("venv") / "venv")


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An installed agent: a venv made from the base interpreter suite venvs use, and its script."""
    folder = tmp_path_factory.mktemp("agents") / "my-agent"
    folder.mkdir()
    subprocess.run([str(base_python()), "-m", "venv", "--without-pip", str(folder / "venv")], check=True)
    (folder / "agent.py").write_text(AGENT)
    return folder


def _suite(tmp_path: Path) -> Path:
    folder = tmp_path / "suite"
    folder.mkdir()
    make_suite(folder)
    return folder


@pytest.mark.subprocess
def test_solver_dir_agent_with_its_own_venv_passes_and_its_wrong_fix_fails(
    tmp_path: Path, pytest_venv: Path, agent_dir: Path
) -> None:
    suite_dir = _suite(tmp_path)
    right = run_suite(
        suite_dir, AGENT_CMD, tmp_path / "right", venv=pytest_venv, limits=FAST, tamper=False, solver_dir=agent_dir
    )
    [sample] = right.results["samples"]
    lines = sample["output"].splitlines()
    assert "venv: /solver/venv" in lines  # the agent's own venv, through its link to the host's interpreter
    assert "statement: Implement `mul(a, b)`" in sample["output"]
    assert "SOLVER-READONLY" in lines and not (agent_dir / "planted").exists()
    assert right.results["pass_rate"] == 1.0 and lines[-1] == "[exit 0]"

    wrong = run_suite(
        suite_dir,
        AGENT_CMD + " --wrong",
        tmp_path / "wrong",
        venv=pytest_venv,
        limits=FAST,
        tamper=False,
        solver_dir=agent_dir,
    )
    assert "fixed mul with return a + b" in wrong.results["samples"][0]["output"]
    assert wrong.results["pass_rate"] == 0.0

    # without the folder the same command finds no agent
    bare = run_suite(suite_dir, AGENT_CMD, tmp_path / "bare", venv=pytest_venv, limits=FAST, tamper=False)
    assert bare.results["pass_rate"] == 0.0 and "[exit 127]" in bare.results["samples"][0]["output"]


def test_solver_dir_names_paths_and_hosts_are_checked(tmp_path: Path, agent_dir: Path) -> None:
    home = tmp_path / "home"
    (home / "runs").mkdir(parents=True)
    access = SolverAccess({"my-agent": agent_dir, "other": tmp_path}, ["api.anthropic.com", "*.example.com"])
    assert access.solver_dir("my-agent") == "my-agent"
    with pytest.raises(BadRequest, match=r"'nope' is not one of \[eval\] solver_dirs; configured: my-agent, other"):
        access.solver_dir("nope")
    with pytest.raises(BadRequest, match=r"a name, not a path.*configured: my-agent, other"):
        access.solver_dir(str(agent_dir))
    with pytest.raises(BadRequest, match="configured: none: an admin adds them"):
        SolverAccess().solver_dir("my-agent")

    assert access.hosts(["API.anthropic.com", "a.example.com"]) == ["api.anthropic.com", "a.example.com"]
    for refused in ("pypi.org", "*.anthropic.com", "127.0.0.1"):
        with pytest.raises(BadRequest, match=r"is not allowed by \[eval\] solver_hosts"):
            access.hosts([refused])
    with pytest.raises(BadRequest, match="is not a host"):
        access.hosts(["http://x/"])

    # the admin's table: labbot's own files are never bindable, nor a folder above them
    assert check_solver_dirs({"my-agent": str(agent_dir)}, [home]) == {"my-agent": agent_dir.resolve()}
    for path in (str(home), str(home / "runs"), str(tmp_path), "/"):
        with pytest.raises(BadRequest, match=r"overlaps .*labbot's own files"):
            check_solver_dirs({"x": path}, [home])
    with pytest.raises(BadRequest, match="must be an absolute path"):
        check_solver_dirs({"x": "agents/x"}, [home])
    with pytest.raises(BadRequest, match="must be lowercase letters"):
        check_solver_dirs({"My Agent": "/opt/x"}, [home])

    # where the job runs: a name of the table it was given, and a folder that exists there
    table = {ENV_SOLVER_DIRS: json.dumps({"my-agent": str(agent_dir), "gone": str(tmp_path / "gone")})}
    assert job_solver_dir("my-agent", table) == agent_dir.resolve()
    with pytest.raises(BadRequest, match=r"does not exist on this machine .*install the agent there"):
        job_solver_dir("gone", table)
    with pytest.raises(BadRequest, match="configured: gone, my-agent"):
        job_solver_dir(str(agent_dir), table)  # through labbot, never a path
    with pytest.raises(BadRequest, match="overlaps"):
        job_solver_dir("my-agent", {**table, "LABBOT_EVAL_PROTECT": str(agent_dir.parent)})

    # the command's cap says where a long invocation belongs
    with pytest.raises(BadRequest, match=r"over the 2000 .*script in the agent's folder"):
        parse_solver("/solver/bin/agent " + "x" * MAX_COMMAND)


@pytest.mark.subprocess
def test_job_refuses_an_unknown_or_missing_solver_dir_before_running(
    tmp_path: Path,
    pytest_venv: Path,
    agent_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    suite_dir = _suite(tmp_path)
    monkeypatch.setenv(ENV_SOLVER_DIRS, json.dumps({"my-agent": str(agent_dir), "gone": str(tmp_path / "gone")}))
    base = ["--suite", str(suite_dir), "--out", str(tmp_path / "out"), "--venv", str(pytest_venv)]
    assert job.main([*base, "--solver", AGENT_CMD, "--solver-dir", "nope"]) == 2
    assert "configured: gone, my-agent" in capsys.readouterr().err
    assert job.main([*base, "--solver", AGENT_CMD, "--solver_dir", "gone"]) == 2
    assert "does not exist on this machine" in capsys.readouterr().err
    assert job.main([*base, "--solver", "gold", "--solver_dir", "my-agent"]) == 2
    assert "are for a command solver, not gold" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing ran


@pytest.mark.subprocess
def test_battery_measures_the_solver_dir(tmp_path: Path, pytest_venv: Path, agent_dir: Path) -> None:
    suite_dir = _suite(tmp_path)
    task = load(suite_dir).tasks[0]
    clean = battery(suite_dir, task, pytest_venv, solver_dir=agent_dir)
    assert clean.sealed, [p for p in clean.failed()]
    leaky = tmp_path / "leaky-agent"
    leaky.mkdir()
    (leaky / "notes.py").write_text(f"def mul(a, b):\n    # {CANARY}\n    return a * b\n")  # the original, carried
    report = battery(suite_dir, task, pytest_venv, solver_dir=leaky)
    failed = {p.name: p for p in report.failed()}  # the canary probe, and the content walk (the body by its AST)
    assert set(failed) == {"canaries and deleted code on any readable mount", CONTENT_PROBE}, list(failed)
    assert all("/solver/notes.py" in p.evidence for p in failed.values()) and not report.sealed


FETCH = (
    "/solver/venv/bin/python -c \"import urllib.request as u; print(u.urlopen('{url}', timeout=10).read().decode())\""
)


@pytest.mark.subprocess
def test_allowed_host_reaches_the_solver_only_and_scoring_has_no_network(
    tmp_path: Path, pytest_venv: Path, agent_dir: Path, host_server: int
) -> None:
    suite_dir = _suite(tmp_path)
    url = f"http://127.0.0.1:{host_server}/"
    # the fix itself fetches the host: it works where the solver runs, and fails under scoring (no network there)
    fix = (
        'sed -i \'s|raise NotImplementedError("mul")|'
        f'import urllib.request as u; u.urlopen("{url}", timeout=5); return a * b|\' mathlib/ops.py'
    )
    check = "/solver/venv/bin/python -c \"from mathlib.ops import mul; print('MUL', mul(2, 3))\""
    command = f"{FETCH.format(url=url)}; {fix}; {check}"

    def run(name: str, hosts: list[str]) -> dict:
        out = run_suite(
            suite_dir, command, tmp_path / name, venv=pytest_venv, limits=FAST, tamper=False, solver_dir=agent_dir,
            allow_hosts=hosts,
        )  # fmt: skip
        return out.results

    allowed = run("allowed", ["127.0.0.1"])
    [sample] = allowed["samples"]
    assert HOST_BODY.decode() in sample["output"] and "MUL 6" in sample["output"]
    assert sample["passed"] is False  # the tests ran sealed: the same fetch failed there

    [sample] = run("refused", [])["samples"]
    assert HOST_BODY.decode() not in sample["output"] and "MUL 6" not in sample["output"]


SECRET = "sk-agent-test-0123456789abcdef"


@pytest.mark.subprocess
def test_solver_env_reaches_the_command_only_and_is_shown_nowhere(
    tmp_path: Path, pytest_venv: Path, agent_dir: Path
) -> None:
    suite_dir = _suite(tmp_path)
    root = tmp_path / "suites"
    ident = write_secrets(root, check_secret_env({"AGENT_API_KEY": SECRET}))
    folder = root / SECRETS_DIR
    assert folder.stat().st_mode & 0o777 == 0o700 and (folder / f"{ident}.json").stat().st_mode & 0o777 == 0o600
    env = read_secrets(root, ident, ["AGENT_API_KEY"])
    assert env == {"AGENT_API_KEY": SECRET} and not (folder / f"{ident}.json").exists()  # read once
    with pytest.raises(BadRequest, match="read once") as gone:
        read_secrets(root, ident, ["AGENT_API_KEY"])
    assert SECRET not in gone.value.message
    for bad in ({"LABBOT_TOKEN": SECRET}, {"PATH": SECRET}, {"KEY": "short"}):
        with pytest.raises(BadRequest) as refused:
            check_secret_env(bad)
        assert SECRET not in refused.value.message

    # the value is never written in the command: its shape is checked, and every command line in the sandbox (bwrap
    # is its PID 1) searched for it, with the pattern put together at run time
    command = (
        'echo "key=$AGENT_API_KEY"; case "$AGENT_API_KEY" in sk-agent-test-*) echo KEY-OK;; esac; '
        "p=$(printf '%s%s' 0123456789 abcdef); "
        "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done > /tmp/cl; "
        'echo "cmdlines=$(grep -c "$p" /tmp/cl)"; '
        "sed -i 's/raise NotImplementedError(\"mul\")/return a * b/' mathlib/ops.py"
    )
    out = run_suite(suite_dir, command, tmp_path / "out", venv=pytest_venv, limits=FAST, tamper=False, solver_env=env)
    [sample] = out.results["samples"]
    assert "KEY-OK" in sample["output"] and "key=[redacted]" in sample["output"]
    assert "cmdlines=0" in sample["output"].splitlines()  # not on bwrap's command line (a host's `ps` shows that)
    assert out.results["pass_rate"] == 1.0
    log = read_eval_log(str(out.log))
    shown = [out.results_path.read_text(), log.model_dump_json()]
    assert all(SECRET not in text for text in shown)
    assert all(SECRET.encode() not in p.read_bytes() for p in (tmp_path / "out").iterdir())
    assert SECRET not in json.dumps(out.results) and out.results_path.name == RESULTS_FILE


def test_launch_keeps_the_secret_out_of_the_run_and_refuses_before_creating_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent_dir: Path
) -> None:
    from eval_services import make_eval_service
    from eval_services import make_suite as make_service_suite

    svc = make_eval_service(tmp_path, monkeypatch)
    svc.access = SolverAccess({"my-agent": agent_dir}, ["api.anthropic.com"])
    suite = make_service_suite(svc.suites_root / "x").id
    (svc.suites_root / "x").rename(svc.suites_root / suite)
    submitted: list = svc.submitted  # type: ignore[attr-defined]

    for kwargs, says in (
        ({"solver_dir": "nope"}, "configured: my-agent"),
        ({"solver_dir": str(agent_dir)}, "a name, not a path"),
        ({"allow_hosts": ["pypi.org"]}, "not allowed by [eval] solver_hosts (api.anthropic.com)"),
        ({"solver_env": {"KEY": "short"}}, "8 to 16384 characters"),
    ):
        with pytest.raises(BadRequest, match=re.escape(says)):
            svc.launch(suite, solver=AGENT_CMD, owner="alice", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match="are for a command solver"):
        svc.launch(suite, solver="gold", owner="alice", solver_dir="my-agent")
    assert svc.runs.runs() == [] and submitted == []

    run = svc.launch(
        suite,
        solver=AGENT_CMD,
        owner="alice",
        solver_dir="my-agent",
        allow_hosts=["api.anthropic.com"],
        solver_env={"ANTHROPIC_API_KEY": SECRET},
    )
    params = svc.runs.get(run["id"])["params"]
    assert params["solver_dir"] == "my-agent" and params["allow_hosts"] == "api.anthropic.com"
    assert params["solver_env"] == "ANTHROPIC_API_KEY"
    shown = [json.dumps(svc.runs.get(run["id"])), json.dumps(svc.results(run["id"])), repr(submitted), repr(run)]
    assert all(SECRET not in text for text in shown)
    assert "my-agent" in repr(submitted)
    # what the job reads, once, by the id the run's params hold
    kept = read_secrets(svc.suites_root, params["solver_env_file"], ["ANTHROPIC_API_KEY"])
    assert kept == {"ANTHROPIC_API_KEY": SECRET} and not any((svc.suites_root / SECRETS_DIR).iterdir())
