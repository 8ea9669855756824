"""The `labbot` CLI against a real control plane: bad input is refused with a clear message and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from support import Serve, free_port

from labbot.bot.cli import main as cli_main
from labbot.common.api_client import ApiClient


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["launch", "nope"], "unknown job 'nope'; known jobs: eval, eval-generate, eval-incidents, tiny-lm, tiny-rl"),
        (["launch", "tiny-lm", "steps"], "bad KEY=VALUE 'steps': write parameters as key=value"),
        (["launch", "tiny-lm", "steps=ten"], "parameter 'steps' expects an integer, got 'ten'"),
        (["launch", "tiny-lm", "stepz=10"], "unknown parameter stepz for job tiny-lm; accepted:"),
        (["launch", "tiny-lm", "--stall-after", "soon"], "bad duration 'soon': use a number with a unit"),
        (["launch", "tiny-lm", "--alert", "loss under 2"], "condition 'under' is not one of above, below, flat, nan"),
        (["launch", "tiny-lm", "--watch", "kl_maximum=3"], "unknown threshold 'kl_maximum'; accepted: no_signal_frac"),
        (["run", "nosuch"], "unknown run 'nosuch'"),
        (["stop", "nosuch"], "unknown run 'nosuch'"),
        (["restart", "nosuch"], "unknown run 'nosuch'"),
        (["logs", "nosuch"], "unknown run 'nosuch'"),
        (["launch"], "the following arguments are required: job"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(module_serve: Serve, args: list[str], message: str) -> None:
    out = module_serve.cli(*args)
    assert out.returncode == 2, out
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert json.loads(module_serve.cli("runs", "--json").stdout) == []


@pytest.mark.subprocess
def test_no_control_plane_says_how_to_start_it(tmp_path: Path) -> None:
    s = Serve(tmp_path, ray_address=None, ray_token=None, port=free_port())
    (tmp_path / "admin_token").write_text("x")
    out = s.cli("runs")
    assert out.returncode == 1
    assert f"not answering at {s.url}" in out.stderr and "labbot serve" in out.stderr


@pytest.mark.subprocess
def test_no_admin_token_says_how_to_start_labbot(tmp_path: Path) -> None:
    s = Serve(tmp_path, ray_address=None, ray_token=None, port=free_port())
    out = s.cli("runs")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr == (
        f"labbot: no admin token at {tmp_path / 'admin_token'}: start the control plane first (`labbot serve` or "
        "`make run`), with the same LABBOT_HOME\n"
    )


@pytest.mark.subprocess
def test_an_admin_token_variable_that_cannot_be_one_is_bad_input_and_serve_refuses_it_too(tmp_path: Path) -> None:
    s = Serve(tmp_path, ray_address=None, ray_token=None, port=free_port(), extra_env={"LABBOT_ADMIN_TOKEN": "abc"})
    for args in (("runs",), ("serve",)):
        out = s.cli(*args)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert "LABBOT_ADMIN_TOKEN must be one word of at least 32" in out.stderr
    assert not (tmp_path / "admin_token").exists() and not (tmp_path / "labbot.db").exists()


def test_jobs_lists_the_registry(module_serve: Serve) -> None:
    out = module_serve.cli("jobs")
    assert out.returncode == 0 and "tiny-lm" in out.stdout and "steps=200" in out.stdout
    jobs = json.loads(module_serve.cli("jobs", "--json").stdout)
    by_name = {j["name"]: j for j in jobs}
    assert sorted(by_name) == ["eval", "eval-generate", "eval-incidents", "tiny-lm", "tiny-rl"]
    assert by_name["tiny-lm"]["params"]["checkpoint_every"] == 50 and by_name["eval"]["params"]["solver"] == "gold"
    rl = by_name["tiny-rl"]
    assert rl["alerts"] == ["pass_rate below 0.5 for 2m"] and rl["headline"] == "pass_rate"
    assert rl["checks"]["algo"] == "one of grpo, sdpo, blend, rlsd" and rl["checks"]["lam"] == "a number from 0 to 1"


@pytest.mark.subprocess
def test_db_upgrade_creates_the_database(tmp_path: Path) -> None:
    s = Serve(tmp_path / "home", ray_address=None, ray_token=None)
    for _ in range(2):  # idempotent
        out = s.cli("db", "upgrade")
        assert out.returncode == 0 and "latest migration" in out.stderr, out.stderr
    assert (tmp_path / "home" / "labbot.db").exists()


def _recording_cli(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """The CLI's ApiClient, with its requests recorded (and answered 404) instead of sent."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(404, json={"error": {"code": "unknown_run", "message": "unknown run"}})

    def client() -> ApiClient:
        return ApiClient("http://labbot.test", "t0ken", transport=httpx.MockTransport(answer))

    monkeypatch.setattr(cli_main, "ApiClient", client)
    return seen


@pytest.mark.parametrize("crafted", ["../audit#", "r1/stop?", "..", "../artifacts/a2b3c4d5?agent=U0BOB00001#"])
@pytest.mark.parametrize(
    "command", [["run"], ["stop"], ["restart"], ["logs"], ["ack"], ["resolve"], ["pages", "--run"]]
)
def test_a_crafted_id_is_refused_before_any_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str], crafted: str
) -> None:
    seen = _recording_cli(monkeypatch)
    assert cli_main.main([*command, crafted]) == 2
    assert f"{crafted!r} is not a " in capsys.readouterr().err
    assert seen == []


def test_the_cli_escapes_and_keeps_to_its_route(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _recording_cli(monkeypatch)
    assert cli_main.main(["stop", "k3xq7p"]) == 2  # the 404 of the recording transport
    assert cli_main.main(["ack", "p2b3c4"]) == 2
    assert [(r.method, r.url.path) for r in seen] == [
        ("POST", "/api/v1/runs/k3xq7p/stop"),
        ("POST", "/api/v1/pages/p2b3c4/ack"),
    ]


def test_version_and_a_reader_that_goes_away(module_serve: Serve) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "labbot.bot.cli.main", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("labbot ")
    # `labbot jobs | head -1`: the reader is gone before the CLI writes (its pipe closed at once, while the CLI still
    # imports); it ends quietly instead of in a BrokenPipeError traceback
    proc = subprocess.Popen(
        [sys.executable, "-m", "labbot.bot.cli.main", "jobs"],
        env=module_serve.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_counted_nouns() -> None:
    from labbot.common.words import counted

    assert [counted(1, "run"), counted(2, "run"), counted(0, "run")] == ["1 run", "2 runs", "0 runs"]
    assert counted(2.5, "CPU") == "2.5 CPUs" and counted(1, "incident case") == "1 incident case"
    assert counted(3, "child", "children") == "3 children"
