"""Acting once: Slack retries events it thinks we missed (``X-Slack-Retry-Num``) and people double-click buttons.

``SeenKeys`` remembers keys for a while (event ids; user+button+run for clicks) and says whether one is new.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable


class SeenKeys:
    def __init__(self, ttl_s: float, *, max_keys: int = 100_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_keys = max_keys
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, key: str) -> bool:
        """True the first time ``key`` is seen within ``ttl_s``; False for a repeat."""
        now = self._clock()
        with self._lock:
            while self._seen and (
                next(iter(self._seen.values())) < now - self.ttl_s or len(self._seen) > self.max_keys
            ):
                self._seen.popitem(last=False)
            if key in self._seen:
                return False
            self._seen[key] = now
            return True
