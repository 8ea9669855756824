"""User story: `make run` with no Slack token opens the console — the real Bolt app and slack_sdk client against the
in-process Slack emulator — and typing `/lab launch tiny-lm` shows the run card, the thread filling with progress
and a loss plot, and a final summary. Driven here with piped input, as a script would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from support import free_port

from training.launcher import RayLauncher
from training.ray_cluster import RayConnection


def test_console_launch_to_summary_with_piped_input(tmp_path: Path, ray_head: RayConnection) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABBOT_", "RAY_", "SLACK_"))}
    env.update(
        LABBOT_HOME=str(tmp_path / "home"),
        LABBOT_PORT=str(free_port()),
        RAY_ADDRESS=ray_head.address,
        RAY_AUTH_TOKEN=ray_head.token or "",
        PYTHONUNBUFFERED="1",
    )
    script = "\n".join(
        [
            "/lab help",
            "/lab lanch tiny-lm",
            "/lab launch tiny-lm steps=300 checkpoint_every=100",
            "/lab runs",
        ]
    )
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "console", "--fast", "--wait", "180"],
        input=script + "\n",
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    text = out.stdout
    assert out.returncode == 0, out.stderr[-3000:]
    assert "/lab launch JOB" in text  # help, answered ephemerally in the ack
    assert "did you mean 'launch'" in text  # a usage error, ephemerally
    assert "▌ tiny-lm · tiny-lm-" in text and "[Stop] [Restart]" in text  # the run card in #lab
    assert "launched *tiny-lm*" in text or "launched tiny-lm" in text  # the launch confirmation in its thread
    assert "✎" in text and "succeeded" in text  # the card kept current, to the end
    assert "loss (final)" in text and "finished" in text  # the final plot and the summary in the thread
    pngs = list((tmp_path / "home" / "console-files").glob("*.png"))
    assert pngs and all(p.read_bytes().startswith(b"\x89PNG") for p in pngs)
    assert "Traceback" not in out.stderr


def test_console_hang_is_paged_in_the_thread_then_escalated_to_oncall(tmp_path: Path, ray_head: RayConnection) -> None:
    """The babysitter issue's story, in the console: a hang, a page in the thread with its buttons and a DM, then
    — nobody acknowledging — the escalation to #oncall (after 4 s here, from ./labbot.toml)."""
    (tmp_path / "labbot.toml").write_text('[paging]\nescalate_after = "4s"\nrenotify_every = "0s"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABBOT_", "RAY_", "SLACK_"))}
    env.update(
        LABBOT_HOME=str(tmp_path / "home"),
        LABBOT_PORT=str(free_port()),
        RAY_ADDRESS=ray_head.address,
        RAY_AUTH_TOKEN=ray_head.token or "",
        PYTHONUNBUFFERED="1",
    )
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "console", "--wait", "40"],
        input="/lab launch tiny-lm steps=100000 log_every=1 hang_at_step=5 --stall-after 5s\n",
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=200,
    )
    text = out.stdout
    run_id = re.search(r"run (\w{6}) · Ray job", text)
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        assert "hung — run" in text and "[Ack] [Resolve] [Stop run]" in text  # the page, with its buttons
        assert "DM with" in text  # and the owner's DM
        oncall = text[text.index("#oncall · labbot") :]
        assert "Escalated: nobody has acknowledged this page" in oncall and "level 1" in oncall
        assert "Traceback" not in out.stderr
    finally:
        if run_id:
            RayLauncher(ray_head).stop(f"labbot-{run_id.group(1)}-1")
