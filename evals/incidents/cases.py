"""What an eval case of the incident suite is, and what the model and its judge read (pure: no database).

A case is a page frozen with the cause its owner wrote (:mod:`labbot.evals.incidents.page_cases`) or a 👎 on an
agent's answer with the researcher's comment (:mod:`labbot.evals.incidents.feedback_cases`); both make the JSON this
module reads, kept beside each other as one suite, ``incidents-HASH`` (:func:`suite_of`). Those two read the control
plane's database; this module is what the ``eval-incidents`` job needs where it runs (:mod:`labbot.evals.incidents.job`,
:mod:`labbot.evals.incidents.runner`), so it imports nothing of ``labbot.storage``.

:func:`system_prompt` and :func:`case_prompt` say what the model being evaluated reads for either kind (never the cause,
nor the answer marked bad); :func:`judge_system` and :func:`case_judge_prompt` what the judge reads. A judge model
compares the answer with the recorded cause (:func:`judge_prompt`, :func:`parse_verdict`). The verdict is
``correct``, ``incorrect`` or ``unjudged`` — a judge that could not be reached or answered anything but the verdict
asked for — and ``unjudged`` never counts as passed. :func:`tool_results` picks, from a stretch of an agent's history,
the tool results a case keeps (the tools' words, never the agent's conclusions).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

CASE_ID = re.compile(r"(?:incident|feedback)-[a-z0-9]{1,16}")  # a page's case (page_cases), or a 👎's (feedback_cases)
INCIDENT_SUITE_ID = re.compile(r"incidents-[0-9a-f]{12}")
MAX_CONTEXT_ITEMS = 8
MAX_CONTEXT_CHARS = 2000

Verdict = Literal["correct", "incorrect", "unjudged"]


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    reason: str

    @property
    def passed(self) -> bool:
        return self.verdict == "correct"


def case_id(page_id: str) -> str:
    return f"incident-{page_id}"


def tool_results(messages: Iterable[tuple[str, Any]]) -> list[dict[str, str]]:
    """The (tool, result) pairs of a stretch of an agent's history, oldest first: each successful tool result with
    the name of the tool the assistant called, at most ``MAX_CONTEXT_ITEMS`` (the last), each clipped."""
    names: dict[str, str] = {}
    found: list[dict[str, str]] = []
    for role, content in messages:
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if role == "assistant" and block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
            elif role == "user" and block.get("type") == "tool_result" and not block.get("is_error"):
                text = text_of(block.get("content"))
                if text:
                    tool = names.get(str(block.get("tool_use_id")), "tool")
                    found.append({"tool": tool, "result": text[:MAX_CONTEXT_CHARS]})
    return found[-MAX_CONTEXT_ITEMS:]


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def suite_of(cases: Sequence[dict[str, Any]]) -> str:
    """The incident suite's id: ``incidents-`` and 12 hex digits of its cases' content (so a name is a version; when
    and by whom a case was frozen is not content)."""
    content = [{k: v for k, v in c.items() if k not in ("frozen_at", "frozen_by")} for c in cases]
    canonical = json.dumps(sorted(content, key=lambda c: str(c["id"])), sort_keys=True, separators=(",", ":"))
    return "incidents-" + hashlib.sha256(canonical.encode()).hexdigest()[:12]


# -- asking and judging --------------------------------------------------------------------------------------------

DIAGNOSE_SYSTEM = """\
You are the on-call engineer for a machine-learning research lab's training cluster. A monitor paged about a \
training run. From what it saw — the page, the run's configuration, the log tail, the metrics before the page and \
what was looked up while investigating — say what caused the problem. Answer with the root cause in one or two \
sentences: what broke and why, not what the page already says."""

JUDGE_SYSTEM = """\
You grade diagnoses of incidents on an ML training cluster. You get the root cause the engineers recorded and a \
diagnosis to grade. The diagnosis is CORRECT when it names the same root cause (different words are fine; a more \
specific account of the same cause is fine); INCORRECT when it names another cause, only restates the symptom, or \
hedges across several causes. Answer with one line of JSON and nothing else: \
{"verdict": "correct" or "incorrect", "reason": "one sentence"}"""


FEEDBACK_SYSTEM = """\
You are a research assistant for a machine-learning lab, answering a researcher's question in a Slack thread. You \
get the question and what was looked up for it (tool results). Answer the question directly and correctly from \
that material, in a few sentences."""

FEEDBACK_JUDGE_SYSTEM = """\
You grade answers to researchers' questions in an ML lab. An earlier answer to this question was marked bad, and \
the researcher said what was wrong with it. The new answer is CORRECT when it answers the question without the \
mistake the researcher described (and without another obvious one); INCORRECT when it repeats that mistake, \
dodges the question or hedges across several answers. Answer with one line of JSON and nothing else: \
{"verdict": "correct" or "incorrect", "reason": "one sentence"}"""


def system_prompt(case: dict[str, Any]) -> str:
    """The system prompt of the model being evaluated on ``case``."""
    return FEEDBACK_SYSTEM if case.get("kind") == "feedback" else DIAGNOSE_SYSTEM


def judge_system(case: dict[str, Any]) -> str:
    return FEEDBACK_JUDGE_SYSTEM if case.get("kind") == "feedback" else JUDGE_SYSTEM


def case_judge_prompt(case: dict[str, Any], answer: str) -> str:
    """What the judge reads for ``case``: the recorded cause (an incident), or the question, the answer marked bad
    and the researcher's comment (feedback), then the answer to grade."""
    if case.get("kind") != "feedback":
        return judge_prompt(str(case["cause"]), answer)
    return (
        f"QUESTION:\n{case.get('question', '')}\n\nEARLIER ANSWER, MARKED BAD:\n{case.get('answer', '')}\n\n"
        f"WHAT THE RESEARCHER SAID WAS WRONG:\n{case['cause']}\n\nNEW ANSWER TO GRADE:\n{answer.strip() or '(empty)'}"
    )


def case_prompt(case: dict[str, Any]) -> str:
    """What the model being evaluated reads: the frozen case without its cause (nor, for feedback, the answer that
    was marked bad)."""
    if case.get("kind") == "feedback":
        parts = [f"QUESTION: {case.get('question', '')}"]
        run = case.get("run") or {}
        if run:
            parts.append(f"RUN {run.get('id')} of job {run.get('job')}: " + json.dumps(run.get("params") or {}))
        for item in case.get("context") or []:
            parts.append(f"LOOKED UP with {item['tool']}:\n{item['result']}")
        parts.append("Answer the question.")
        return "\n\n".join(parts)
    page, run = case["page"], case.get("run") or {}
    parts = [
        f"PAGE {page['kind']} ({page['severity']}) at {page['triggered_at']}: {page['summary']}",
        "WATCHDOG FACTS: " + json.dumps(page.get("detail") or {}, sort_keys=True),
    ]
    if run:
        parts.append(f"RUN {run.get('id')} of job {run.get('job')}, attempt {run.get('attempt')}")
        parts.append("PARAMETERS: " + json.dumps(run.get("params") or {}, sort_keys=True))
    if case.get("log_tail"):
        parts.append("LOG TAIL:\n" + str(case["log_tail"]))
    for name, points in (case.get("metrics") or {}).items():
        shown = ", ".join(f"{step}:{value}" for step, value in points)
        parts.append(f"METRIC {name} (step:value): {shown}")
    for item in case.get("context") or []:
        parts.append(f"LOOKED UP with {item['tool']}:\n{item['result']}")
    parts.append("What caused this? Give the root cause.")
    return "\n\n".join(parts)


def judge_prompt(cause: str, diagnosis: str) -> str:
    return f"RECORDED ROOT CAUSE:\n{cause}\n\nDIAGNOSIS TO GRADE:\n{diagnosis.strip() or '(empty)'}"


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_verdict(text: str | None) -> Judged:
    """The judge's answer read strictly: one JSON object whose ``verdict`` is correct or incorrect. Anything else
    (empty, prose, another verdict, two objects) is ``unjudged`` — never a pass."""
    if not text or not text.strip():
        return Judged("unjudged", "the judge gave no answer")
    found = _JSON_OBJECT.findall(text.strip())
    if len(found) != 1:
        return Judged("unjudged", f"the judge did not answer with one JSON object: {text.strip()[:200]!r}")
    try:
        doc = json.loads(found[0])
    except ValueError:
        return Judged("unjudged", f"the judge's answer is not JSON: {found[0][:200]!r}")
    verdict = str(doc.get("verdict", "")).strip().lower() if isinstance(doc, dict) else ""
    if verdict not in ("correct", "incorrect"):
        return Judged("unjudged", f"the judge's verdict {verdict[:40]!r} is neither correct nor incorrect")
    return Judged(verdict, str(doc.get("reason") or "")[:500])  # type: ignore[arg-type]
