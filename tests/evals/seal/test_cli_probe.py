"""``labbot eval probe SUITE_DIR``: the isolation battery on this machine, with no control plane running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from run_fixtures import build_pytest_venv, make_suite

pytestmark = pytest.mark.subprocess


def test_probe_runs_the_battery_without_a_control_plane(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    make_suite(suite)
    venv = build_pytest_venv(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABBOT_", "RAY_"))}
    env["LABBOT_HOME"] = str(tmp_path / "home")  # no admin token there: nothing of the control plane is asked
    argv = [sys.executable, "-m", "labbot.bot.cli.main", "eval", "probe", str(suite), "--venv", str(venv)]
    out = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["sealed"] is True and report["score"] == 1.0
    assert {p["category"] for p in report["probes"]} == {"history", "leftovers", "network", "host", "tampering"}
    text = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert text.returncode == 0 and text.stdout.startswith("sealed: ") and "VERDICT" in text.stdout
