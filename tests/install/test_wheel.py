"""The issue's "must withstand": the wheel has one top-level package, ``labbot``, of real files (its migrations and the
reference job's corpus inside), and ``labbot --help``, ``labbot console`` and ``labbot mcp lab`` work from an install
of it that is not editable: a fresh venv, run from its bin/ with cwd outside the checkout and no PYTHONPATH."""

from __future__ import annotations

import asyncio
import email
import stat
import zipfile
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent
from support import free_port
from venvs import CLIENT, ROOT, SOURCES, Venv, wheel_entries

pytestmark = pytest.mark.subprocess  # fresh virtual environments, and labbot run from them

PACKAGES = ("bot", "agents", "mcp_servers", "training", "storage", "common")


def _metadata(wheel: Path, dist_info: str) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        return email.message_from_bytes(z.read(f"{dist_info}/METADATA"))


def test_labbot_wheel_is_one_package_of_real_files(wheels: dict[str, Path]) -> None:
    entries = wheel_entries(wheels["labbot"])
    names = {e.filename for e in entries}
    assert {n.split("/")[0] for n in names} == {"labbot", "labbot-0.1.0.dist-info"}
    links = [e.filename for e in entries if stat.S_ISLNK(e.external_attr >> 16)]
    assert not links, f"symlinks in the wheel: {links}"
    # every module of the six layers is in it (a folder without __init__.py would be left out silently)
    source = {
        f"labbot/{p.relative_to(ROOT).as_posix()}"
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert source - names == set()
    data = {
        "labbot/storage/migrations/env.py",
        "labbot/storage/migrations/script.py.mako",
        "labbot/training/jobs/data/corpus.txt",
    }
    versions = {
        f"labbot/storage/migrations/versions/{p.name}" for p in (ROOT / "storage/migrations/versions").glob("*.py")
    }
    assert len(versions) >= 7 and data | versions <= names
    meta = _metadata(wheels["labbot"], "labbot-0.1.0.dist-info")
    requires = meta.get_all("Requires-Dist") or []
    assert "labbot-client==0.1.0" in requires
    torch = [r for r in requires if r.startswith("torch")]
    assert torch and all('extra == "jobs"' in r for r in torch), torch  # torch only in the jobs extra

    entries = wheel_entries(wheels["labbot_client"])
    names = {e.filename for e in entries}
    assert {n.split("/")[0] for n in names} == {"labbot_client", "labbot_client-0.1.0.dist-info"}
    assert "labbot_client/py.typed" in names and "labbot_client/telemetry.py" in names
    client_requires = _metadata(wheels["labbot_client"], "labbot_client-0.1.0.dist-info").get_all("Requires-Dist")
    assert [r for r in client_requires or [] if "extra ==" not in r] == ["httpx>=0.27"]


def test_installed_labbot_is_the_wheel_and_help_works(installed: Venv, tmp_path: Path) -> None:
    probe = """
import labbot, labbot_client
print(labbot.__file__)
try:
    import torch
except ImportError:
    print("no torch")
"""
    where = installed.run(installed.python, "-c", probe, cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    path, torch = where.stdout.splitlines()
    assert Path(path).is_relative_to(installed.site), path  # the wheel's files, not the checkout's
    assert torch == "no torch"  # as in an install without the jobs extra (every test of this venv runs so)
    done = installed.run(installed.bin("labbot"), "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "usage: labbot" in done.stdout and "console" in done.stdout and "mcp" in done.stdout


def test_installed_console_answers_help_and_exits_at_end_of_input(installed: Venv, tmp_path: Path) -> None:
    """The whole control plane (migrations from the wheel, the Bolt app, the Slack emulator) behind a piped
    ``/lab help``. Ray is pointed at a closed port: nothing here needs it, and the console does not wait for it."""
    home = tmp_path / "home"
    env = installed.env(
        LABBOT_HOME=str(home), LABBOT_PORT=str(free_port()), RAY_ADDRESS=f"http://127.0.0.1:{free_port()}"
    )
    done = installed.run(
        installed.bin("labbot"), "console", "--wait", "5", cwd=tmp_path, env=env, input="/lab help\n", timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "labbot console" in done.stdout
    assert "/lab launch JOB" in done.stdout and "/lab help" in done.stdout  # the help, answered in the ack
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert (home / "labbot.db").exists()


def test_installed_mcp_lab_serves_its_tools_over_stdio(installed: Venv, tmp_path: Path) -> None:
    """The MCP handshake and tools/list from ``labbot mcp lab``; a tool call with no control plane on its port is a
    tool error that says so (the server itself stays up)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "admin_token").write_text("not-a-real-token\n")
    port = free_port()
    params = StdioServerParameters(
        command=str(installed.bin("labbot")),
        args=["mcp", "lab"],
        env={"PYTHONNOUSERSITE": "1", "LABBOT_HOME": str(home), "LABBOT_PORT": str(port)},
        cwd=tmp_path,
    )

    async def session() -> tuple[set[str], bool, str]:
        async with Client(params) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            down = await client.call_tool("list_runs", {})  # no control plane on that port: a tool error
        return tools, down.is_error, "".join(b.text for b in down.content if isinstance(b, TextContent))

    tools, is_error, text = asyncio.run(session())
    assert {"list_runs", "get_run", "run_metrics", "run_logs", "launch_run", "stop_run"} <= tools
    assert is_error and f"not answering at http://127.0.0.1:{port}" in text, text


def test_dockerfile_builds_from_everything_the_wheel_is_built_from() -> None:
    """The image runs ``pip install .`` on what it copied: every folder the build reads must be copied (the wheel
    of a tree without labbot/ holds no labbot), and labbot-client installed from ./client beside it."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    copied = {src.rstrip("/") for line in lines if line.startswith("COPY ") for src in line.split()[1:-1]}
    assert set(SOURCES) | {CLIENT} <= copied, sorted(set(SOURCES) | {CLIENT} - copied)
    assert any("pip install" in line and "./client" in line for line in lines)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"**/build", "**/dist", "**/*.egg-info"} <= set(ignored)  # a stale build/lib leaks into the wheel
