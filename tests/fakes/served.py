"""How every HTTP fake here is served: its Starlette ``app`` on a free port of 127.0.0.1 from a daemon thread
(``labbot.bot.background_server.BackgroundServer``), so a test process and a ``labbot serve`` subprocess reach the same
fake.

A fake subclasses ``ServedFake``, calls ``self.serve_app(app, name, path=...)`` in its constructor, and gets
``start()`` (returns ``url``, idempotent), ``stop()``, ``url`` and ``with Fake() as fake:``. ``path`` is what ``url``
ends with (``/graphql``, ``/v2/enqueue``); ``_before_stop`` is where a fake releases requests it holds hanging.
"""

from __future__ import annotations

from typing import Any, Self

from labbot.bot.background_server import BackgroundServer


class ServedFake:
    _serving: BackgroundServer
    _url: str | None
    _path: str

    def serve_app(self, app: Any, name: str, *, path: str = "", graceful_s: int = 2) -> None:
        self._serving = BackgroundServer(app, name, graceful_s=graceful_s)
        self._url = None
        self._path = path

    @property
    def url(self) -> str:
        """Where the fake answers, once started: the value for labbot's ``*_API_URL`` (or ``*_EVENTS_URL``)."""
        if self._url is None:
            raise RuntimeError(
                f"the {self._serving.name} is not started: use `with {type(self).__name__}()` or start()"
            )
        return self._url

    def start(self, timeout: float = 10.0) -> str:
        """Serve on a free port of 127.0.0.1 from a daemon thread; returns `url`."""
        if self._url is None:
            self._url = f"http://127.0.0.1:{self._serving.start(timeout=timeout)}{self._path}"
        return self._url

    def _before_stop(self) -> None:
        """A fake that holds requests hanging lets them go here."""

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving (hanging requests released first); what was recorded stays readable."""
        self._before_stop()
        self._serving.stop(timeout)
        self._url = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
