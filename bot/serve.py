"""The composition root of ``labbot serve``: settings → database → Ray → run service → HTTP server + reconciler.

One asyncio process: uvicorn serves ``/healthz`` and ``/api/v1``; a background task reconciles runs with Ray every
few seconds (one ``list_jobs`` call per tick). On exit it stops the embedded Ray head if it started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import uvicorn
from anyio import to_thread
from starlette.applications import Starlette

from bot.api import create_app
from bot.config import Settings, SlackSettings
from bot.slack.runtime import SlackRuntime
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
    slack: SlackRuntime | None = None

    @classmethod
    def build(cls, settings: Settings, *, slack: SlackSettings | None = None) -> ControlPlane:
        """Everything but the HTTP server. ``slack`` overrides the environment's Slack settings (console)."""
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
        telemetry = TelemetryStore(db)
        slack = slack or settings.slack
        runtime = SlackRuntime.build(slack, service, telemetry) if slack.configured else None
        return cls(settings, db, ray, head, launcher, service, telemetry, token, runtime)

    def app(self) -> Starlette:
        return create_app(
            self.service,
            self.telemetry,
            admin_token=self.admin_token,
            health=self.health,
            extra_routes=self.slack.routes() if self.slack else (),
        )

    def health(self) -> dict[str, object]:
        mode = "off"
        if self.slack is not None:
            mode = "socket" if self.slack.settings.app_token else "http"
        return {"ray": self.ray.address, "embedded_ray": self.ray.embedded, "slack": mode}

    async def reconcile_forever(self) -> None:
        ray_down = False
        while True:
            if self.slack is not None:
                await self.slack.tasks.quiet()  # Slack's acks first: reconciling can wait out a burst
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
    """The reconciler, and the Slack runtime's loops when Slack is on, for as long as the server runs."""
    task = asyncio.create_task(plane.reconcile_forever(), name="reconcile")
    try:
        if plane.slack is not None:
            async with plane.slack.running():
                yield
        else:
            yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (uvicorn[standard] brings it): faster acks under a burst of Slack requests."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def configure_logging(settings: Settings, *, quiet: bool = False) -> None:
    """INFO to stderr; with ``quiet`` (the console, whose terminal shows the channel) only warnings go there and
    the rest to ``LABBOT_HOME/labbot.log``."""
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    err = logging.StreamHandler(sys.stderr)
    err.setFormatter(logging.Formatter(fmt))
    err.setLevel(logging.WARNING if quiet else logging.INFO)
    root.addHandler(err)
    if quiet:
        settings.home.mkdir(parents=True, exist_ok=True)
        to_file = logging.FileHandler(settings.home / "labbot.log")
        to_file.setFormatter(logging.Formatter(fmt))
        root.addHandler(to_file)
    for noisy in ("httpx", "uvicorn.access", "alembic.runtime.migration", "slack_bolt", "slack_sdk"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


ConsoleMain = Callable[[ControlPlane], Coroutine[Any, Any, None]]


def serve(settings: Settings, *, slack: SlackSettings | None = None, console: ConsoleMain | None = None) -> int:
    """Run the control plane until stopped; with ``console``, until that coroutine (the console) returns."""
    configure_logging(settings, quiet=console is not None)
    plane = ControlPlane.build(settings, slack=slack)
    app = plane.app()
    # everything imported and built so far lives as long as the process: keep the cyclic GC from walking it
    # again and again (ray, sqlalchemy, slack_bolt make a big heap; a full collection stalls Slack's acks)
    gc.collect()
    gc.freeze()

    async def main() -> None:
        config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        async with background(plane):
            log.info(
                "labbot control plane on %s — Ray %s%s — database %s — Slack %s",
                settings.public_url,
                plane.ray.address,
                " (embedded)" if plane.ray.embedded else "",
                settings.database_url.split("@")[-1],
                plane.health()["slack"],
            )
            if console is None:
                log.info("try, in another terminal:  .venv/bin/labbot launch tiny-lm steps=100")
                await server.serve()
                return
            serving = asyncio.create_task(server.serve())
            while not server.started:
                if serving.done():
                    await serving  # it failed to start (port taken?): raise that
                    return
                await asyncio.sleep(0.05)
            talking = asyncio.create_task(console(plane))
            await asyncio.wait({serving, talking}, return_when=asyncio.FIRST_COMPLETED)
            server.should_exit = True
            talking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await talking
            await serving

    # uvicorn re-raises the signal that stopped it; make SIGTERM an exception so the finally below runs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(main())
    finally:
        plane.close()
        log.info("labbot control plane stopped")
    return 0
