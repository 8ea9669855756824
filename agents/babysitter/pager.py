"""The pager: incidents (one per (run, condition) dedup key), their escalation, and the notifications they cause.

Two sides. The watchdog calls :meth:`Pager.judge` and :meth:`Pager.escalate` inside its tick's transaction with
what it found, so a finding, the incident it opens and the notifications that incident causes are committed
together: nothing is paged twice and nothing is lost if labbot dies between two ticks. The front doors (Slack
buttons, ``/lab pages``, ``/lab ack``, the CLI through ``/api/v1``) call :meth:`Pager.pages`,
:meth:`Pager.acknowledge` and :meth:`Pager.resolve`. Notifications are never sent here: each is a ``Delivery`` row
(the outbox, ``labbot.agents.babysitter.outbox``) whose key makes enqueueing idempotent.

Escalation (``labbot.agents.babysitter.policy.PagingPolicy``): level 0 — the run's thread (mentioning the owner, with
Ack / Resolve / Stop buttons) and a DM to the owner; level 1 after ``escalate_after`` unacknowledged — the on-call
channel (and user group); level 2 as long again — PagerDuty (``dedup_key`` = the incident key), acknowledged and
resolved there when that happens in Slack. Until acknowledged, the current level is re-notified every
``renotify_every``. A condition that clears resolves its incident with a note; one that returns within ``flap_window``
re-opens the same incident quietly, later it is a new occurrence paged from level 0.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from labbot.agents.babysitter.policy import PagingPolicy
from labbot.common.durations import format_duration
from labbot.common.errors import BadRequest, Conflict, UnknownPage
from labbot.storage.db import Database
from labbot.storage.models import OPEN_INCIDENT_STATES, Delivery, Incident, IncidentState, Run, utcnow
from labbot.training.monitoring import INFRA, METRIC, OF_THE_NUMBERS, PAGE, Finding, condition_of

log = logging.getLogger(__name__)

_ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,}$")
LABBOT = "labbot"  # who resolves an incident whose condition cleared
TOP_LEVEL = 2

CLEARED = {
    "silent": "telemetry resumed",
    "hung": "the step advances again",
    "failed": "the run is no longer failed",
    "pending": "Ray started the job",
    "diverged": "the loss is back to normal",
    "slow": "throughput recovered",
    "infra": "the Ray API answers again",
    "no_signal": "the rewards vary again",
    "entropy_collapse": "entropy recovered",
    "kl_blowup": "KL is back within bounds",
    "metric": "the metric is back within its alert",
}


def incident_condition(inc: Incident) -> str:
    """What the incident is kept per (``Finding.condition``): its kind, or ``metric:NAME`` for a metric alert."""
    alert = (inc.detail or {}).get("alert")
    return condition_of(inc.kind, alert if isinstance(alert, str) else None)


def incident_label(inc: Incident) -> str:
    """The condition as people read it: ``hung``, or ``metric pass_rate-below``."""
    alert = (inc.detail or {}).get("alert")
    return f"{inc.kind} {alert}" if inc.kind == METRIC and isinstance(alert, str) else inc.kind


def incident_key(run_id: str | None, kind: str) -> str:
    """The dedup key of a (run, condition): also PagerDuty's ``dedup_key``."""
    return f"labbot-{run_id}-{kind}" if run_id else f"labbot-cluster-{kind}"


def new_page_id() -> str:
    return "p" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(5))


MAX_CAUSE = 2000


def check_cause(text: str) -> str:
    """A cause as written down: one to 2,000 characters of words (BadRequest says what would be right)."""
    cause = " ".join(text.split())
    if len(cause) < 10:
        raise BadRequest(
            f"the cause {cause!r} is too short to score a diagnosis against: say what was wrong in a sentence, e.g. "
            '--cause "the data loader deadlocked on a full shared-memory queue"'
        )
    if len(cause) > MAX_CAUSE:
        raise BadRequest(f"the cause is {len(cause)} characters: keep it under {MAX_CAUSE}, the diagnosis in brief")
    return cause


def incident_view(inc: Incident) -> dict[str, Any]:
    """A page as the API, ``labbot pages --json`` and Slack see it (a contract: fields are added, never renamed or
    removed; README "Babysitting and paging")."""

    def ts(v: datetime | None) -> str | None:
        return v.isoformat() if v is not None else None

    return {
        "id": inc.id,
        "key": inc.key,
        "run_id": inc.run_id,
        "kind": inc.kind,
        "severity": inc.severity,
        "state": inc.state,
        "summary": inc.summary,
        "detail": dict(inc.detail or {}),
        "escalation_level": inc.escalation_level,
        "occurrence": inc.occurrence,
        "reopened": inc.reopened,
        "triggered_at": ts(inc.triggered_at),
        "acknowledged_at": ts(inc.acknowledged_at),
        "acknowledged_by": inc.acknowledged_by,
        "resolved_at": ts(inc.resolved_at),
        "resolved_by": inc.resolved_by,
        "next_escalation_at": ts(inc.next_escalation_at),
        "pagerduty_open": inc.pagerduty_open,
        "links": dict(inc.links or {}),
        "cause": inc.cause,
        "cause_by": inc.cause_by,
        "cause_at": ts(inc.cause_at),
    }


class Pager:
    def __init__(
        self,
        db: Database,
        policy: PagingPolicy,
        *,
        slack: bool,
        pagerduty: bool,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.db = db
        self.policy = policy
        self.slack = slack  # False: no Slack deliveries are queued (serve without a bot token)
        self.pagerduty = pagerduty
        self.clock = clock
        # pages opened (or back as a new occurrence) since the last ``take_opened``: the investigator looks at them
        self._opened: list[str] = []

    def take_opened(self) -> list[str]:
        opened, self._opened = self._opened, []
        return opened

    # -- the watchdog's side: inside its transaction ---------------------------------------------------------

    def judge(
        self,
        s: Session,
        run: Run | None,
        incidents: Mapping[str, Incident],
        findings: Sequence[Finding],
        now: datetime,
        *,
        kinds: Sequence[str] | None = None,
    ) -> None:
        """Open, re-open or clear ``run``'s incidents (the cluster's when ``run`` is None) from what was found.

        ``incidents`` are the existing rows by condition (:func:`incident_condition`: the kind, or ``metric:NAME``);
        ``kinds`` limits which conditions were judged this time (the others are left as they are); by default every
        condition with an incident or a finding.
        """
        found = {f.condition: f for f in findings}
        judged = set(kinds) if kinds is not None else set(found) | set(incidents)
        for kind, finding in found.items():
            self._open_or_reopen(s, run, incidents.get(kind), finding, now)
        for kind, inc in incidents.items():
            if kind in judged and kind not in found and inc.condition_active:
                self._cleared(s, run, inc, now)

    def _open_or_reopen(self, s: Session, run: Run | None, inc: Incident | None, f: Finding, now: datetime) -> None:
        """A condition found: a new page, or its page back (re-opened within the flap window, else a new
        occurrence); nothing while its page's condition is still active."""
        run_id = run.id if run is not None else None
        if inc is None:
            inc = Incident(
                id=new_page_id(),
                key=incident_key(run_id, f.condition),
                run_id=run_id,
                kind=f.kind,
                severity=f.severity,
                state=IncidentState.TRIGGERED.value,
                summary=f.summary,
                detail=f.detail,
                escalation_level=0,
                occurrence=1,
                reopened=0,
                condition_active=True,
                pagerduty_open=False,
                triggered_at=now,
                renotified=0,
            )
            s.add(inc)
            s.flush()
            self._page(s, run, inc, now)
            log.info(
                "page %s: %s %s: %s",
                inc.id,
                run_id or "cluster",
                f.kind,
                f.summary,
                extra={"page_id": inc.id, "run_id": inc.run_id},
            )
            return
        if inc.condition_active:
            return  # still there: the timers do the rest
        inc.condition_active = True
        inc.summary, inc.detail = f.summary, f.detail
        flapping = (
            inc.state == IncidentState.RESOLVED.value
            and inc.resolved_by == LABBOT
            and inc.resolved_at is not None
            and now - inc.resolved_at <= timedelta(seconds=self.policy.flap_window_s)
        )
        if flapping:
            self._reopen(s, run, inc, now)
        elif inc.state == IncidentState.RESOLVED.value:
            self._new_occurrence(s, run, inc, now)

    def _page(self, s: Session, run: Run | None, inc: Incident, now: datetime) -> None:
        """Level 0 of a new occurrence, and the timers of what follows."""
        if inc.severity == PAGE:
            self._opened.append(inc.id)
        for target in self._level0_targets(run, inc):
            self._post(s, inc, target, level=0)
        if inc.severity == PAGE:
            inc.next_escalation_at = now + timedelta(seconds=self.policy.escalate_after_s)
            inc.next_renotify_at = self._renotify_at(now)

    def _new_occurrence(self, s: Session, run: Run | None, inc: Incident, now: datetime) -> None:
        inc.occurrence += 1
        inc.reopened = 0
        inc.state = IncidentState.TRIGGERED.value
        inc.escalation_level = 0
        inc.renotified = 0
        inc.triggered_at = now
        inc.acknowledged_at = inc.acknowledged_by = inc.resolved_at = inc.resolved_by = None
        self._page(s, run, inc, now)
        log.info(
            "page %s: %s is back (occurrence %d): %s",
            inc.id,
            inc.kind,
            inc.occurrence,
            inc.summary,
            extra={"page_id": inc.id, "run_id": inc.run_id},
        )

    def _reopen(self, s: Session, run: Run | None, inc: Incident, now: datetime) -> None:
        """The condition came back within the flap window: the same page again, without a new round of pages."""
        inc.reopened += 1
        inc.state = (IncidentState.ACKNOWLEDGED if inc.acknowledged_at else IncidentState.TRIGGERED).value
        inc.resolved_at = inc.resolved_by = None
        if inc.state == IncidentState.TRIGGERED.value and inc.severity == PAGE:
            if inc.escalation_level < TOP_LEVEL:
                inc.next_escalation_at = now + timedelta(seconds=self.policy.escalate_after_s)
            inc.next_renotify_at = self._renotify_at(now)
        times = "once" if inc.reopened == 1 else f"{inc.reopened} times"
        self._note(
            s,
            run,
            inc,
            f"reopen-{inc.reopened}",
            f":repeat: *{incident_label(inc)}* is back — {inc.summary}. Page `{inc.id}` re-opened "
            f"(flapping: back {times} within {format_duration(self.policy.flap_window_s)} of clearing).",
        )
        self._refresh(s, inc, f"reopen-{inc.reopened}")
        if self.pagerduty and inc.escalation_level >= TOP_LEVEL and not inc.pagerduty_open:
            self._pagerduty(s, inc, "trigger", f"reopen-{inc.reopened}")
            inc.pagerduty_open = True

    def _cleared(self, s: Session, run: Run | None, inc: Incident, now: datetime) -> None:
        inc.condition_active = False
        if inc.state == IncidentState.RESOLVED.value:
            return
        reason = CLEARED.get(inc.kind, "the condition cleared")
        if run is not None and run.status == "stopped":
            reason = "the run was stopped"
        elif run is not None and run.status in ("succeeded", "failed") and inc.kind in OF_THE_NUMBERS:
            # the run ended with it: nothing fixed it, so the page stays open for a person to look and resolve
            self._note(
                s,
                run,
                inc,
                "ended-with",
                f":warning: the run ended ({run.status}) with *{incident_label(inc)}* never cleared — {inc.summary}. "
                f"Page `{inc.id}` stays open until someone resolves it (`labbot resolve {inc.id} --cause …`).",
            )
            return
        elif run is not None and run.status == "succeeded" and inc.kind != "failed":
            reason = "the run finished"
        self._resolve(s, run, inc, LABBOT, now, note=f":white_check_mark: *{incident_label(inc)}* cleared — {reason}.")

    def escalate(self, s: Session, run: Run | None, inc: Incident, now: datetime) -> None:
        """Move an unacknowledged page up a level, or re-notify its current level, when its timer is due."""
        if inc.state != IncidentState.TRIGGERED.value or inc.severity != PAGE:
            return
        if inc.next_escalation_at is not None and now >= inc.next_escalation_at and inc.escalation_level < TOP_LEVEL:
            inc.escalation_level += 1
            level = inc.escalation_level
            if level == 1:
                if self.slack and self.policy.oncall_channel:
                    self._post(s, inc, f"channel:{self.policy.oncall_channel}", level=1)
                else:
                    log.warning(
                        "page %s: level 1 has nowhere to go ([paging] oncall_channel is not set)",
                        inc.id,
                        extra={"page_id": inc.id, "run_id": inc.run_id},
                    )
            elif self.pagerduty:
                self._pagerduty(s, inc, "trigger", "level-2")
                inc.pagerduty_open = True
            else:
                log.warning(
                    "page %s: level 2 has nowhere to go (PAGERDUTY_ROUTING_KEY is not set)",
                    inc.id,
                    extra={"page_id": inc.id, "run_id": inc.run_id},
                )
            after = timedelta(seconds=self.policy.escalate_after_s)
            inc.next_escalation_at = now + after if level < TOP_LEVEL else None
            inc.next_renotify_at = self._renotify_at(now)
            log.info("page %s escalated to level %d", inc.id, level, extra={"page_id": inc.id, "run_id": inc.run_id})
            return
        if inc.next_renotify_at is not None and now >= inc.next_renotify_at:
            inc.renotified += 1
            targets = self._level0_targets(run, inc) if inc.escalation_level == 0 else []
            if inc.escalation_level >= 1 and self.slack and self.policy.oncall_channel:
                targets.append(f"channel:{self.policy.oncall_channel}")
            for target in targets:
                self._post(s, inc, target, level=inc.escalation_level, renotify=inc.renotified)
            inc.next_renotify_at = self._renotify_at(now)

    def _renotify_at(self, now: datetime) -> datetime | None:
        every = self.policy.renotify_every_s
        return now + timedelta(seconds=every) if every > 0 else None

    def _level0_targets(self, run: Run | None, inc: Incident) -> list[str]:
        if not self.slack:
            return []
        targets: list[str] = []
        if run is not None and run.thread_ts:
            targets.append("thread")
        if inc.severity != PAGE:
            return targets  # a warning is a line in the thread, nothing more
        if run is not None and self.policy.dm_owner and SLACK_USER.match(run.owner):
            targets.append(f"dm:{run.owner}")
        if not targets and self.policy.oncall_channel:
            targets.append(f"channel:{self.policy.oncall_channel}")  # nobody else would see it
        return targets

    # -- the front doors -------------------------------------------------------------------------------------

    def pages(
        self, *, include_resolved: bool = False, run_id: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        with self.db.session() as s:
            q = select(Incident).order_by(Incident.triggered_at.desc()).limit(limit)
            if not include_resolved:
                q = q.where(Incident.state.in_(OPEN_INCIDENT_STATES))
            if run_id:
                q = q.where(Incident.run_id == run_id)
            return [incident_view(i) for i in s.scalars(q)]

    def get(self, page_id: str) -> dict[str, Any]:
        with self.db.session() as s:
            return incident_view(self._load(s, page_id))

    def open_pages_for(self, user: str, *, on_call: bool, limit: int) -> list[dict[str, Any]]:
        """The open pages of ``user``'s runs, newest first, and with ``on_call`` (an admin) the cluster's too (pages
        of no run); each its id, kind, run, state and summary."""
        with self.db.session() as s:
            theirs = or_(Run.owner == user, Incident.run_id.is_(None)) if on_call else Run.owner == user
            rows = s.scalars(
                select(Incident)
                .outerjoin(Run, Run.id == Incident.run_id)
                .where(Incident.state.in_(OPEN_INCIDENT_STATES), theirs)
                .order_by(Incident.triggered_at.desc())
                .limit(limit)
            )
            return [
                {"id": p.id, "kind": p.kind, "run_id": p.run_id, "state": p.state, "summary": p.summary} for p in rows
            ]

    def _load(self, s: Session, page_id: str) -> Incident:
        inc = s.get(Incident, page_id.strip())
        if inc is None:
            raise UnknownPage(f"unknown page {page_id!r}; list open pages with `labbot pages` or `/lab pages`")
        return inc

    def acknowledge(self, page_id: str, *, by: str) -> dict[str, Any]:
        """Stop the escalation of a page; PagerDuty is told when it was paged. Acknowledging twice is a no-op."""
        with self.db.session() as s:
            inc = self._load(s, page_id)
            if inc.state == IncidentState.RESOLVED.value:
                raise Conflict(f"page {inc.id} is already resolved (by {inc.resolved_by}); nothing to acknowledge")
            if inc.state == IncidentState.TRIGGERED.value:
                inc.state = IncidentState.ACKNOWLEDGED.value
                inc.acknowledged_at, inc.acknowledged_by = self.clock(), by
                inc.next_escalation_at = inc.next_renotify_at = None
                stamp = f"ack-{inc.reopened}"
                self._refresh(s, inc, stamp)
                if inc.pagerduty_open and self.pagerduty:
                    self._pagerduty(s, inc, "acknowledge", stamp)
                log.info("page %s acknowledged by %s", inc.id, by, extra={"page_id": inc.id, "run_id": inc.run_id})
            return incident_view(inc)

    def resolve(self, page_id: str, *, by: str, cause: str | None = None) -> dict[str, Any]:
        """Close a page by hand. Resolving twice is a no-op, except that ``cause`` (what was wrong, in words) is
        recorded whenever it is given: a page resolved by labbot gets its cause written down afterwards this way."""
        if cause is not None:
            cause = check_cause(cause)
        with self.db.session() as s:
            inc = self._load(s, page_id)
            if cause is not None:
                inc.cause, inc.cause_by, inc.cause_at = cause, by, self.clock()
            if inc.state != IncidentState.RESOLVED.value:
                run = s.get(Run, inc.run_id) if inc.run_id else None
                who = f"<@{by}>" if SLACK_USER.match(by) else by
                self._resolve(
                    s, run, inc, by, self.clock(), note=f":white_check_mark: page `{inc.id}` resolved by {who}."
                )
            return incident_view(inc)

    def link(self, page_id: str, system: str, link: Mapping[str, Any], *, note: str | None = None) -> dict[str, Any]:
        """Record where else the page lives (``system`` "linear": the issue filed for it) and show it on every posted
        copy of the page, with ``note`` in the run's thread."""
        with self.db.session() as s:
            inc = self._load(s, page_id)
            inc.links = {**(inc.links or {}), system: dict(link)}
            stamp = f"link-{system}-{inc.reopened}"
            if note:
                run = s.get(Run, inc.run_id) if inc.run_id else None
                self._note(s, run, inc, stamp, note)
            self._refresh(s, inc, stamp)
            log.info(
                "page %s linked to %s %s",
                inc.id,
                system,
                link.get("identifier") or link.get("id"),
                extra={"page_id": inc.id, "run_id": inc.run_id},
            )
            return incident_view(inc)

    def _resolve(self, s: Session, run: Run | None, inc: Incident, by: str, now: datetime, *, note: str) -> None:
        inc.state = IncidentState.RESOLVED.value
        inc.resolved_at, inc.resolved_by = now, by
        inc.next_escalation_at = inc.next_renotify_at = None
        stamp = f"resolve-{inc.reopened}"
        self._note(s, run, inc, stamp, note)
        self._refresh(s, inc, stamp)
        if inc.pagerduty_open and self.pagerduty:
            self._pagerduty(s, inc, "resolve", stamp)
        inc.pagerduty_open = False
        log.info("page %s resolved by %s", inc.id, by, extra={"page_id": inc.id, "run_id": inc.run_id})

    # -- thread notes for the watchdog (restarts) ------------------------------------------------------------

    def tell_thread(self, s: Session, run: Run, key: str, text: str) -> None:
        """A line in the run's thread, through the outbox (e.g. "restarting from checkpoint step 40 in 10s")."""
        if self.slack and run.thread_ts:
            self._enqueue(
                s, f"{run.id}:{key}", None, run.id, "slack", "post", "thread", {"template": "note", "text": text}
            )

    # -- the outbox ------------------------------------------------------------------------------------------

    def _stamp(self, inc: Incident) -> str:
        return f"{inc.id}:{inc.occurrence}"

    def _post(self, s: Session, inc: Incident, target: str, *, level: int, renotify: int = 0) -> None:
        if not self.slack:
            return
        step = f"R{renotify}" if renotify else f"L{level}"
        payload = {"template": "page", "level": level, "renotify": renotify}
        self._enqueue(s, f"{self._stamp(inc)}:{step}:{target}", inc.id, inc.run_id, "slack", "post", target, payload)

    def _note(self, s: Session, run: Run | None, inc: Incident, stamp: str, text: str) -> None:
        if not self.slack:
            return
        if run is not None and run.thread_ts:
            target = "thread"
        elif self.policy.oncall_channel:
            target = f"channel:{self.policy.oncall_channel}"
        else:
            return
        key = f"{self._stamp(inc)}:{stamp}:note"
        self._enqueue(s, key, inc.id, inc.run_id, "slack", "post", target, {"template": "note", "text": text})

    def _refresh(self, s: Session, inc: Incident, stamp: str) -> None:
        """Re-render every page message of this incident already posted (who acknowledged, resolved)."""
        if self.slack:
            self._enqueue(s, f"{self._stamp(inc)}:{stamp}:refresh", inc.id, inc.run_id, "slack", "refresh", "pages", {})

    def _pagerduty(self, s: Session, inc: Incident, action: str, stamp: str) -> None:
        run = s.get(Run, inc.run_id) if inc.run_id else None
        where = f"run {run.id} ({run.name}, owner {run.owner})" if run is not None else "the Ray cluster"
        details: dict[str, Any] = {
            "page": inc.id,
            "run_id": inc.run_id,
            "kind": inc.kind,
            "scope": "cluster" if inc.kind == INFRA else "run",
            **({"job": run.job, "owner": run.owner, "attempt": run.attempt} if run is not None else {}),
            **(inc.detail or {}),
        }
        payload = {
            "summary": f"[labbot] {inc.kind}: {where} — {inc.summary}",
            "severity": "critical" if inc.severity == PAGE else "warning",
            "custom_details": details,
        }
        self._enqueue(
            s, f"{self._stamp(inc)}:{stamp}:pd-{action}", inc.id, inc.run_id, "pagerduty", action, inc.key, payload
        )

    def _enqueue(
        self,
        s: Session,
        key: str,
        incident_id: str | None,
        run_id: str | None,
        channel: str,
        action: str,
        target: str,
        payload: dict[str, Any],
    ) -> None:
        row = {
            "key": key,
            "incident_id": incident_id,
            "run_id": run_id,
            "channel": channel,
            "action": action,
            "target": target,
            "payload": payload,
            "state": "pending",
            "attempts": 0,
            "next_attempt_at": self.clock(),
            "result": {},
            "created_at": self.clock(),
        }
        s.execute(self.db.insert_ignoring_duplicates(Delivery), [row])  # the same step queued twice: once
