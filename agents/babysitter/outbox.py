"""The delivery outbox: notifications are rows first (``deliveries``), sent after, retried until accepted.

The pager and the watchdog queue ``Delivery`` rows in the same transaction as the incident they are about. The
:class:`Outbox` sends what is due, oldest first, through a :class:`Notifier` per channel (``slack``: implemented by
bot/, which agents/ never imports; ``pagerduty``: ``labbot.agents.babysitter.pagerduty``). A notifier answers accepted,
retry (Slack or PagerDuty down, rate limited: backoff, honouring ``Retry-After``) or rejected (a 400, a channel that
does not exist: logged, never retried). Order holds within a conversation: a delivery waits while an older one for the
same page or run has not gone out. Drains may overlap (the watchdog's, the outbox's own, a button's; on replicas,
each one's): a delivery is claimed by a conditional update from ``pending`` to ``sending``, so one of them sends it.

A delivery is sent only under the leader lease that claimed it (``labbot.storage.lease``). The claim records the
lease's fencing token (``claim_token``); right before the send the lease is checked again (``aguard``: the database,
then this replica's deadline and that token, with no I/O between that and the send), and a notifier that calls out
before its write (the Slack DM's ``conversations.open``, the look for an earlier copy) checks again right before the
write. Refused (``Fenced``): nothing is sent, the claim goes back to the queue unless the new leader has it already,
and the rest of the batch stops. An outcome is recorded only under the claiming token: a send that finishes after
the lease was lost is not recorded by the replica that lost it. Rows found ``sending`` by a new leader (or at
start-up) were cut off mid-send by a crash or a lost lease: they are retried with ``attempts`` > 1, which tells the
Slack notifier to look for the message before posting it again, so a page is neither lost nor shown twice.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from anyio import to_thread
from sqlalchemy import select, update

from labbot.agents.babysitter.pager import incident_view
from labbot.agents.babysitter.pagerduty import PagerDutyClient
from labbot.common.durations import format_duration
from labbot.common.errors import DatabaseUnavailable
from labbot.common.retry import Backoff
from labbot.storage.db import Database, fenced
from labbot.storage.lease import Fenced, aguard, claim_token
from labbot.storage.models import Delivery, DeliveryState, Incident, Run, utcnow
from labbot.training.run_json import run_view

log = logging.getLogger(__name__)

Status = Literal["accepted", "retry", "rejected"]

MAX_RETRY_AFTER_S = 3600.0  # a receiver's Retry-After longer than an hour is read as an hour


@dataclass(frozen=True)
class Outcome:
    status: Status
    message: str = ""
    retry_after_s: float | None = None
    result: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Envelope:
    """One delivery as a notifier sees it: detached from the database, with what it needs to render."""

    id: int
    key: str
    channel: str
    action: str
    target: str
    payload: Mapping[str, Any]
    attempts: int  # this one included: > 1 means an earlier try may have reached the receiver
    created_at: datetime
    incident: dict[str, Any] | None
    run: dict[str, Any] | None
    posts: list[dict[str, Any]]  # results of this incident's page messages already posted (for refreshes)
    claim_token: int | None = None  # the lease's fencing token it was claimed under: sent only under it

    @property
    def what(self) -> str:
        """How a refusal names it."""
        return f"delivery {self.id} ({self.key}) to {self.channel}"


class Notifier(Protocol):
    """One channel's sender. Whatever I/O it makes before its write (a lookup, opening a DM), it awaits
    ``labbot.storage.lease.aguard(..., token=envelope.claim_token)`` right before each write, and lets ``Fenced``
    through: the outbox puts the claim back and stops its batch."""

    async def deliver(self, envelope: Envelope) -> Outcome: ...


class Outbox:
    def __init__(
        self,
        db: Database,
        notifiers: Mapping[str, Notifier],
        *,
        clock: Callable[[], datetime] = utcnow,
        batch: int = 50,
        max_backoff_s: float = 60.0,
        rng: random.Random | None = None,
    ) -> None:
        self.db = db
        self.notifiers = dict(notifiers)
        self.clock = clock
        self.batch = batch
        self.max_backoff_s = max_backoff_s
        # The shared policy (labbot.common.retry): 1 s doubling up to max_backoff_s, with equal jitter, or the
        # receiver's Retry-After (an hour at most). Waited by leaving the row pending until next_attempt_at.
        self.backoff = Backoff(base=min(1.0, max_backoff_s), cap=max_backoff_s, max_retry_after=MAX_RETRY_AFTER_S)
        self.rng = rng
        self._unconfigured_said: set[str] = set()

    def recover(self) -> int:
        """On taking the lease (and at start-up): deliveries cut off mid-send, by a crash or by the lease moving on,
        go back to the queue (checked before re-sending)."""
        with self.db.session() as s:
            result: Any = s.execute(
                update(Delivery)
                .where(Delivery.state == DeliveryState.SENDING.value)
                .values(state=DeliveryState.PENDING.value, next_attempt_at=self.clock(), claim_token=None)
            )
            n = result.rowcount
        if n:
            log.warning("%d notification(s) were being sent when labbot stopped: sending them again", n)
        return int(n or 0)

    async def drain(self) -> int:
        """Send what is due; returns how many deliveries the receivers accepted. ``Fenced`` (the lease lost, checked
        before every send) stops the batch and is raised."""
        due = await to_thread.run_sync(self._due)
        accepted = 0
        blocked: set[str] = set()
        for env, scope, is_due in due:
            if scope in blocked:
                continue
            if not is_due:
                blocked.add(scope)  # an older one waits for its retry: keep the order
                continue
            notifier = self.notifiers.get(env.channel)
            if notifier is None:
                if env.channel not in self._unconfigured_said:
                    log.warning("notifications for %s are queued but %s is not configured", env.channel, env.channel)
                    self._unconfigured_said.add(env.channel)
                blocked.add(scope)
                continue
            claimed = await to_thread.run_sync(self._claim, env)
            if claimed is None:  # another drain (this process's or another replica's) took it first
                blocked.add(scope)
                continue
            env = claimed
            try:
                await aguard(env.what, token=env.claim_token)  # as late as the outbox can: the notifier checks too
                outcome = await notifier.deliver(env)
            except (Fenced, DatabaseUnavailable):  # refused before the write, or the lease could not be confirmed
                await to_thread.run_sync(self._unclaim, env)
                raise
            except Exception as e:  # a notifier bug must not lose the page: retried later, and logged
                log.exception(
                    "delivery %s (%s) failed inside labbot",
                    env.id,
                    env.key,
                    extra={
                        "page_id": env.incident["id"] if env.incident else None,
                        "run_id": env.run["id"] if env.run else None,
                    },
                )
                outcome = Outcome("retry", f"{type(e).__name__} inside labbot")
            await to_thread.run_sync(self._record, env, outcome)
            if outcome.status == "accepted":
                accepted += 1
            else:
                blocked.add(scope)
        return accepted

    def _due(self) -> list[tuple[Envelope, str, bool]]:
        now = self.clock()
        with self.db.session() as s:
            rows = list(
                s.scalars(
                    select(Delivery)
                    .where(Delivery.state == DeliveryState.PENDING.value)
                    .order_by(Delivery.id)
                    .limit(self.batch * 4)
                )
            )
            out: list[tuple[Envelope, str, bool]] = []
            for d in rows[: self.batch * 4]:
                scope = f"{d.channel}:{d.incident_id or d.run_id or d.target}"
                out.append((self._envelope(s, d), scope, d.next_attempt_at <= now))
            return out

    def _envelope(self, s: Any, d: Delivery) -> Envelope:
        inc = s.get(Incident, d.incident_id) if d.incident_id else None
        run = s.get(Run, d.run_id) if d.run_id else None
        posts: list[dict[str, Any]] = []
        if d.action == "refresh" and d.incident_id:
            q = select(Delivery).where(
                Delivery.incident_id == d.incident_id,
                Delivery.action == "post",
                Delivery.state == DeliveryState.SENT.value,
            )
            posts = [
                {**p.result, "payload": p.payload, "target": p.target}
                for p in s.scalars(q.order_by(Delivery.id))
                if p.payload.get("template") == "page" and p.result.get("ts")
            ]
        return Envelope(
            id=d.id,
            key=d.key,
            channel=d.channel,
            action=d.action,
            target=d.target,
            payload=dict(d.payload or {}),
            attempts=d.attempts,
            created_at=d.created_at,
            incident=incident_view(inc) if inc is not None else None,
            run=run_view(run) if run is not None else None,
            posts=posts,
            claim_token=d.claim_token,
        )

    def _claim(self, env: Envelope) -> Envelope | None:
        """Mark the delivery ``sending`` if it is still ``pending``, in one conditional update: of two drains that read
        it as due (the watchdog's, the outbox's, a button's, another replica's), one sends it and the other skips it.
        The claim records the lease's token (the fenced session checked it first). None when it was taken."""
        token = claim_token()
        with self.db.session() as s:
            result: Any = s.execute(
                update(Delivery)
                .where(Delivery.id == env.id, Delivery.state == DeliveryState.PENDING.value)
                .values(state=DeliveryState.SENDING.value, attempts=Delivery.attempts + 1, claim_token=token)
            )
            if result.rowcount != 1:
                return None
            return self._envelope(s, s.get_one(Delivery, env.id))  # a refresh sees the posts sent earlier

    def _unclaim(self, env: Envelope) -> None:
        """A claim whose send was refused before its write goes back to the queue, if it is still this claim (the
        row ``sending`` under its token): a lease that lapsed and was renewed under the same token would not recover
        it. Outside the fence, which refuses everything now; a new leader that recovered the row, or claimed it
        since, has it, and is left alone. Its ``attempts`` stay counted: the next try looks for an earlier copy."""
        try:
            with fenced(None), self.db.session() as s:
                s.execute(
                    update(Delivery)
                    .where(
                        Delivery.id == env.id,
                        Delivery.state == DeliveryState.SENDING.value,
                        Delivery.claim_token == env.claim_token,
                    )
                    .values(state=DeliveryState.PENDING.value, next_attempt_at=self.clock(), claim_token=None)
                )
        except DatabaseUnavailable:
            log.warning("delivery %s stays claimed (the database did not answer): the next leader recovers it", env.id)

    def _record(self, env: Envelope, outcome: Outcome) -> None:
        """The outcome, under the fence and only under the token that claimed it: the lease at another token now
        (lost, or lost and taken back), or the row no longer ``sending`` under that token (recovered by a new
        leader, claimed again since), and it is not this send's to record: ``Fenced``, and the batch stops. The
        delivery's next send (``attempts`` > 1) looks for this one's copy first."""
        now = self.clock()
        with self.db.session() as s:
            d = s.get_one(Delivery, env.id)
            token = claim_token()
            if token != env.claim_token or d.state != DeliveryState.SENDING.value or d.claim_token != env.claim_token:
                raise Fenced(
                    f"{env.what} finished ({outcome.status}) under lease token {env.claim_token}, which claimed it; "
                    f"the lease is at {token} now and the row {d.state} under {d.claim_token}: not recorded"
                )
            if outcome.status == "accepted":
                d.state = DeliveryState.SENT.value
                d.sent_at = now
                d.result = dict(outcome.result)
                d.last_error = None
                return
            d.last_error = outcome.message[:1000]
            if outcome.status == "rejected":
                d.state = DeliveryState.DEAD.value
                log.error(
                    "notification %s to %s %s was refused: %s",
                    d.key,
                    d.channel,
                    d.target,
                    outcome.message,
                    extra={"page_id": d.incident_id, "run_id": d.run_id},
                )
                return
            d.state = DeliveryState.PENDING.value
            wait = self.backoff.delay(d.attempts, outcome.retry_after_s, rng=self.rng)
            d.next_attempt_at = now + timedelta(seconds=max(wait, 0.1))
            log.warning(
                "notification %s to %s failed (try %d), again in %s: %s",
                d.key,
                d.channel,
                d.attempts,
                format_duration(wait),
                outcome.message,
                extra={"page_id": d.incident_id, "run_id": d.run_id},
            )

    def pending(self) -> int:
        with self.db.session() as s:
            return len(list(s.scalars(select(Delivery.id).where(Delivery.state != DeliveryState.SENT.value))))


class PagerDutyNotifier:
    """The ``pagerduty`` channel of the outbox: each delivery is one Events API v2 event, ``dedup_key`` = the
    incident key, so a retried trigger joins the alert it already opened instead of opening another."""

    def __init__(self, client: PagerDutyClient) -> None:
        self.client = client

    async def deliver(self, envelope: Envelope) -> Outcome:
        p = envelope.payload
        await aguard(f"PagerDuty's {envelope.action} of {envelope.what}", token=envelope.claim_token)
        try:
            if envelope.action == "trigger":
                sent = await self.client.send(
                    "trigger",
                    envelope.target,
                    summary=str(p.get("summary", "")),
                    severity=str(p.get("severity", "critical")),
                    custom_details=p.get("custom_details") or {},
                )
            else:
                sent = await self.client.send(envelope.action, envelope.target)
        except ValueError as e:  # an event PagerDuty would answer 400: it will never be valid, so never retried
            return Outcome("rejected", f"PagerDuty {envelope.action} {envelope.target!r}: invalid event: {e}")
        status: Status = sent.outcome
        return Outcome(status, sent.message, sent.retry_after_s, {"status": sent.status} if sent.accepted else {})
