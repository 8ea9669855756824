"""``/readyz``: whether this process can serve, for a load balancer.

Ready means the database answers ``SELECT 1`` and Ray's Jobs API answers (its version: the cheapest call), each
within ``timeout`` seconds, both checked at once on worker threads. The answer names this process's role (``leader``
or ``follower``) either way. What failed is said by kind only — ``unreachable (OperationalError)``, ``no answer
within 2 s`` — never an exception's text, which may carry a URL with its password.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from anyio import to_thread

__all__ = ["READY_TIMEOUT_S", "readiness"]

READY_TIMEOUT_S = 2.0


async def _check(fn: Callable[[], Any], timeout: float) -> str:
    try:
        with anyio.fail_after(timeout):
            await to_thread.run_sync(fn, abandon_on_cancel=True)  # a hung driver is left behind, not waited for
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except Exception as e:
        return f"unreachable ({type(e).__name__})"
    return "ok"


async def readiness(
    database: Callable[[], Any],
    ray: Callable[[], Any],
    *,
    role: str,
    timeout: float = READY_TIMEOUT_S,
) -> tuple[bool, dict[str, Any]]:
    """``(ready, body)``: ``body`` is ``{"ok", "database", "ray", "role"}``, each check ``"ok"`` or what failed."""
    results: dict[str, str] = {}

    async def run(name: str, fn: Callable[[], Any]) -> None:
        results[name] = await _check(fn, timeout)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "database", database)
        tg.start_soon(run, "ray", ray)
    ok = results["database"] == "ok" and results["ray"] == "ok"
    return ok, {"ok": ok, "database": results["database"], "ray": results["ray"], "role": role}
