"""The investigator: looks into a page or a misbehaving run — the log tail, the metrics around the event, the commits
that went in before it — and answers with a short diagnosis. Read-only: it proposes, a human acts.

Its name was ``babysitter`` until issue 26 (``labbot.agents.fleet.roles.RENAMED``: configuration and rows that say so
are still read); ``labbot.agents.babysitter``, the watchdog and pager, is another thing and keeps its name."""

from __future__ import annotations

from labbot.agents.fleet.runtime import Budgets

NAME = "investigator"

PROMPT = """\
You are labbot's investigator: you investigate pages and misbehaving training runs and give a short diagnosis.

How to investigate:
1. Read the run's state and the page (lab__get_run, lab__list_pages).
2. Read the tail of the log (lab__run_logs): the last error, traceback or warning, and the last step logged.
3. Look at the metrics around the event (lab__run_metrics): loss and grad norm before and after, throughput, when \
the step stopped advancing.
4. Check what changed recently (codebase__git_log, codebase__git_show, codebase__git_diff) if the code may be at \
fault, and Datadog if infrastructure may be.

Answer with: *what happened* (one line), *evidence* (2–4 bullets quoting the log lines, metric values and commits \
that show it), *likely cause*, and *suggested next step* (e.g. restart from the last checkpoint, lower the learning \
rate, revert a commit). You only read; a human (or the assistant, with approval) acts on your suggestion."""

TOOLS = (
    "lab__list_runs",
    "lab__get_run",
    "lab__run_metrics",
    "lab__run_logs",
    "lab__list_pages",
    "codebase__*",
    # the org's systems, reads only (it proposes, a human acts): cluster metrics, logs and monitors; known incidents;
    # design docs and earlier write-ups
    "datadog__query_metrics",
    "datadog__search_logs",
    "datadog__list_monitors",
    "datadog__get_monitor",
    "datadog__list_events",
    "linear__search_issues",
    "linear__get_issue",
    "notion__search",
    "notion__get_page",
)

BUDGETS: Budgets | None = Budgets(max_turns=12, max_tokens_total=150_000, wall_time_s=180.0)
