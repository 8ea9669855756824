"""Acting once across restarts and replicas: a key is new the first time a row for it goes into ``seen_keys``.

The in-process ``SeenKeys`` (``labbot.bot.slack.dedup``) is enough for Slack's event retries and double clicks (both
arrive within seconds at the process that answered); a replayed signed request can arrive after labbot restarted, or
at another replica behind the same URL, so what it is checked against lives in the database. The insert decides
(``ON CONFLICT DO NOTHING``): two replicas racing on one key cannot both see it first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, update

from labbot.storage.db import Database
from labbot.storage.models import SeenKey


class DurableSeenKeys:
    """Keys remembered for ``ttl_s`` in the database; rows older than that are pruned now and then."""

    def __init__(
        self,
        db: Database,
        ttl_s: float,
        *,
        prune_every_s: float = 60.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.db = db
        self.ttl = timedelta(seconds=ttl_s)
        self.prune_every_s = prune_every_s
        self._clock = clock
        self._last_prune = float("-inf")
        self._lock = threading.Lock()

    def first_time(self, key: str) -> bool:
        """True the first time ``key`` is seen (by any process on this database) within ``ttl_s``."""
        if len(key) > 200:
            raise ValueError(f"a seen key is at most 200 characters, got {len(key)}")
        now = self._clock()
        self._maybe_prune(now)
        with self.db.session() as s:
            inserted = s.execute(self.db.insert_ignoring_duplicates(SeenKey).values(key=key, seen_at=now))
            if inserted.rowcount == 1:  # type: ignore[attr-defined]
                return True
            # remembered past its time: new again, for exactly one caller (the update is the test)
            renewed = s.execute(
                update(SeenKey).where(SeenKey.key == key, SeenKey.seen_at < now - self.ttl).values(seen_at=now)
            )
            return bool(renewed.rowcount == 1)  # type: ignore[attr-defined]

    def _maybe_prune(self, now: datetime) -> None:
        with self._lock:
            if time.monotonic() - self._last_prune < self.prune_every_s:
                return
            self._last_prune = time.monotonic()
        with self.db.session() as s:
            s.execute(delete(SeenKey).where(SeenKey.seen_at < now - self.ttl))
