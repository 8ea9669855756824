"""The leader lease: of the replicas on one database, one at a time holds it and runs the singletons.

One row of ``leader_lease`` per lease. :meth:`Lease.step`, called every second or so by every replica, renews the
lease its holder has, or takes it when it is free or has expired. Each change of holder raises ``token`` (the fencing
token) by one. On PostgreSQL every time is the server's clock (``now()``): replicas' clocks need not agree.

Four things keep two replicas from acting as leader at once:

* **A local deadline.** The holder counts itself leader until ``lease - margin`` seconds after it *sent* its last
  successful renewal (its monotonic clock), which is before the database's expiry: a replica that cannot renew (the
  database away, a GC pause, ``SIGSTOP``) stops its singletons before anyone else may take them.
* **The fence.** Every transaction the singletons open runs :meth:`Lease.check` first (``labbot.storage.db.fenced``):
  the local deadline still ahead, and the row's token still this replica's, read ``FOR KEY SHARE``. A takeover locks
  the row ``FOR UPDATE``, which waits for those transactions: a write checked under the old token commits before the
  new leader starts, or is refused (:class:`Fenced`) after.
* **Side effects outside the database, fenced as late as possible.** A Slack post, a PagerDuty event, a Ray
  submission or stop cannot be rolled back once sent, and a leader can be paused (``SIGSTOP``, a GC pause) between
  deciding one and making it. So right before each, the code making it calls :func:`guard` (:func:`aguard` in async
  code): inside a singleton's fence, the database's check (:meth:`Lease.confirm`: :meth:`Lease.check` in a
  transaction of its own), then the local one with no I/O (:meth:`Lease.ensure`: the deadline still ahead and, for
  work claimed under a token, that token still this replica's), then the write. Refused: :class:`Fenced`, and the
  work stops. Work claimed in the database (an outbox delivery) records the token it was claimed under
  (:func:`claim_token`); its outcome is recorded only under that token. What is left is the moment between the
  local check and the bytes leaving (a few instructions, no I/O): a pause exactly there still sends when it
  resumes. Only a receiver that checked fencing tokens could refuse that; Ray's submission ids and PagerDuty's
  ``dedup_key`` make a repeat harmless there, a Slack post would show twice.
* **No lock held forever.** Every transaction that locks the lease row (a fenced one, a renewal, a takeover) sets
  ``idle_in_transaction_session_timeout``: a leader stopped mid-transaction (``SIGSTOP``) has its connection closed
  by PostgreSQL after that long, and its row lock with it, so the takeover, which waits at most ``lock_timeout`` per
  try, gets through. A renewal is a plain ``UPDATE`` of the
  holder's own row (``FOR NO KEY UPDATE``): it does not wait for the holder's own fenced transactions.

SQLite serves one replica: :meth:`Lease.claim_sole` takes the lease at start-up or refuses, naming the process that
holds it, when another live ``labbot serve`` does (:class:`SecondReplica`). A holder on this host whose process is
gone (killed) is taken over at once there, without waiting for the expiry.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from anyio import to_thread
from sqlalchemy import func, select, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from labbot.common.errors import DatabaseUnavailable, LabbotError
from labbot.common.processes import pid_alive
from labbot.storage.db import Database, current_fence, fenced
from labbot.storage.models import LeaderLease

__all__ = ["SINGLETONS", "Fenced", "Lease", "LeaseView", "SecondReplica", "aguard", "claim_token", "guard", "holder_id"]

log = logging.getLogger(__name__)

SINGLETONS = "singletons"
EXPIRED = datetime(1970, 1, 1, tzinfo=UTC)  # what a released lease expires at


class Fenced(LabbotError):
    """A singleton's write refused: this replica no longer holds the lease (it expired, or another took it)."""

    status = 409
    code = "not_leader"


class SecondReplica(LabbotError):
    """Another live ``labbot serve`` holds the lease of this SQLite database."""

    status = 409
    code = "second_replica"


def holder_id(replica: str | None = None) -> str:
    """``NAME:PID:INCARNATION``: the replica's name (``LABBOT_REPLICA``, a pod's name; else the host's), this
    process, and a random part that tells this process from an earlier one with the same pid (pid 1 in a container)."""
    name = (replica or socket.gethostname() or "labbot").replace(":", "-")[:120]
    return f"{name}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _parts(holder: str) -> tuple[str, int | None, str]:
    name, _, rest = holder.rpartition(":")
    name, _, pid = name.rpartition(":")
    try:
        return name, int(pid), rest
    except ValueError:
        return holder, None, ""


@dataclass(frozen=True)
class LeaseView:
    """The lease as the last :meth:`Lease.step` saw it."""

    leader: bool
    holder: str | None  # who holds it (this replica or another), None when nobody ever did
    token: int | None
    expires_at: datetime | None


class Lease:
    """One replica's side of the lease named ``name`` on ``db``."""

    def __init__(
        self,
        db: Database,
        *,
        holder: str | None = None,
        ttl_s: float = 6.0,
        name: str = SINGLETONS,
        lock_timeout_s: float = 1.0,
        idle_timeout_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s <= 0:
            raise ValueError("a lease lasts more than 0 seconds")
        self.db = db
        self.holder = holder or holder_id()
        self.ttl_s = ttl_s
        self.margin_s = min(1.0, ttl_s / 4)  # the local deadline comes this much before the database's expiry
        self.name = name
        self.lock_timeout_s = lock_timeout_s
        # a stopped leader's transaction is closed by PostgreSQL after this: a takeover waits no longer
        self.idle_timeout_s = idle_timeout_s if idle_timeout_s is not None else max(2 * ttl_s, 10.0)
        self.clock = clock
        self._token: int | None = None
        self._deadline = float("-inf")
        self._lock = threading.Lock()
        self._failing = False  # said once per outage, not every step
        self.last = LeaseView(False, None, None, None)

    # -- this replica's view ------------------------------------------------------------------------------------

    @property
    def token(self) -> int | None:
        """The fencing token while this replica holds the lease."""
        return self._token if self.held() else None

    def held(self) -> bool:
        """Whether this replica may act as leader now: it holds the lease and its local deadline is ahead."""
        return self._token is not None and self.clock() < self._deadline

    def seconds_left(self) -> float:
        return max(0.0, self._deadline - self.clock()) if self._token is not None else 0.0

    # -- the fence ----------------------------------------------------------------------------------------------

    def check(self, session: Session, *, what: str = "the write") -> None:
        """First statement of every transaction the singletons open (``fenced(lease)``): refuse unless this replica
        holds the lease now, by its deadline and by the row's token (read ``FOR KEY SHARE``: a takeover waits for
        this transaction to end)."""
        if session.get_bind() is not self.db.engine:
            return  # another database's session: not this lease's to fence
        token = self._token
        if token is None or self.clock() >= self._deadline:
            raise Fenced(f"this replica ({self.holder}) does not hold the {self.name} lease now: {what} is refused")
        self._guard(session)
        row = session.execute(
            select(LeaderLease.token, LeaderLease.holder)
            .where(LeaderLease.name == self.name)
            .with_for_update(read=True, key_share=True)
        ).one_or_none()
        if row is None or row.token != token or row.holder != self.holder:
            self._lose(row.holder if row is not None else None)
            raise Fenced(
                f"this replica ({self.holder}) lost the {self.name} lease (token {token}) to "
                f"{row.holder if row is not None else 'nobody'}: {what} is refused"
            )

    # -- side effects outside the database ----------------------------------------------------------------------

    def confirm(self, what: str) -> None:
        """The database's word before a side effect outside it (``what``: a Slack post, a PagerDuty event, a Ray
        submission): :meth:`check` in a transaction of its own, committed at once, so it holds the row no longer
        than the check. Blocking: on a worker thread."""
        with fenced(None), self.db.session() as s:  # fenced(None): checked once, here, with what is refused
            self.check(s, what=what)

    def ensure(self, what: str, *, token: int | None = None) -> None:
        """The local word, no I/O: the last thing before the side effect ``what``. This replica's deadline is still
        ahead (so no other replica may have taken the lease: the database's expiry comes ``margin`` later) and, for
        work claimed under ``token`` (an outbox delivery), that token is still the one this replica holds."""
        held = self._token
        if held is None or self.clock() >= self._deadline:
            raise Fenced(f"this replica ({self.holder}) does not hold the {self.name} lease now: {what} is refused")
        if token is not None and token != held:
            raise Fenced(
                f"{what} was claimed under the {self.name} lease's token {token}; this replica ({self.holder}) holds "
                f"token {held} now: it is refused (the claim is the new leadership's to recover)"
            )

    # -- one round ----------------------------------------------------------------------------------------------

    def step(self) -> bool:
        """Renew the lease if this replica holds it; else take it if it is free or expired. Returns whether this
        replica leads. The database away: this replica stays leader until its local deadline, then follows."""
        with self._lock:
            sent = self.clock()
            try:
                if self._token is not None and self._renew():
                    self._deadline = sent + self.ttl_s - self.margin_s
                    return True
                if self._token is not None:
                    self._lose(None)
                token = self._take()
            except (DatabaseUnavailable, DBAPIError) as e:
                self._failed(e)
                if self._token is not None and not self.held():
                    self._lose(None)
                return self.held()
            if self._failing:
                log.info("the %s lease: the database answers again", self.name)
                self._failing = False
            if token is None:
                return False
            self._token, self._deadline = token, sent + self.ttl_s - self.margin_s
            return True

    def claim_sole(self, *, database: str) -> int:
        """SQLite's start-up: take the lease or refuse. Taken when free, expired, this host's holder is a process
        that no longer runs, or the holder is an earlier process with this pid; refused (:class:`SecondReplica`)
        while another live ``labbot serve`` holds it."""
        with self._lock:
            sent = self.clock()
            token = self._take(sole=True, database=database)
            assert token is not None
            self._token, self._deadline = token, sent + self.ttl_s - self.margin_s
            return token

    def release(self) -> None:
        """On a clean stop: the lease expires now, so a follower takes over at its next step, not after the TTL."""
        with self._lock:
            token, self._token, self._deadline = self._token, None, float("-inf")
            if token is None:
                return
            try:
                with self.db.session() as s:
                    self._guard(s)
                    s.execute(
                        update(LeaderLease)
                        .where(
                            LeaderLease.name == self.name,
                            LeaderLease.holder == self.holder,
                            LeaderLease.token == token,
                        )
                        .values(expires_at=EXPIRED)
                    )
            except (DatabaseUnavailable, DBAPIError):
                log.warning("the %s lease could not be released: it expires on its own", self.name)

    # -- the statements -----------------------------------------------------------------------------------------

    def _now(self, s: Session) -> datetime:
        if self.db.dialect == "postgresql":
            value: datetime = s.execute(select(func.now())).scalar_one()
            return value.astimezone(UTC)
        return datetime.now(UTC)

    def _guard(self, s: Session) -> None:
        """PostgreSQL closes this transaction if its client stops mid-way (``SIGSTOP``) for ``idle_timeout_s``: every
        transaction that locks the lease row (the fence's share lock, a renewal's or a takeover's update lock) would
        otherwise hold the takeover up for as long as the pause lasts."""
        if self.db.dialect == "postgresql":
            ms = int(self.idle_timeout_s * 1000)
            s.execute(text(f"SET LOCAL idle_in_transaction_session_timeout = {ms}"))

    def _renew(self) -> bool:
        with self.db.session() as s:
            self._guard(s)
            now = self._now(s)
            result: Any = s.execute(
                update(LeaderLease)
                .where(
                    LeaderLease.name == self.name,
                    LeaderLease.holder == self.holder,
                    LeaderLease.token == self._token,
                )
                .values(renewed_at=now, expires_at=now + timedelta(seconds=self.ttl_s))
            )
            renewed = result.rowcount == 1
            self.last = LeaseView(renewed, self.holder if renewed else None, self._token, now)
            return renewed

    def _take(self, *, sole: bool = False, database: str = "") -> int | None:
        with self.db.session() as s:
            self._guard(s)
            if self.db.dialect == "postgresql":
                s.execute(text(f"SET LOCAL lock_timeout = {int(self.lock_timeout_s * 1000)}"))
            now = self._now(s)
            expires = now + timedelta(seconds=self.ttl_s)
            row = s.execute(
                select(LeaderLease).where(LeaderLease.name == self.name).with_for_update()
            ).scalar_one_or_none()
            if row is None:
                inserted: Any = s.execute(
                    self.db.insert_ignoring_duplicates(LeaderLease).values(
                        name=self.name, holder=self.holder, token=1, acquired_at=now, renewed_at=now, expires_at=expires
                    )
                )
                if inserted.rowcount != 1:  # another replica inserted it first: it leads
                    self.last = LeaseView(False, None, None, None)
                    return None
                self.last = LeaseView(True, self.holder, 1, expires)
                log.info("leading: took the %s lease (token 1)", self.name)
                return 1
            if not self._may_take(row, now, sole=sole, database=database):
                self.last = LeaseView(False, row.holder, row.token, row.expires_at)
                return None
            previous, row.token = row.holder, row.token + 1
            row.holder, row.acquired_at, row.renewed_at, row.expires_at = self.holder, now, now, expires
            self.last = LeaseView(True, self.holder, row.token, expires)
            if previous != self.holder:
                log.info("leading: took the %s lease (token %d) from %s", self.name, row.token, previous)
            return int(row.token)

    def _may_take(self, row: LeaderLease, now: datetime, *, sole: bool, database: str) -> bool:
        if row.holder == self.holder or row.expires_at <= now:
            return True
        if not sole:
            return False
        name, pid, incarnation = _parts(row.holder)
        mine, my_pid, my_incarnation = _parts(self.holder)
        if name == mine and pid is not None:
            if pid == my_pid and incarnation != my_incarnation:
                return True  # an earlier process with this pid (a restarted container's pid 1)
            if not pid_alive(pid):
                return True  # killed on this host: nobody holds it
        left = (row.expires_at - now).total_seconds()
        raise SecondReplica(
            f"another labbot serve ({row.holder}: replica:pid:incarnation) uses the SQLite database {database} and "
            f"holds its lease (renewed {max(0.0, self.ttl_s - left):.0f}s ago). SQLite serves one replica: stop that "
            "one, or run several replicas on PostgreSQL (LABBOT_DATABASE_URL=postgresql://USER@HOST/DATABASE)"
        )

    def _failed(self, e: DatabaseUnavailable | DBAPIError) -> None:
        orig = e.orig if isinstance(e, DBAPIError) else getattr(e.__cause__, "orig", None)
        if type(orig).__name__ == "LockNotAvailable":
            # the holder's transaction has the row (it may be stopped: PostgreSQL closes it after idle_timeout_s)
            log.info("the %s lease row is locked by its holder's open transaction: trying again", self.name)
            return
        if not self._failing:
            log.warning(
                "the %s lease could not be renewed or taken (the database: %s); a leader stops its singletons "
                "in %.1fs unless it answers",
                self.name,
                type(orig).__name__,
                self.seconds_left(),
            )
        self._failing = True

    def _lose(self, to: str | None) -> None:
        if self._token is not None:
            log.warning(
                "following: the %s lease (token %d) is no longer this replica's%s",
                self.name,
                self._token,
                f"; {to} holds it" if to else "",
            )
        self._token, self._deadline = None, float("-inf")


# -- the rule for side effects outside the database ---------------------------------------------------------------


def guard(what: str, *, token: int | None = None) -> None:
    """Call right before a side effect outside the database (blocking code: a Ray submission on a worker thread).
    Inside a singleton's fence (``fenced(lease)``) it raises :class:`Fenced` unless this replica holds the lease by
    the database (:meth:`Lease.confirm`), then by its own deadline and, for work claimed under ``token``, that token
    (:meth:`Lease.ensure`, no I/O: nothing but the caller's write comes after it). Outside a fence (an API request, an
    agent's turn: work any replica does) it does nothing."""
    fence = current_fence()
    if fence is not None:
        fence.confirm(what)
        fence.ensure(what, token=token)


async def aguard(what: str, *, token: int | None = None) -> None:
    """:func:`guard` for async code (a Slack post, a PagerDuty event): the database's check on a worker thread, then
    the local one on the event loop, right before the caller's ``await`` of its write."""
    fence = current_fence()
    if fence is not None:
        await to_thread.run_sync(fence.confirm, what)
        fence.ensure(what, token=token)


def claim_token() -> int | None:
    """The fencing token work claimed now is claimed under (recorded with the claim, passed to :func:`guard` before
    the work's side effect): the fence's, None outside one."""
    fence = current_fence()
    return fence.token if fence is not None else None
