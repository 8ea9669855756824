"""Detection lag: with `--stall-after 30s`, the time from the last telemetry of a SIGSTOPped job to its page in Slack,
minus the 30 s (claim: median <= 5 s over 5 trials), compared with the watchdog's tick interval in the same run.

Everything is real but Slack: a local Ray head, a `labbot serve` subprocess (`[watchdog] tick = "2s"`) with its Bolt
app over signed HTTP, and the Slack emulator (`tests/fakes/slack.py`) that the real slack_sdk talks to. Five tiny-lm
runs are launched with `/lab launch tiny-lm steps=100000 log_every=1 --stall-after 30s`; once each reports steps, its
training process (found by LABBOT_RUN_ID in its environment) is SIGSTOPped, a few seconds apart so the stops fall at
different points of the tick. For each run: last telemetry = the run's `last_telemetry_at` (server time of the last
batch or heartbeat; it stops advancing), page = the `ts` of the page message (the one with the Ack button) in the run's
thread, which the emulator stamps with wall-clock time (cross-checked against the moment a 0.1 s poll first saw it).

    .venv/bin/python benchmarks/detection_lag.py [--trials 5] [--stagger 2.7]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import time
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psutil
from _harness import median, report
from fakes.slack import SlackFake
from support import Serve, wait_for

from labbot.bot.console.emulator import Message
from labbot.bot.slack.payloads import Workspace, signed, slash_command
from labbot.training.ray_cluster import EmbeddedRayHead

STALL_S = 30.0
TICK_S = 2.0
CLAIM_S = 5.0
SECRET = "bench-signing-secret"
OWNER = "U0ALICE001"
TOML = f"""
[watchdog]
tick = "{TICK_S:g}s"
"""
KIND = re.compile(r"(\w+) on run ")  # the page's text: "<@OWNER> silent on run abc123: no telemetry for …"
LAUNCH = f"launch tiny-lm steps=100000 log_every=1 --stall-after {STALL_S:g}s"


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def job_processes(run_id: str) -> list[psutil.Process]:
    """The run's training process(es): LABBOT_RUN_ID in the environment, `-m labbot.training.jobs.tiny_lm` in argv."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if "labbot.training.jobs.tiny_lm" not in cmd:
            continue  # exact argv element: the python process, not a shell wrapping the command line
        with contextlib.suppress(psutil.Error):
            if p.environ().get("LABBOT_RUN_ID") == run_id:
                found.append(p)
    return found


class Lab:
    """The Slack side of the benchmark: signed slash commands into `labbot serve`, reads of the emulator."""

    def __init__(self, fake: SlackFake, serve: Serve) -> None:
        self.fake, self.serve = fake, serve
        self.ws = Workspace(team_id=fake.team_id, app_id=fake.app_id, channel=fake.default_channel)
        self.http = httpx.Client(timeout=30)
        self.api = serve.client()

    def launch(self, text: str) -> str:
        before = {m.ts for m in self.fake.messages(self.ws.channel)}
        body = slash_command(self.ws, user=OWNER, user_name="alice", text=text)
        r = self.http.post(f"{self.serve.url}/slack/events", content=body.encode(), headers=signed(body, SECRET))
        assert r.status_code == 200, r.text

        def card() -> Message | None:
            return next((m for m in self.fake.messages(self.ws.channel) if m.ts not in before and m.bot_id), None)

        found = wait_for(card, timeout=60, what="the run card")
        assert found is not None
        return next(el["value"] for b in found.blocks if b.get("type") == "actions" for el in b["elements"])

    def run(self, run_id: str) -> dict[str, Any]:
        return dict(self.api.get(f"/runs/{run_id}").json()["run"])

    def page_message(self, run: dict[str, Any]) -> Any:
        for m in self.fake.messages(run["channel"], thread_ts=run["thread_ts"]):
            if '"page_ack"' in json.dumps(m.blocks):
                return m
        return None


def reporting(lab: Lab, run_id: str) -> bool:
    return lab.run(run_id)["step"] is not None


def trial_row(i: int, run_id: str, t: dict[str, Any]) -> str:
    return (
        f"{i:>5} {run_id:>7} {t['kind']:>7} {t['stop_offset']:>9.2f}s {t['stop_minus_telemetry']:>11.2f}s "
        f"{t['page_minus_telemetry']:>13.2f}s {t['lag']:>7.2f}s {t['seen_minus_ts']:>9.2f}s"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--stagger", type=float, default=2.7, help="seconds between SIGSTOPs (not a multiple of the tick)")
    a = ap.parse_args()
    stopped: dict[str, list[psutil.Process]] = {}
    trials: dict[str, dict[str, Any]] = {}
    # the temporary home outlives the stack: head.stop() reads the head's pid from it
    with tempfile.TemporaryDirectory(prefix="lb-lag-") as tmp, contextlib.ExitStack() as stack:
        home = Path(tmp)

        def leftovers() -> None:  # last of all: a job process that outlived its head (ours: our runs' ids)
            for run_id in trials:
                for p in job_processes(run_id):
                    with contextlib.suppress(psutil.Error):
                        p.send_signal(signal.SIGCONT)
                        p.kill()

        stack.callback(leftovers)
        head = EmbeddedRayHead(home / "ray-home")
        stack.callback(shutil.rmtree, head.temp_dir, ignore_errors=True)  # Ray's session files, once it is down
        stack.callback(head.stop)
        ray = head.ensure()
        fake = SlackFake(users={OWNER: "alice"})
        stack.callback(fake.stop)
        url = fake.start()
        (home / "labbot.toml").write_text(TOML)
        env = {
            "SLACK_BOT_TOKEN": fake.bot_token,
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": url,
            "LABBOT_CONFIG": str(home / "labbot.toml"),
        }
        serve = Serve(home / "state", ray_address=ray.address, ray_token=ray.token, extra_env=env)
        stack.callback(serve.stop)
        serve.start()
        lab = Lab(fake, serve)

        def cleanup() -> None:  # before serve and head stop (ExitStack: last in, first out)
            for procs in stopped.values():
                for p in procs:
                    with contextlib.suppress(psutil.Error):
                        p.send_signal(signal.SIGCONT)
            for run_id in trials:
                with contextlib.suppress(Exception):
                    lab.api.post(f"/runs/{run_id}/stop")
            with contextlib.suppress(Exception):
                wait_for(lambda: all(lab.run(r)["status"] == "stopped" for r in trials), timeout=30, interval=0.5)
            lab.api.close()
            lab.http.close()

        stack.callback(cleanup)
        t0 = time.monotonic()
        ids = [lab.launch(LAUNCH) for _ in range(a.trials)]
        trials.update({run_id: {} for run_id in ids})
        for run_id in ids:
            wait_for(partial(reporting, lab, run_id), timeout=240, interval=0.5, what=f"{run_id} steps")
        ready = time.monotonic() - t0
        print(f"{a.trials} runs launched from Slack and reporting steps after {ready:.0f}s: {', '.join(ids)}")

        for i, run_id in enumerate(ids):  # SIGSTOP, staggered against the 2 s tick
            if i:
                time.sleep(a.stagger)
            procs = wait_for(partial(job_processes, run_id), timeout=30, what=f"the process of {run_id}")
            for p in procs:
                p.send_signal(signal.SIGSTOP)
            stopped[run_id] = procs
            trials[run_id]["stopped_at"] = time.time()

        where = {run_id: lab.run(run_id) for run_id in ids}  # channel and thread (card) ts of each run
        pending = set(ids)
        deadline = time.monotonic() + STALL_S + 60
        while pending and time.monotonic() < deadline:
            for run_id in sorted(pending):
                msg = lab.page_message(where[run_id])
                if msg is not None:
                    t = trials[run_id]
                    t["seen_at"] = time.time()
                    t["page_ts"] = float(msg.ts)
                    t["kind"] = kind.group(1) if (kind := KIND.search(msg.text)) else "?"
                    t["last_telemetry_at"] = epoch(lab.run(run_id)["last_telemetry_at"])
                    pending.discard(run_id)
            time.sleep(0.1)
        if pending:
            raise AssertionError(
                f"no page within {STALL_S + 60:.0f}s of the stop for {sorted(pending)}\n{serve.log()[-3000:]}"
            )
        time.sleep(0.5)
        for run_id, t in trials.items():  # the last telemetry did not move after the page
            assert epoch(lab.run(run_id)["last_telemetry_at"]) == t["last_telemetry_at"], f"{run_id} still reports"
            t["stop_minus_telemetry"] = t["stopped_at"] - t["last_telemetry_at"]
            t["page_minus_telemetry"] = t["page_ts"] - t["last_telemetry_at"]
            t["lag"] = t["page_minus_telemetry"] - STALL_S
            t["seen_minus_ts"] = t["seen_at"] - t["page_ts"]
            t["stop_offset"] = t["stopped_at"] - trials[ids[0]]["stopped_at"]

    lags = [trials[r]["lag"] for r in ids]
    med = median(lags)
    ratio = med / TICK_S
    ok = med <= CLAIM_S
    print(f"stall_after {STALL_S:g}s, watchdog tick {TICK_S:g}s; times in wall-clock seconds")
    print(
        f"{'trial':>5} {'run':>7} {'kind':>7} {'stopped at':>10} {'stop−tel':>12} {'page−tel':>14} {'lag':>8} "
        f"{'poll−ts':>10}"
    )
    for i, run_id in enumerate(ids, 1):
        print(trial_row(i, run_id, trials[run_id]))
    print(f"median lag (page − last telemetry − {STALL_S:g}s) = {med:.2f}s  {[round(x, 2) for x in lags]}")
    print(f"ratio median lag / tick = {ratio:.2f}; claim median <= {CLAIM_S:g}s: {'PASS' if ok else 'FAIL'}")
    report(
        "detection_lag",
        {
            "stall_after_s": STALL_S,
            "tick_s": TICK_S,
            "lags_s": lags,
            "median_lag_s": med,
            "max_lag_s": max(lags),
            "ratio": ratio,
            "claim": "median lag <= 5 s",
            "ok": ok,
        },
    )


if __name__ == "__main__":
    os.environ.pop("RAY_ADDRESS", None)
    main()
