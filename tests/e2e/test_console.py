"""User story: `make run` with no Slack token opens the console — the real Bolt app and slack_sdk client against the
in-process Slack emulator — and typing `/lab launch tiny-lm` shows the run card, the thread filling with progress
and a loss plot, and a final summary. Driven here with piped input, as a script would."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
from agent_story import SLOW_ANSWER, STOPPED_ANSWER, TOML, commit_history, model
from console_session import ConsoleSession, console_env
from fakes.anthropic import FakeAnthropic
from support import SMALL, wait_for

from labbot.training.launcher import RayLauncher
from labbot.training.ray_cluster import RayConnection


def test_console_launch_to_summary_with_piped_input(tmp_path: Path, ray_head: RayConnection) -> None:
    env = console_env(tmp_path, ray_head)
    script = "\n".join(
        [
            "/lab help",
            "/lab lanch tiny-lm",
            f"/lab launch tiny-lm steps=300 checkpoint_every=100 {SMALL}",
            "/lab runs",
        ]
    )
    out = subprocess.run(
        [sys.executable, "-m", "labbot.bot.cli.main", "console", "--fast", "--wait", "180"],
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
    assert "Agents: off — no model is configured" in text.split("/lab launch JOB")[0], "the banner says so at once"
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
    — nobody acknowledging — the escalation to #oncall (after 4 s here, from ./labbot.toml). Typed at the keyboard
    and read as the screen changes: the hung run never ends, so piped input would hold the console its whole --wait."""
    (tmp_path / "labbot.toml").write_text('[paging]\nescalate_after = "4s"\nrenotify_every = "0s"\n')
    env = console_env(tmp_path, ray_head)
    console = ConsoleSession(tmp_path, env)
    run_id = ""
    try:
        console.type(
            "/lab launch tiny-lm steps=100000 log_every=1 hang_at_step=5 num_threads=1 min_step_s=0.05 "
            f"{SMALL} --stall-after 5s"
        )
        run_id = console.shows(r"run (\w{6}) · Ray job", what="the run card").group(1)
        console.shows(r"hung — run", timeout=90, what="the hang's page in the thread")
        assert "[Ack] [Resolve] [Stop run]" in console.screen  # the page, with its buttons
        console.shows(r"DM with", what="the owner's DM")
        console.shows(r"#oncall · labbot[\s\S]*Escalated: nobody has acknowledged this page", what="the escalation")
        assert "level 1" in console.screen[console.screen.index("#oncall · labbot") :]
    finally:
        if run_id:
            RayLauncher(ray_head).stop(f"labbot-{run_id}-1")
        code, err = console.close()
    assert code == 0, err[-3000:]
    assert "Traceback" not in err


def test_console_agent_answers_in_the_run_thread_and_stops_the_run_only_after_approve(
    tmp_path: Path, ray_head: RayConnection
) -> None:
    """The agents issue's story, in the console with a (scripted) model configured: "why is this run slow?" in the
    run's thread is answered from its metrics, logs and commits, and a 👎 on that answer asks what went wrong and
    keeps the comment; "please stop it" shows an Approve / Deny prompt, and the run stops only once Approve is
    clicked."""
    (tmp_path / "labbot.toml").write_text(TOML)
    repo = commit_history(tmp_path / "repo")
    with FakeAnthropic() as anthropic:
        anthropic.answer_with(model)
        env = console_env(
            tmp_path,
            ray_head,
            ANTHROPIC_API_KEY=anthropic.api_key,
            ANTHROPIC_BASE_URL=anthropic.base_url,
            LABBOT_CODEBASE_ROOT=str(repo),
        )
        console = ConsoleSession(tmp_path, env)
        run_id = ""
        try:
            console.type("/lab launch sleeper")
            run_id = console.shows(r"run (\w{6}) · Ray job", what="the run card").group(1)
            console.shows(r"running", what="the run running")
            console.type(f"reply {run_id} why is this run slow?")
            console.shows(re.escape(SLOW_ANSWER[:40]), what="the agent's answer in the thread")
            console.shows(r"│ ▸ ", what="the answer streamed into the thread, piece by piece")
            console.shows(r"│ · labbot is (reading|looking|thinking)", what="the assistant status line")
            console.shows(r"\(answer complete\)", what="the stream stopped, the answer whole")
            assert ":arrow_forward:" not in console.screen and "▶️" in console.screen  # shortcodes as emoji
            called = {
                b["name"]
                for r in anthropic.requests
                for m in r.messages
                for b in m.get("content") or []
                if isinstance(b, dict) and b.get("type") == "tool_use"
            }
            assert {"lab__run_metrics", "lab__run_logs", "codebase__git_log"} <= called, called

            # the answer carries 👍/👎; a 👎 asks what went wrong, and the answer is kept with the vote
            console.shows(r"\[👍\] \[👎\]", what="the feedback buttons under the answer")
            console.type("vote down")
            console.shows(r"labbot asks what went wrong", what="the what-went-wrong question")
            console.type("comment it should have read the data loader's queue depth first")
            with httpx.Client(base_url=f"http://127.0.0.1:{env['LABBOT_PORT']}/api/v1") as api:
                api.headers["Authorization"] = "Bearer " + (tmp_path / "home" / "admin_token").read_text().strip()
                [vote] = wait_for(
                    lambda: [f for f in api.get("/feedback").json()["feedback"] if f.get("comment")],
                    what="the 👎 with its comment",
                )
            assert vote["vote"] == "down" and vote["kind"] == "answer" and vote["run_id"] == run_id
            assert vote["comment"] == "it should have read the data loader's queue depth first"
            console.shows(r"eval from-feedback fb", what="the thank-you saying what the comment can become")

            console.type(f"reply {run_id} ok, please stop it")
            request = console.shows(r"request (a[0-9a-f]{8})", what="the approval prompt").group(1)
            console.shows(r"\[Approve\] \[Deny\]", what="the Approve / Deny buttons")
            assert "lab__stop_run" in console.screen
            with httpx.Client(base_url=f"http://127.0.0.1:{env['LABBOT_PORT']}/api/v1") as api:
                token = (tmp_path / "home" / "admin_token").read_text().strip()
                api.headers["Authorization"] = f"Bearer {token}"
                assert api.get(f"/runs/{run_id}").json()["run"]["status"] == "running", "nothing stops unapproved"
                console.type(f"click approve {request}")
                console.shows(re.escape(STOPPED_ANSWER), what="the agent's last answer")
                assert api.get(f"/runs/{run_id}").json()["run"]["status"] == "stopped"
            console.shows(r"approved by", what="the prompt updated with its verdict")
            console.type("home")
            console.shows(r"▌ Home · labbot", what="the App Home tab")
            console.shows(r"My runs — 1–1 of 1", what="your runs on it")
            assert run_id in console.screen.rsplit("▌ Home · labbot", 1)[1]
        finally:
            code, err = console.close()
            if run_id:
                RayLauncher(ray_head).stop(f"labbot-{run_id}-1")
        assert code == 0, err[-3000:]
        assert "Traceback" not in err
