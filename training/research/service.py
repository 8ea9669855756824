"""The research service: a question taken to an answer under one approval. Every front door (``/api/v1/research``
for the ``lab`` MCP server and the CLI; Slack's ``/lab research``) goes through here, so what the researcher agent
may do is decided here, whatever the model says:

* **open** a question (its owner is who asked: they, or an admin, approve);
* **propose** a plan (:mod:`.plan`): checked arm by arm by the experiment service and priced; before any approval it
  waits for one; after, a change within the approved scope is applied at once (an arm dropped, fewer trials, a
  smaller budget) and one that grows it waits for an approval of the difference — the approved part runs on;
* **start** a plan: the approved action. It names the plan's hash, and only the plan proposed under that hash runs:
  a plan changed since is refused, so an approval releases exactly what it showed;
* **act** within the plan on a failure (drop a trial, stop an arm or everything, restart a run of the plan from its
  checkpoint) — only the actions the approved plan lists;
* **report**: every number of the report is a claim bound to its source (``labbot.training.claims``), recomputed
  from the store first: one that does not match, or a number bound to nothing, refuses the report with what
  differs, nothing kept. A report ends the question: arms still running are stopped, and the question is
  ``answered`` only when every arm ran to its end (labbot decides, not the model); it leaves a finding.

Planning, acting and reporting on a question are its owner's agents' alone (``by``: the researcher an agent works
for; a caller with the admin token and no ``by`` acts as the admin): another researcher's agent is refused, so a
shrink that needs no approval is never a way to stop someone else's experiments. The researcher has no tool that
launches or raises a limit any other way (its role's tools), and the experiments'
controller holds each arm to its share of the budget. Blocking (database, Optuna's storage): the HTTP layer runs it on
worker threads.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select

from labbot.common.errors import BadRequest, Conflict, Forbidden, LabbotError, UnknownResearch
from labbot.storage.db import Database
from labbot.storage.models import ExperimentStatus, Research, ResearchStatus, utcnow
from labbot.training.claims import ClaimSources, check
from labbot.training.experiments.plan import Budget, ExperimentPlan, ExperimentRequest
from labbot.training.experiments.service import ExperimentService
from labbot.training.findings import FindingStore
from labbot.training.research.plan import (
    ArmRequest,
    PlanRequest,
    ResolvedPlan,
    dropped,
    fixed_changes,
    growth,
    resolve_plan,
)

__all__ = ["FollowUp", "ResearchService", "UnknownResearch"]

_ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
PURPOSE = "research"
MAX_QUESTION = 2000
MAX_REPORT = 20_000
MAX_FOLLOW_UPS = 5


FollowUp = Mapping[str, str]  # {"title": ..., "description": ...}: a Linear issue the report proposes


def new_research_id() -> str:
    return "q" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(7))


class ResearchService:
    def __init__(
        self,
        db: Database,
        experiments: ExperimentService,
        sources: ClaimSources,
        *,
        findings: FindingStore | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.db = db
        self.experiments = experiments
        self.sources = sources
        self.findings = findings
        self.clock = clock

    # -- opening and reading -----------------------------------------------------------------------------------

    def open(
        self, question: str, owner: str, *, channel: str | None = None, thread_ts: str | None = None
    ) -> dict[str, Any]:
        question = question.strip()
        if not question:
            raise BadRequest("a research question needs words: e.g. `/lab research which lr minimises tiny-lm loss?`")
        if len(question) > MAX_QUESTION:
            raise BadRequest(f"a research question is at most {MAX_QUESTION} characters")
        if not owner.strip():
            raise BadRequest("a research question needs an owner (who asked)")
        now = self.clock()
        row = Research(
            id=new_research_id(), question=question, owner=owner, status=ResearchStatus.PLANNING.value, arms={},
            channel=channel, thread_ts=thread_ts, published=False, created_at=now, updated_at=now,
        )  # fmt: skip
        with self.db.session() as s:
            s.add(row)
        return self.get(row.id)

    def _row(self, s: Any, rid: str) -> Research:
        row = s.get(Research, rid)
        if row is None:
            raise UnknownResearch(f"unknown research question {rid!r}; list them with `labbot research`")
        return row

    def owner_of(self, rid: str) -> str:
        with self.db.session() as s:
            return self._row(s, rid).owner

    def get(self, rid: str) -> dict[str, Any]:
        """A question as JSON: its plans (proposed, approved; what a pending change adds), each arm's experiment
        in short, the budget used, whether every arm has ended, and the report once given."""
        with self.db.session() as s:
            row = self._row(s, rid)
            doc = _json(row)
        arms = []
        used, done = 0.0, True
        for name, exp_id in doc["arms"].items():
            exp = self.experiments.get(exp_id)
            used += float(exp["budget_used"]["amount"])
            ended = ExperimentStatus(exp["status"]).is_terminal
            done = done and ended
            best = exp["results"]["ranking"][0] if exp["results"]["ranking"] else None
            arms.append({
                "name": name, "experiment": exp_id, "status": exp["status"], "reason": exp.get("reason"),
                "counts": exp["counts"], "budget_used": exp["budget_used"], "best": best,
                "runs": [r["id"] for t in exp["trials"] for r in t["runs"]],
            })  # fmt: skip
        doc["arm_states"] = arms
        doc["budget_used"] = used
        doc["all_ended"] = bool(arms) and done
        if doc["approved"] is not None and doc["plan"] is not None and doc["plan_hash"] != doc["approved_hash"]:
            doc["pending"] = {"hash": doc["plan_hash"], "grows": growth(doc["approved"]["scope"], doc["plan"]["scope"])}
        else:
            doc["pending"] = (
                {"hash": doc["plan_hash"], "grows": ["the whole plan (nothing is approved yet)"]}
                if doc["approved"] is None and doc["plan"] is not None
                else None
            )
        return doc

    def questions(self, *, limit: int = 50) -> list[dict[str, Any]]:
        with self.db.session() as s:
            rows = s.scalars(select(Research).order_by(Research.created_at.desc()).limit(limit))
            return [_json(r) for r in rows]

    # -- the plan ------------------------------------------------------------------------------------------------

    def resolve(self, rid: str, req: PlanRequest) -> ResolvedPlan:
        """``req`` checked and priced for question ``rid``; writes nothing."""
        owner = self.owner_of(rid)

        def arm(a: ArmRequest, budget: Budget) -> ExperimentPlan:
            return self.experiments.plan(_experiment_request(rid, owner, a, budget), search_seed=0)

        return resolve_plan(req, arm)

    def _owned(self, rid: str, by: str | None, what: str) -> None:
        """Refuse ``by`` (the researcher an agent works for) unless they asked the question."""
        if by is None:
            return
        owner = self.owner_of(rid)
        if by != owner:
            raise Forbidden(
                f"research {rid} is {owner}'s question: only their agents {what} it (yours work for {by}); ask {owner}"
            )

    def propose(self, rid: str, req: PlanRequest, *, by: str | None = None) -> dict[str, Any]:
        """Record ``req`` as the question's plan. Before an approval it waits for one; after, a change within the
        approved scope is applied now (``applied``) and one beyond it waits for an approval of the difference
        (``needs``: what grew). A change that no running arm can take is refused, nothing recorded."""
        self._owned(rid, by, "plan")
        resolved = self.resolve(rid, req)
        plan = {**resolved.to_json(), "request": req.model_dump()}
        plan["projection"]["money"] = self._money(plan["projection"])
        with self.db.session() as s:
            row = self._row(s, rid)
            if ResearchStatus(row.status).is_terminal:
                raise Conflict(f"research {rid} is {row.status}: ask a new question to plan again")
            approved = row.approved
            if approved is not None:
                problems = fixed_changes(approved["scope"], plan["scope"], running=list(row.arms))
                if problems:
                    raise BadRequest("; ".join(problems))
            row.plan, row.plan_hash = plan, plan["hash"]
        if approved is None:
            return {"research": self.get(rid), "change": "needs_approval",
                    "needs": ["the whole plan (nothing is approved yet)"]}  # fmt: skip
        if plan["hash"] == approved["hash"]:
            return {"research": self.get(rid), "change": "same", "needs": []}
        grew = growth(approved["scope"], plan["scope"])
        if grew:
            return {"research": self.get(rid), "change": "needs_approval", "needs": grew}
        self._apply(rid, plan)
        return {"research": self.get(rid), "change": "applied", "needs": []}

    def _money(self, projection: Mapping[str, Any]) -> dict[str, Any] | None:
        """The plan's cost in money at ``[compute.prices]``: projected and capped (None: its unit has no price)."""
        prices = self.experiments.runs.compute.prices
        unit = str(projection["unit"])
        cap = prices.of(float(projection["cap"]), unit)
        if cap is None:
            return None
        projected = projection.get("projected")
        return {"currency": prices.currency, "cap": cap,
                "projected": prices.of(float(projected), unit) if projected is not None else None}  # fmt: skip

    def preview(self, rid: str, plan_hash: str) -> dict[str, Any]:
        """What approving ``plan_hash`` would release (what the approval prompt shows): the plan, its price, what
        it cannot undo and, for a change, what grows. Refused when that is not the plan waiting for approval."""
        doc = self.get(rid)
        self._pending(doc, plan_hash)
        return doc

    def _pending(self, doc: Mapping[str, Any], plan_hash: str) -> None:
        rid = doc["id"]
        if ResearchStatus(doc["status"]).is_terminal:
            raise Conflict(f"research {rid} is {doc['status']}: nothing to approve")
        if doc["plan"] is None:
            raise Conflict(f"research {rid} has no plan yet: propose one first")
        if plan_hash != doc["plan_hash"]:
            raise Conflict(
                f"plan {plan_hash} is not research {rid}'s plan waiting for approval (that is {doc['plan_hash']}): "
                "the plan changed since; ask for the current one"
            )
        if doc["plan_hash"] == doc["approved_hash"]:
            raise Conflict(f"plan {plan_hash} of research {rid} is approved already and runs")

    def start(self, rid: str, plan_hash: str, *, by: str = "approval") -> dict[str, Any]:
        """Release the plan proposed under ``plan_hash`` — the approved action, and nothing else: its new arms start,
        its changed limits apply."""
        doc = self.get(rid)
        self._pending(doc, plan_hash)
        self._apply(rid, doc["plan"], approved_by=by)
        return self.get(rid)

    def _apply(self, rid: str, plan: Mapping[str, Any], *, approved_by: str | None = None) -> None:
        """Make the question's experiments what ``plan`` says (dropped arms stopped, limits amended, new arms
        started), then record it as the approved plan. Each arm's experiment is recorded as soon as it starts, so
        a failure half-way leaves what started known and the plan unapproved (propose or start again)."""
        with self.db.session() as s:
            row = self._row(s, rid)
            owner, arms = row.owner, dict(row.arms)
            before = row.approved
        request = PlanRequest.model_validate(plan["request"])
        resolved = self.resolve(rid, request)
        if resolved.to_json()["hash"] != plan["hash"]:  # the job's registry or history changed its meaning
            raise Conflict(f"research {rid}'s plan no longer resolves to what was proposed: propose it again")
        if before is not None:
            for name in dropped(before["scope"], plan["scope"]):
                exp_id = arms.get(name)
                if exp_id is not None:
                    with contextlib.suppress(Conflict):  # it had ended
                        self.experiments.stop(exp_id, by=f"research {rid} (arm {name} dropped)")
        for (name, exp_plan), arm in zip(resolved.arms, request.arms, strict=True):
            exp_id = arms.get(name)
            if exp_id is None:
                req = _experiment_request(rid, owner, arm, exp_plan.budget)
                # an arm's experiment made before a crash, but not yet recorded here, is the one: never a second
                made_id = self.experiments.find(str(req.name)) or self.experiments.create(req)["id"]
                with self.db.session() as s:
                    row = self._row(s, rid)
                    row.arms = {**row.arms, name: made_id}
                    row.updated_at = self.clock()
            else:
                self.experiments.amend(
                    exp_id, trials=exp_plan.trials, concurrency=exp_plan.concurrency, budget=exp_plan.budget
                )
        with self.db.session() as s:
            row = self._row(s, rid)
            row.approved, row.approved_hash = dict(plan), plan["hash"]
            row.plan, row.plan_hash = dict(plan), plan["hash"]
            row.status = ResearchStatus.RUNNING.value
            if approved_by is not None:
                row.reason = f"plan {plan['hash']} approved ({approved_by})"
            row.updated_at = self.clock()

    # -- acting within the plan ------------------------------------------------------------------------------------

    def act(self, rid: str, action: str, *, arm: str | None = None, trial: int | None = None,
            run_id: str | None = None, by: str = "researcher", agent: str | None = None) -> dict[str, Any]:  # fmt: skip
        """One of the approved plan's failure actions, without asking again: ``drop_trial`` (ARM, TRIAL),
        ``stop_arm`` (ARM), ``stop`` (every arm), ``restart`` (RUN_ID, a run of one of the plan's arms, from its
        checkpoint). An action the plan does not list, or on something outside it, is refused; so is an agent that
        does not work for the question's owner (``agent``)."""
        self._owned(rid, agent, "act on")
        doc = self.get(rid)
        if doc["approved"] is None or doc["status"] != ResearchStatus.RUNNING.value:
            raise Conflict(f"research {rid} is {doc['status']} with no running plan: nothing to act on")
        allowed = doc["approved"]["scope"]["on_failure"]
        if action not in allowed:
            raise BadRequest(
                f"the approved plan does not allow {action!r} (it allows {', '.join(allowed) or 'nothing'}): "
                "propose a changed plan, which its owner approves"
            )
        who = f"{by} (research {rid})"
        if action == "stop":
            for state in doc["arm_states"]:
                with contextlib.suppress(Conflict):
                    self.experiments.stop(state["experiment"], by=who)
        elif action == "restart":
            runs = {r for state in doc["arm_states"] for r in state["runs"]}
            if run_id not in runs:
                raise BadRequest(
                    f"run {run_id!r} is not a run of research {rid}'s experiments: it may restart only those"
                )
            self.experiments.runs.restart(str(run_id), by=who)
        else:
            exp_id = doc["arms"].get(arm or "")
            if exp_id is None:
                raise BadRequest(f"research {rid} has no arm {arm!r}; its arms: {', '.join(doc['arms']) or 'none'}")
            if action == "stop_arm":
                self.experiments.stop(exp_id, by=who)
            else:
                if trial is None:
                    raise BadRequest("drop_trial needs the trial's number (get_experiment lists them)")
                self.experiments.stop_trial(exp_id, trial, by=who)
        return self.get(rid)

    # -- the report ------------------------------------------------------------------------------------------------

    def report(
        self, rid: str, *, verdict: str, text: str, follow_ups: Sequence[FollowUp] = (), by: str | None = None
    ) -> dict[str, Any]:
        """Check and keep the answer. Every number of ``verdict``, ``text`` and the follow-ups must be a claim that
        matches the store (``BadRequest`` with each that does not, and the text as corrected, else); then arms still
        running are stopped, the question is answered or incomplete (an arm cut short or never run), and its
        finding recorded. The thread, Notion and Linear get it from the publisher (``published``)."""
        self._owned(rid, by, "report on")
        if not verdict.strip():
            raise BadRequest("a report needs a verdict: the answer in a sentence, its numbers as [[VALUE | SOURCE]]")
        if len(verdict) + len(text) > MAX_REPORT:
            raise BadRequest(f"a report is at most {MAX_REPORT} characters")
        if len(follow_ups) > MAX_FOLLOW_UPS:
            raise BadRequest(f"a report proposes at most {MAX_FOLLOW_UPS} follow-ups")
        for f in follow_ups:
            if not str(f.get("title", "")).strip():
                raise BadRequest("each follow-up needs a title (and a description)")
        doc = self.get(rid)
        if doc["approved"] is None:
            raise Conflict(f"research {rid} has no approved plan: there is nothing to report on yet")
        if ResearchStatus(doc["status"]).is_terminal:
            raise Conflict(f"research {rid} is {doc['status']} already")
        whole = "\n".join([verdict, text, *(f"{f.get('title', '')}\n{f.get('description', '')}" for f in follow_ups)])
        ledger = check(whole, self.sources)
        if not ledger.ok or ledger.unbound:
            problems = [f"{c.claim.value} | {c.claim.source}: {c.why}" for c in ledger.checked if c.verdict != "ok"]
            if ledger.unbound:
                problems.append(
                    f"numbers bound to no source: {', '.join(ledger.unbound)} (write each as [[VALUE | SOURCE]])"
                )
            raise BadRequest(
                "the report was not posted, its numbers do not check: " + "; ".join(problems)
                + "\n\nthe text as the store has it:\n" + ledger.corrected
            )  # fmt: skip
        for state in doc["arm_states"]:
            if not ExperimentStatus(state["status"]).is_terminal:
                with contextlib.suppress(Conflict):
                    self.experiments.stop(state["experiment"], by=f"research {rid} reported")
        doc = self.get(rid)
        short = [
            f"arm {a['name']} {a['status'].replace('_', ' ')} ({a.get('reason') or 'no reason given'})"
            for a in doc["arm_states"]
            if a["status"] != ExperimentStatus.DONE.value
        ]
        missing = [a["name"] for a in doc["approved"]["scope"]["arms"] if a["name"] not in doc["arms"]]
        short += [f"arm {name} never ran" for name in missing]
        status = ResearchStatus.INCOMPLETE if short else ResearchStatus.ANSWERED
        checked = [c.to_json() for c in ledger.checked]
        report = {"verdict": verdict, "text": text, "follow_ups": [dict(f) for f in follow_ups],
                  "claims": checked, "counts": ledger.counts(), "status": status.value, "short": short}  # fmt: skip
        finding_id = None
        if self.findings is not None:
            links = {"research": rid, "experiments": dict(doc["arms"])}
            if doc.get("channel") and doc.get("thread_ts"):
                links["thread"] = f"{doc['channel']}/{doc['thread_ts']}"
            finding_id = self.findings.record(
                question=doc["question"], verdict=verdict, summary=text, owner=doc["owner"], kind="research",
                status="incomplete" if short else "answered", links=links, source=f"research:{rid}",
            )["id"]  # fmt: skip
        with self.db.session() as s:
            row = self._row(s, rid)
            if ResearchStatus(row.status).is_terminal:  # reported meanwhile (another call)
                raise Conflict(f"research {rid} is {row.status} already")
            row.report, row.finding_id, row.status = report, finding_id, status.value
            row.reason = "; ".join(short) if short else "every arm ran to its end"
            row.updated_at = self.clock()
        return self.get(rid)

    def close(self, rid: str, *, by: str) -> dict[str, Any]:
        """End a question with no report: its running arms stopped."""
        doc = self.get(rid)
        if ResearchStatus(doc["status"]).is_terminal:
            raise Conflict(f"research {rid} is {doc['status']} already")
        for state in doc["arm_states"]:
            with contextlib.suppress(Conflict, LabbotError):
                self.experiments.stop(state["experiment"], by=f"{by} (research {rid} closed)")
        with self.db.session() as s:
            row = self._row(s, rid)
            row.status, row.reason, row.updated_at = ResearchStatus.CLOSED.value, f"closed by {by}", self.clock()
        return self.get(rid)

    # -- the thread ----------------------------------------------------------------------------------------------

    def set_thread(self, rid: str, channel: str, thread_ts: str) -> None:
        with self.db.session() as s:
            row = self._row(s, rid)
            row.channel, row.thread_ts = channel, thread_ts

    def unpublished(self) -> list[str]:
        """Questions reported whose report is not yet where it goes (the publisher's list)."""
        with self.db.session() as s:
            q = select(Research.id).where(Research.report.is_not(None), Research.published.is_(False))
            return list(s.scalars(q))

    def record_link(self, rid: str, key: str, link: Mapping[str, Any]) -> None:
        """Where part of the report was published (``thread``, ``notion``, ``linear:N``), as soon as it is: a
        publisher that stopped half-way goes on from the next part."""
        with self.db.session() as s:
            row = self._row(s, rid)
            report = dict(row.report or {})
            report["links"] = {**report.get("links", {}), key: dict(link)}
            row.report = report

    def mark_published(self, rid: str) -> None:
        with self.db.session() as s:
            self._row(s, rid).published = True


def _experiment_request(rid: str, owner: str, arm: ArmRequest, budget: Budget | None) -> ExperimentRequest:
    return ExperimentRequest(
        job=arm.job, space=arm.space, metric=arm.metric, goal=arm.goal, at=arm.at, window=arm.window,
        trials=arm.trials, concurrency=arm.concurrency, seeds=arm.seeds, search=arm.search, prune=arm.prune,
        budget=f"{budget.amount:.9f}{budget.unit}-h" if budget is not None else None,
        name=f"{rid}/{arm.name}", owner=owner, purpose=PURPOSE,
    )  # fmt: skip


def _ts(v: datetime | None) -> str | None:
    return v.isoformat() if v is not None else None


def _json(r: Research) -> dict[str, Any]:
    return {
        "id": r.id, "question": r.question, "owner": r.owner, "status": r.status, "plan": r.plan,
        "plan_hash": r.plan_hash, "approved": r.approved, "approved_hash": r.approved_hash, "arms": dict(r.arms or {}),
        "report": r.report, "finding_id": r.finding_id, "reason": r.reason, "channel": r.channel,
        "thread_ts": r.thread_ts, "published": bool(r.published), "created_at": _ts(r.created_at),
        "updated_at": _ts(r.updated_at),
    }  # fmt: skip
