"""What `labbot serve` and the CLI import at start: not the Anthropic SDK (seconds of imports, wanted only once a model
is configured and a client made), nor matplotlib (wanted at a process's first plot), nor the MCP SDK (wanted when an
agent's tools are first listed; about 1.5 s of imports). Each start of a replica, each
`labbot runs`, and each of the tests' `labbot serve` processes pays for what is imported at start."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.subprocess  # each test imports labbot in a fresh interpreter
LAZY = ("anthropic", "matplotlib", "mcp")


@pytest.mark.parametrize("module", ["labbot.bot.serve", "labbot.bot.cli.main", "labbot.bot.console.repl"])
def test_starting_imports_neither_the_model_sdk_nor_matplotlib_nor_mcp(module: str) -> None:
    probe = f"import sys, {module}; print(','.join(m for m in {LAZY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "", f"{module} imports {out.stdout.strip()} at start"


def test_a_model_failure_is_still_sorted_once_the_sdk_is_loaded() -> None:
    """describe_failure answers None for any exception while no client was made, and sorts the SDK's once one was."""
    probe = (
        "import sys, httpx\n"
        "from labbot.agents.fleet.model import ModelSettings, describe_failure, make_client\n"
        "assert describe_failure(RuntimeError('x')) is None and 'anthropic' not in sys.modules\n"
        "make_client(ModelSettings.from_env({'ANTHROPIC_API_KEY': 'sk-' + 'test'}))\n"
        "import anthropic\n"
        "e = anthropic.APITimeoutError(request=httpx.Request('POST', 'https://api.anthropic.com/v1/messages'))\n"
        "f = describe_failure(e)\n"
        "assert f is not None and f.retryable, f\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
