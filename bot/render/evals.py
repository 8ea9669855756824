"""Eval suites, eval runs and their cases in words: the results of a run (its seal, tampering, samples), two runs
compared, the suites and runs listed, a case made from an incident. Pure functions of ``/api/v1/evals``' JSON, shown
by ``labbot eval`` and ``/lab eval`` alike."""

from __future__ import annotations

import re
from typing import Any

from labbot.bot.render.tables import table
from labbot.common.durations import format_duration
from labbot.common.words import counted

TERMINAL = ("succeeded", "failed", "stopped")


def samples_progress(doc: dict[str, Any]) -> str:
    metrics = (doc.get("run") or {}).get("metrics") or {}
    done, total = metrics.get("samples_done"), metrics.get("samples_total")
    rate = metrics.get("pass_rate")
    if done is None:
        return "waiting for the first sample"
    text = f"{int(done)}/{int(total) if total else '?'} samples"
    so_far = "" if (doc.get("run") or {}).get("status") in TERMINAL else " so far"  # a finished run's is its rate
    return text + (f", pass rate{so_far} {rate:.0%}" if rate is not None else "")


def rate_text(rate: Any, interval: Any) -> str:
    """``67% (95% CI 30–90%)``, or the rate alone when there is no interval."""
    if not isinstance(rate, int | float):
        return ""
    if isinstance(interval, list | tuple) and len(interval) == 2:
        return f"{rate:.0%} (95% CI {interval[0]:.0%}–{interval[1]:.0%})"
    return f"{rate:.0%}"


def tamper_text(doc: dict[str, Any]) -> str | None:
    """The first line of a run whose scoring caught samples talking the tests into a pass, or None."""
    samples = doc.get("samples") or []
    tampered = [s["task"] for s in samples if s.get("verdict") == "tampered"]
    suspect = [s["task"] for s in samples if s.get("verdict") == "suspect"]
    if not tampered and not suspect:
        return None
    parts = []
    if tampered:
        parts.append(f"{len(tampered)} tampered ({', '.join(tampered[:5])}): their test outcomes were rewritten")
    if suspect:
        parts.append(
            f"{len(suspect)} suspect ({', '.join(suspect[:5])}): the solver's change reaches for what a rewrite needs"
        )
    return "!!! " + "; ".join(parts) + f" — scored 0, of {len(samples)} samples !!!"


def _result(sample: dict[str, Any]) -> str:
    verdict = sample.get("verdict")
    if verdict in ("tampered", "suspect", "unjudged"):
        return str(verdict).upper() if verdict != "unjudged" else "unjudged"
    return "pass" if sample.get("passed") else "fail"


def ran_text(probes: list[dict[str, Any]]) -> str:
    """When a run's probes ran: "9 cached from 2026-…, 18 alongside the samples" (results from before ``ran``
    existed had their battery before the samples)."""
    cached = sorted(
        str(p["ran"]).removeprefix("cached ") for p in probes if str(p.get("ran", "")).startswith("cached ")
    )
    counts: dict[str, int] = {}
    for p in probes:
        ran = str(p.get("ran") or "before the samples")
        if not ran.startswith("cached "):
            counts[ran] = counts.get(ran, 0) + 1
    parts = [f"{len(cached)} cached from {cached[0]}"] if cached else []
    return ", ".join([*parts, *(f"{n} {ran}" for ran, n in counts.items())])


def results_text(doc: dict[str, Any]) -> str:
    iso = doc.get("isolation") or {}
    lines = []
    if iso.get("probes") and not iso.get("sealed", True):
        failed = [p["name"] for p in iso["probes"] if not p["passed"]]
        lines.append(f"!!! SEAL FAILED ({', '.join(failed[:5])}): this run's scores are untrusted !!!")
    if warning := tamper_text(doc):
        lines.append(warning)
    rate = rate_text(doc.get("pass_rate"), doc.get("interval"))
    lines.append(
        f"eval {doc['id']} · {doc.get('suite')} · solver {doc.get('solver')} · {doc['status']}"
        + (f" · pass rate {rate}" if rate else "")
    )
    if iso.get("probes"):
        passed = sum(1 for p in iso["probes"] if p["passed"])
        when = f"; {ran_text(iso['probes'])}"
        lines.append(f"isolation {passed}/{len(iso['probes'])} probes passed (score {iso.get('score')}{when})")
    samples = doc.get("samples") or []
    if samples:
        rows = []
        for s in samples:
            output = (s.get("output") or "").strip()
            seconds, tokens = s.get("time_s"), s.get("tokens")
            rows.append([
                s["task"],
                _result(s),
                format_duration(seconds) if isinstance(seconds, int | float) else "",
                f"{tokens:,}" if isinstance(tokens, int) and tokens else "",
                last_said(output)[:60],
            ])  # fmt: skip
        lines.append(table(["task", "result", "time", "tokens", "last line of the solver's output"], rows))
        for s in samples:
            for why in [*(s.get("tampered") or [])[:2], *(s.get("suspect") or [])[:3]]:
                lines.append(f"  {s['task']}: {why}")
        unjudged = sum(1 for s in samples if s.get("verdict") == "unjudged")
        if unjudged:
            lines.append(
                f"{unjudged} of {len(samples)} cases unjudged (the judge model could not be asked or gave no verdict):"
                " counted as not passed; run the suite again with a judge that answers (--judge PROVIDER/MODEL)"
            )
    elif doc["status"] not in TERMINAL:
        lines.append(f"running: {samples_progress(doc)}")
    return "\n".join(lines)


def comparison_text(doc: dict[str, Any]) -> str:
    """Two eval runs of one suite, paired by task: the difference, its interval, and what it means."""
    a, b = doc["a"], doc["b"]
    paired, unpaired = doc["paired"], doc["unpaired"]
    lines = []
    if doc.get("untrusted"):
        lines.append("!!! a run's seal failed: this comparison is untrusted !!!")
    lines += [
        f"{doc['suite']} · {doc['tasks']} tasks, paired by task",
        f"A {a['id']} ({a.get('solver')}): {rate_text(a.get('pass_rate'), a.get('interval'))}",
        f"B {b['id']} ({b.get('solver')}): {rate_text(b.get('pass_rate'), b.get('interval'))}",
        f"A − B = {doc['difference']:+.0%}, 95% CI {paired[0]:+.0%} to {paired[1]:+.0%} "
        f"(unpaired it would be {unpaired[0]:+.0%} to {unpaired[1]:+.0%})",
        f"both passed {doc['both']}, only A {doc['only_a']}, only B {doc['only_b']}, neither {doc['neither']}",
    ]
    left_out = doc.get("unjudged_left_out") or []
    if left_out:
        lines.append(
            f"left out: {len(left_out)} task{'s' if len(left_out) != 1 else ''} the judge gave no verdict on in one "
            f"of the runs ({', '.join(left_out[:5])}{' …' if len(left_out) > 5 else ''})"
        )
    if doc["verdict"] == "no difference the suite can show":
        lines.append("verdict: the interval includes zero — this suite cannot tell them apart (more tasks would)")
    else:
        lines.append(f"verdict: {doc['verdict']} (the interval excludes zero)")
    return "\n".join(lines)


def incident_case_text(made: dict[str, Any]) -> str:
    """What ``from-incident`` made: the case (its page, the cause it is scored on) and the suite it is now part of."""
    case, suite = made["case"], made["suite"]
    page = case["page"]
    metrics = ", ".join(case.get("metrics") or {}) or "none"
    return "\n".join(
        [
            f"case {case['id']}: {page['kind']} page of {(case.get('run') or {}).get('id') or 'the cluster'}, "
            f"frozen as labbot saw it at {page['triggered_at']}",
            f"  log tail {len((case.get('log_tail') or '').splitlines())} lines · metrics {metrics} · "
            f"{len(case.get('context') or [])} look-ups by the investigator (secrets redacted)",
            f"  scored against the recorded cause: {case['cause']}",
            f"suite {suite['suite']}: {counted(suite['tasks'], 'incident case')} — run it with "
            f"`eval run {suite['suite']} --solver agent:PROVIDER/MODEL`",
        ]
    )


def suites_table(suites: list[dict[str, Any]]) -> str:
    if not suites:
        return "no eval suites yet — make one with `labbot eval generate PATH`"
    rows = []
    for s in suites:
        who = "the lab" if s.get("shared", True) else ", ".join(s.get("owners") or []) + " (not shared)"
        rows.append([s["suite"], s["source"], s["commit"][:10], str(s["tasks"]), str(len(s.get("flaky") or [])), who])
    return table(["suite", "source", "commit", "tasks", "flaky dropped", "who can run it"], rows)


def suite_text(suite: dict[str, Any]) -> str:
    """``eval show SUITE``: what the suite is and each task — where, what was deleted, how many tests it must turn."""
    tasks = suite.get("tasks") or []
    commit = str(suite.get("commit") or "")[:10]
    head = f"{suite['suite']} — {suite.get('source')} at {commit}, {counted(len(tasks), 'task')}"
    rows = [
        [t["id"], t.get("path") or t.get("kind") or "", t.get("symbol") or str(t.get("summary") or "")[:60],
         str(len(t.get("fail_to_pass") or [])) if "fail_to_pass" in t else "",
         str(len(t.get("pass_to_pass") or [])) if "pass_to_pass" in t else ""]
        for t in tasks
    ]  # fmt: skip
    if not rows:
        return head
    return head + "\n" + table(["task", "file", "deleted", "fail→pass", "pass→pass"], rows)


def eval_runs_table(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "no eval runs yet — `labbot eval run SUITE --solver gold`"
    rows = []
    for r in runs:
        rate = r.get("pass_rate")
        iso = r.get("isolation") or {}
        seal = "" if not iso.get("probes") else ("sealed" if iso.get("sealed") else "SEAL FAILED")
        rows.append([r["id"], r.get("suite") or "", r.get("solver") or "", r["status"],
                     rate_text(rate, r.get("interval")), seal])  # fmt: skip
    return table(["run", "suite", "solver", "status", "pass rate", "isolation"], rows)


_STATUS_LINE = re.compile(r"^\[(exit -?\d+|killed at the limit)\]$")


def last_said(output: str) -> str:
    """The last line the solver printed: a command solver's output ends with its exit status (``[exit 0]``), which
    the result column already says, so the line before it."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    said = [line for line in lines if not _STATUS_LINE.match(line)]
    return said[-1] if said else (lines[-1] if lines else "")
