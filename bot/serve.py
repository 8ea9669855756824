"""The composition root of ``labbot serve``: settings → database → Ray → run service → HTTP server + reconciler.

One asyncio process: uvicorn serves ``/healthz`` and ``/api/v1``; a background task reconciles runs with Ray every
few seconds (one ``list_jobs`` call per tick). On exit it stops the embedded Ray head if it started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

import uvicorn
from anyio import to_thread

from bot.api import create_app
from bot.config import Settings
from storage.db import Database
from training.errors import RayUnavailable
from training.launcher import RayLauncher
from training.ray_cluster import EmbeddedRayHead, RayConnection, connect
from training.registry import JobRegistry
from training.service import RunService
from training.telemetry_store import TelemetryStore

log = logging.getLogger("labbot")


@dataclass
class ControlPlane:
    settings: Settings
    db: Database
    ray: RayConnection
    head: EmbeddedRayHead | None
    launcher: RayLauncher
    service: RunService
    telemetry: TelemetryStore
    admin_token: str

    @classmethod
    def build(cls, settings: Settings) -> ControlPlane:
        settings.home.mkdir(parents=True, exist_ok=True)
        registry = JobRegistry.from_config(settings.jobs_table)  # a bad labbot.toml fails before anything starts
        db = Database(settings.database_url)
        db.upgrade()
        ray, head = connect(settings.home, settings.ray_address, settings.ray_token)
        launcher = RayLauncher(ray)
        service = RunService(
            db, registry, launcher, control_url=settings.public_url, checkpoint_root=settings.checkpoint_root
        )
        token = settings.admin_token(create=True)
        assert token is not None
        return cls(settings, db, ray, head, launcher, service, TelemetryStore(db), token)

    def health(self) -> dict[str, object]:
        return {"ray": self.ray.address, "embedded_ray": self.ray.embedded}

    async def reconcile_forever(self) -> None:
        ray_down = False
        while True:
            try:
                changed = await to_thread.run_sync(self.service.reconcile)
                if ray_down:
                    log.info("Ray at %s answers again", self.ray.address)
                ray_down = False
                if changed:
                    log.info("reconciled %d run(s) with Ray", changed)
            except RayUnavailable as e:
                if not ray_down:
                    log.warning("%s", e.message)
                ray_down = True
            except Exception:
                log.exception("reconcile failed")
            await asyncio.sleep(self.settings.reconcile_every_s)

    def close(self) -> None:
        self.launcher.close()
        if self.head is not None:
            self.head.stop()
        self.db.dispose()


@contextlib.asynccontextmanager
async def background(plane: ControlPlane) -> AsyncIterator[None]:
    task = asyncio.create_task(plane.reconcile_forever(), name="reconcile")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for noisy in ("httpx", "uvicorn.access", "alembic.runtime.migration"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def serve(settings: Settings) -> int:
    configure_logging()
    plane = ControlPlane.build(settings)
    app = create_app(plane.service, plane.telemetry, admin_token=plane.admin_token, health=plane.health)

    async def main() -> None:
        config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        async with background(plane):
            log.info(
                "labbot control plane on %s — Ray %s%s — database %s",
                settings.public_url,
                plane.ray.address,
                " (embedded)" if plane.ray.embedded else "",
                settings.database_url.split("@")[-1],
            )
            log.info("try, in another terminal:  .venv/bin/labbot launch tiny-lm steps=100")
            await server.serve()

    # uvicorn re-raises the signal that stopped it; make SIGTERM an exception so the finally below runs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        asyncio.run(main())
    finally:
        plane.close()
        log.info("labbot control plane stopped")
    return 0
