"""Findings: what the lab learned, kept so the next question starts from it — the question, the verdict, a summary
whose numbers are claims bound to their sources (checked by the claim ledger when recorded: a finding states nothing
the store does not say), links, and whether it was answered, left incomplete or failed (failures are findings too).

Every experiment that ends leaves one (:func:`experiment_finding`: its ranking, verdict and counts as claims); an agent
records its own (``record_finding`` in the ``lab`` server). Each is a Markdown document in the ``findings`` artifact
store and a row that :meth:`FindingStore.search` ranks by the words of a query (each word's weight its rarity among
the findings: a word every finding shares says nothing). Blocking (database, artifact store).
"""

from __future__ import annotations

import math
import re
import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from labbot.common.errors import BadRequest, LabbotError
from labbot.storage.artifacts import ArtifactStore
from labbot.storage.db import Database
from labbot.storage.models import Finding
from labbot.training.claims import ClaimSources, check

FINDINGS_OWNER = "findings"
STATUSES = ("answered", "incomplete", "failed")
MAX_TEXT = 20_000
_WORD = re.compile(r"[a-z][a-z0-9_]{2,}")
_STOP = frozenset({"the", "and", "for", "with", "which", "what", "does", "from", "that", "this", "than", "are", "its"})


class UnknownFinding(LabbotError):
    status = 404
    code = "unknown_finding"


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def _json(f: Finding) -> dict[str, Any]:
    return {
        "id": f.id, "kind": f.kind, "source": f.source, "question": f.question, "verdict": f.verdict,
        "summary": f.summary, "claims": list(f.claims or []), "links": dict(f.links or {}), "status": f.status,
        "owner": f.owner, "artifact_id": f.artifact_id, "created_at": f.created_at.isoformat(),
    }  # fmt: skip


def markdown(question: str, verdict: str, summary: str, status: str, links: Mapping[str, Any]) -> str:
    link_lines = "\n".join(f"- {k}: {v}" for k, v in links.items())
    return f"# {question}\n\n**{status}** — {verdict}\n\n{summary}\n\n{link_lines}\n"


class FindingStore:
    def __init__(self, db: Database, artifacts: ArtifactStore | None, sources: ClaimSources) -> None:
        self.db = db
        self.artifacts = artifacts
        self.sources = sources

    def record(
        self,
        *,
        question: str,
        verdict: str,
        summary: str,
        status: str,
        owner: str,
        kind: str = "research",
        links: Mapping[str, Any] | None = None,
        source: str | None = None,
    ) -> dict[str, Any]:
        """Keep a finding. Its claims are checked first: one that is wrong or cannot be sourced refuses it
        (``BadRequest`` naming each), nothing kept. Recording the same ``source`` again returns the first."""
        for name, text in (("question", question), ("verdict", verdict)):
            if not text.strip():
                raise BadRequest(f"a finding needs a {name}")
        if len(question) + len(verdict) + len(summary) > MAX_TEXT:
            raise BadRequest(f"a finding is at most {MAX_TEXT} characters of question, verdict and summary")
        if status not in STATUSES:
            raise BadRequest(f"status {status!r} is not one of {', '.join(STATUSES)}")
        if source is not None:
            existing = self._by_source(source)
            if existing is not None:
                return existing
        report = check(f"{verdict}\n{summary}", self.sources)
        if not report.ok:
            problems = "; ".join(
                f"{c.claim.value} | {c.claim.source}: {c.why}" for c in report.checked if c.verdict != "ok"
            )
            raise BadRequest(f"the finding's numbers do not check: {problems}")
        finding_id = "f" + "".join(secrets.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(7))
        artifact_id = None
        if self.artifacts is not None:
            doc = markdown(question, verdict, summary, status, links or {})
            artifact_id = self.artifacts.put(FINDINGS_OWNER, f"{finding_id}.md", doc.encode(), "text/markdown")["id"]
        row = Finding(
            id=finding_id, kind=kind, source=source, question=question, verdict=verdict, summary=summary,
            claims=[c.to_json() for c in report.checked], links=dict(links or {}), status=status, owner=owner,
            artifact_id=artifact_id,
        )  # fmt: skip
        try:
            with self.db.session() as s:
                s.add(row)
        except IntegrityError:  # the same source recorded at the same moment (another replica): the first stays
            existing = self._by_source(source or "")
            if existing is None:
                raise
            return existing
        return self.get(finding_id)

    def _by_source(self, source: str) -> dict[str, Any] | None:
        with self.db.session() as s:
            row = s.scalar(select(Finding).where(Finding.source == source))
            return _json(row) if row is not None else None

    def get(self, finding_id: str) -> dict[str, Any]:
        with self.db.session() as s:
            row = s.get(Finding, finding_id)
            if row is None:
                raise UnknownFinding(f"unknown finding {finding_id!r}; search them with `labbot findings WORDS`")
            return _json(row)

    def search(self, query: str, *, limit: int = 10) -> list[dict[str, Any]]:
        """The findings that share the most (and the rarest) words with ``query``, best first; with no query,
        the newest."""
        with self.db.session() as s:
            rows = [_json(r) for r in s.scalars(select(Finding).order_by(Finding.created_at.desc()))]
        wanted = set(words(query))
        if not wanted:
            return rows[:limit]
        bags = {r["id"]: set(words(f"{r['question']} {r['verdict']} {r['summary']}")) for r in rows}
        df = Counter(w for bag in bags.values() for w in bag)
        n = len(rows)

        def score(r: dict[str, Any]) -> float:
            return sum(math.log(1 + n / df[w]) for w in wanted & bags[r["id"]])

        ranked = sorted((r for r in rows if score(r) > 0), key=score, reverse=True)
        return ranked[:limit]


def experiment_finding(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The finding an ended experiment leaves (its JSON as ``ExperimentService.get`` gives it): the question it
    asked, the best config and the verdict against the runner-up, the counts — each number a claim on the
    experiment — and its status: answered (done, something scored), incomplete (stopped or out of budget with
    something scored), failed (nothing scored)."""
    exp_id, objective = doc["id"], doc["objective"]
    metric, goal = objective["metric"], objective["goal"]
    names = ", ".join(doc.get("searched") or sorted({w.split("=")[0] for w in doc["space"]}))
    question = f"{doc['job']}: which {names} {'minimise' if goal == 'min' else 'maximise'} {metric}?"
    ranking: Sequence[Mapping[str, Any]] = doc["results"]["ranking"]
    counts = doc["counts"]
    tally = (
        f"[[{len(doc['trials'])} | experiment:{exp_id} count:trials]] trials: "
        f"[[{counts['done']} | experiment:{exp_id} count:done]] done, "
        f"[[{counts['pruned']} | experiment:{exp_id} count:pruned]] pruned, "
        f"[[{counts['failed']} | experiment:{exp_id} count:failed]] failed"
    )
    if not ranking:
        verdict = f"no config scored ({doc['status']}: {doc.get('reason') or ''})"
        return {"question": question, "verdict": verdict, "summary": tally + ".", "status": "failed"}
    best = ranking[0]
    params = " ".join(f"{k}={v}" for k, v in best["params"].items())
    interval = ""
    if best.get("low") is not None:
        interval = (f" (95 % interval [[{best['low']:.4g} | experiment:{exp_id} best stat:low]]–"
                    f"[[{best['high']:.4g} | experiment:{exp_id} best stat:high]] over "
                    f"[[{best['n']} | experiment:{exp_id} best stat:n]] seeds)")  # fmt: skip
    verdict = f"best: {params} → {metric} [[{best['mean']:.4g} | experiment:{exp_id} best]]{interval}"
    lines = [tally + "."]
    if doc["results"].get("verdict"):
        lines.append(f"Best against the runner-up: {doc['results']['verdict']['words']}.")
    for row in ranking[1:4]:
        others = " ".join(f"{k}={v}" for k, v in row["params"].items())
        lines.append(f"- {others} → [[{row['mean']:.4g} | experiment:{exp_id} trial:{row['trial']}]]")
    status = "answered" if doc["status"] == "done" else "incomplete"
    if status == "incomplete":
        lines.append(f"Incomplete: {doc.get('reason') or doc['status']}.")
    return {"question": question, "verdict": verdict, "summary": "\n".join(lines), "status": status}
