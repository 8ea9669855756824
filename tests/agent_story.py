"""The agents issue's user story as a scripted model, shared by its end-to-end tests (Slack over HTTP, and the
console): asked "why is this run slow?" in a run's thread, it reads the run's metrics and logs through `lab` and the
recent commits through `codebase`, then answers; asked to stop the run, it calls `lab__stop_run` (which waits for a
human's Approve); told of a new page, the investigator reads the log tail and diagnoses."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from fakes.anthropic import SeenRequest, Step, text, tool_use, tool_uses

TOML = """
[slack]
card_every = "2s"
progress_every = "1h"

[jobs.sleeper]
entrypoint = "sleep 300"
description = "holds a run open"

[jobs.crasher]
entrypoint = "python -c 'import sys; print(\\"CUDA error: an illegal memory access\\", file=sys.stderr); sys.exit(3)'"
description = "fails at once"
max_restarts = 0
"""
SLOW_ANSWER = "It is slow because the data loader starves the GPU: throughput fell after commit 'bigger batches'."
STOPPED_ANSWER = "Done: I stopped the run after your approval."
DIAGNOSIS = "Diagnosis: the job died on an illegal CUDA memory access at start-up; check the kernel change."


def model(req: SeenRequest) -> Step:
    """The scripted model: reads what a real one would read, in the order a careful one would."""
    run_id = re.search(r'"id": "(\w+)"', str(req.system)).group(1)  # type: ignore[union-attr]
    last = req.messages[-1]
    if isinstance(last["content"], list) and any(b.get("type") == "tool_result" for b in last["content"]):
        asked = [b["name"] for b in req.messages[-2]["content"] if b.get("type") == "tool_use"]
        if asked == ["lab__run_logs"]:
            return text(DIAGNOSIS)
        return text(STOPPED_ANSWER if "lab__stop_run" in asked else SLOW_ANSWER)
    question = last["content"] if isinstance(last["content"], str) else json.dumps(last["content"])
    if "just fired" in question:  # the investigator role looks into a new page
        return tool_use("lab__run_logs", {"run_id": run_id, "tail": 50})
    if "stop" in question:
        return tool_use("lab__stop_run", {"run_id": run_id})
    return tool_uses(
        ("lab__run_metrics", {"run_id": run_id, "name": "loss"}),
        ("lab__run_logs", {"run_id": run_id, "tail": 20}),
        ("codebase__git_log", {"max_count": 5}),
    )


def commit_history(repo: Path) -> Path:
    """A git repository whose last commit is "bigger batches": what the agent finds through `codebase`."""
    repo.mkdir(parents=True, exist_ok=True)
    git = ["git", "-C", str(repo), "-c", "user.name=r", "-c", "user.email=r@lab"]
    (repo / "train.py").write_text("batch_size = 512\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "bigger batches"], check=True)
    return repo
