"""Running a repository's tests inside a sandbox and reading back each test's outcome, by pytest's own node id.

pytest runs as ``python -m pytest`` in ``/workspace`` (so the workspace's own package shadows the installed copy;
``src`` layouts get ``/workspace/src`` first on ``PYTHONPATH``), with no cache provider (nothing written beside the
tests). A small plugin of labbot's (:func:`plugin_source`, bound read-only outside the workspace under a module name
drawn afresh for every run, so no file of the workspace can stand in for it, and loaded with ``-p``) reports every
test phase **as it happens** over a Unix socket (:class:`OutcomeChannel`) to this process, which never imports the
code under test. The plugin connects in ``pytest_configure``, before any test module — and so any code a solver
wrote — is imported; nothing inside the sandbox can write to a file the scorer reads afterwards (there is no
results folder), and what was sent cannot be taken back. A session cut short (``os._exit``, a kill at the limit)
never reports its end, so none of its tests counts as passed (each is ``missing``, which scoring counts as failed).

What the channel can still be told by code inside the test process (it shares the process with the code under test)
is checked by :func:`read_stream`: a phase reported twice, a report after the session ended, a second connection, a
line that is not a report, more than :data:`MAX_STREAM` bytes — each a ``violation``, which scoring treats as
tampering. Forged reports that keep the protocol are what the sentinel and hidden tests of
:mod:`labbot.evals.scoring.score` are for.

The outcome of a test is the worst of its phases: an error in setup or teardown is ``error``, a failing call
``failed``, a skip (and an expected failure) ``skipped``; ``passed`` only when every phase passed.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import socket
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from labbot.evals.sandbox.bwrap import WORKDIR, ExecResult, Sandbox, SandboxSpec

Outcome = Literal["passed", "failed", "error", "skipped", "missing"]
PLUGIN_DIR = "/labbot-pytest"
CHANNEL_DIR = "/labbot-report"
CHANNEL_SOCKET = f"{CHANNEL_DIR}/outcomes.sock"
PLUGIN_PREFIX = "labbot_outcomes_"
MAX_STREAM = 32 * 1024 * 1024  # bytes read from the channel; past it the rest is counted and dropped
# naming more test files than this on pytest's command line costs more than collecting the whole suite
MAX_NAMED_FILES = 50
PLUGIN_TEMPLATE = '''\
"""labbot: every test phase's outcome, sent to the scorer as it happens (not a file: nothing to rewrite later)."""
import json
import socket

_channel = None


def _send(doc):
    _channel.sendall((json.dumps(doc) + "\\n").encode())


def pytest_configure(config):
    global _channel
    _channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _channel.connect({socket_path!r})
    _send({{"event": "start"}})


def pytest_runtest_logreport(report):
    _send({{"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome}})


def pytest_sessionfinish(session, exitstatus):
    _send({{"event": "finish", "exitstatus": int(exitstatus)}})
'''
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
_PHASES = frozenset(("setup", "call", "teardown"))


def plugin_source(socket_path: str = CHANNEL_SOCKET) -> str:
    return PLUGIN_TEMPLATE.format(socket_path=socket_path)


@dataclass(frozen=True)
class StreamReport:
    """What the channel said: each test's outcome, whether the session reported its end, and every way the stream
    broke the plugin's protocol (evidence of something else writing to it)."""

    outcomes: dict[str, Outcome]
    finished: bool
    violations: list[str] = field(default_factory=list)
    started: bool = False


def _phase_outcome(when: str, outcome: str) -> Outcome:
    if outcome == "passed":
        return "passed"
    if outcome == "skipped":
        return "skipped"
    return "failed" if when == "call" else "error"


def read_stream(data: bytes, *, extra_connections: int = 0, dropped: int = 0) -> StreamReport:
    """The outcomes in what the plugin sent (pure). A report counts once: the first of each (test, phase); a phase
    reported again, anything after ``finish``, a line that is not one of the plugin's, a second connection or a
    stream over :data:`MAX_STREAM` is a violation. pytest-rerunfailures' ``rerun`` reports allow one more report of
    that phase."""
    outcomes: dict[str, Outcome] = {}
    seen: set[tuple[str, str]] = set()
    violations: list[str] = []
    started = finished = False
    if extra_connections:
        violations.append(f"{extra_connections} more connection(s) to the outcome channel than the plugin's one")
    if dropped:
        violations.append(f"the outcome channel carried more than {MAX_STREAM} bytes ({dropped} dropped)")
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        violations.append("the outcome channel ended in the middle of a line")
        lines.pop()
    for number, raw in enumerate(lines, start=1):
        try:
            doc = json.loads(raw)
        except ValueError:
            violations.append(f"line {number} of the outcome channel is not JSON")
            continue
        if not isinstance(doc, dict):
            violations.append(f"line {number} of the outcome channel is not a report")
            continue
        if finished:
            violations.append(f"a report after the session ended (line {number})")
            continue
        event = doc.get("event")
        if event == "start":
            if started:
                violations.append(f"the session started twice (line {number})")
            started = True
            continue
        if event == "finish":
            finished = True
            continue
        nodeid, when, outcome = doc.get("nodeid"), doc.get("when"), doc.get("outcome")
        if not (isinstance(nodeid, str) and when in _PHASES and outcome in ("passed", "failed", "skipped", "rerun")):
            violations.append(f"line {number} of the outcome channel is not a report")
            continue
        if not started:
            violations.append(f"a report before the session started (line {number})")
            continue
        key = (nodeid, str(when))
        if key in seen:
            violations.append(f"{nodeid} reported its {when} twice")
            continue
        if outcome == "rerun":
            continue  # the phase runs again: its next report is the one that counts
        seen.add(key)
        kind = _phase_outcome(str(when), str(outcome))
        before = outcomes.get(nodeid, "passed")
        outcomes[nodeid] = kind if _RANK[kind] > _RANK[before] else before
    return StreamReport(outcomes, finished, violations, started)


class OutcomeChannel:
    """The scorer's end of the plugin's socket: a listening Unix socket in ``folder``, read by a thread of this
    process as the tests run. Every connection is read (each but the first is a violation), at most
    :data:`MAX_STREAM` bytes in all; :meth:`close` returns what was said once the sandbox has ended."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / Path(CHANNEL_SOCKET).name
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        os.chmod(self.path, 0o666)  # the sandbox's user is not the host's
        self._listener.listen(8)
        self._listener.setblocking(False)
        self._first: bytearray = bytearray()
        self._connections = 0
        self._kept = 0
        self._dropped = 0
        self._stop = threading.Event()
        self._report: StreamReport | None = None
        self._thread = threading.Thread(target=self._serve, name="outcome-channel", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, None)
        conns: dict[socket.socket, int] = {}
        try:
            while True:
                events = selector.select(timeout=0.05)
                for key, _ in events:
                    if key.data is None:
                        with contextlib.suppress(BlockingIOError, OSError):
                            conn, _addr = self._listener.accept()
                            conn.setblocking(False)
                            conns[conn] = self._connections
                            self._connections += 1
                            selector.register(conn, selectors.EVENT_READ, conns[conn])
                        continue
                    peer = key.fileobj
                    assert isinstance(peer, socket.socket)
                    try:
                        chunk = peer.recv(65536)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        chunk = b""
                    if not chunk:
                        selector.unregister(peer)
                        peer.close()
                        del conns[peer]
                        continue
                    self._take(key.data, chunk)
                if self._stop.is_set() and not events:
                    return
        finally:
            for conn in conns:
                conn.close()
            selector.close()

    def _take(self, index: int, chunk: bytes) -> None:
        room = max(0, MAX_STREAM - self._kept)
        kept = chunk[:room]
        self._kept += len(kept)
        self._dropped += len(chunk) - len(kept)
        if index == 0:
            self._first += kept

    def close(self) -> StreamReport:
        """Stop listening once everything that could write has ended; what the plugin's connection said (the same
        report again on a second call)."""
        if self._report is not None:
            return self._report
        self._stop.set()
        self._thread.join()
        self._listener.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._report = read_stream(
            bytes(self._first), extra_connections=max(0, self._connections - 1), dropped=self._dropped
        )
        return self._report


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a test class, whatever pytest's name rule says

    outcomes: dict[str, Outcome]  # node id -> outcome, for every node id asked (and, asked for none, every test run)
    result: ExecResult
    violations: list[str] = field(default_factory=list)  # how the outcome channel broke its protocol (tampering)
    finished: bool = True  # the session reported its end

    @property
    def passed(self) -> set[str]:
        return {n for n, o in self.outcomes.items() if o == "passed"}

    def failing(self, node_ids: Sequence[str]) -> list[str]:
        return [n for n in node_ids if self.outcomes.get(n) != "passed"]


def pytest_command(targets: Sequence[str] = (), *, plugin: str, extra: Sequence[str] = ()) -> list[str]:
    return [
        "python", "-m", "pytest",
        "-p", "no:cacheprovider",
        "-p", plugin,
        "-o", "addopts=",
        "-q", "-rN",
        *extra,
        *targets,
    ]  # fmt: skip


@dataclass(frozen=True)
class Ready:
    """A spec made ready for one pytest run: labbot's plugin and the channel bound, and the plugin's module name."""

    spec: SandboxSpec
    plugin: str
    channel: OutcomeChannel

    def command(self, targets: Sequence[str] = (), *, extra: Sequence[str] = ()) -> list[str]:
        return pytest_command(targets, plugin=self.plugin, extra=extra)


@contextmanager
def pytest_ready(spec: SandboxSpec, *, test_roots: Sequence[str] = ()) -> Iterator[Ready]:
    """``spec`` made ready for a pytest run: labbot's plugin (under a fresh module name) bound read-only on
    ``PYTHONPATH`` after the import roots, and the outcome channel's socket bound at :data:`CHANNEL_DIR`."""
    with (
        tempfile.TemporaryDirectory(prefix="labbot-pytest-") as plugin_dir,
        tempfile.TemporaryDirectory(prefix="labbot-report-") as channel_dir,
    ):
        plugin = PLUGIN_PREFIX + secrets.token_hex(8)
        (Path(plugin_dir) / f"{plugin}.py").write_text(plugin_source())
        os.chmod(channel_dir, 0o755)
        channel = OutcomeChannel(Path(channel_dir))
        roots = [f"{WORKDIR}/{r}".rstrip("/") for r in test_roots]
        run_spec = replace(
            spec,
            ro_binds={**spec.ro_binds, PLUGIN_DIR: Path(plugin_dir), CHANNEL_DIR: Path(channel_dir)},
            env={**spec.env, "PYTHONPATH": ":".join([*roots, PLUGIN_DIR])},
        )
        try:
            yield Ready(run_spec, plugin, channel)
        finally:
            channel.close()


def run_tests(
    spec: SandboxSpec,
    node_ids: Sequence[str] = (),
    *,
    timeout_s: float | None = None,
    test_roots: Sequence[str] = (),
) -> TestRun:
    """Run ``node_ids`` (all tests when empty) in a fresh sandbox over ``spec``'s workspace; asked ids that did not
    run come back ``missing``.

    pytest is given the test files the ids are in, not the ids (an id that no longer exists would make pytest refuse
    the whole run), and the outcomes are then picked by id; a file that is not there is left out. Over
    :data:`MAX_NAMED_FILES` files, the whole suite is collected instead (naming hundreds of files is slower)."""
    files = sorted({n.split("::", 1)[0] for n in node_ids})
    targets = [f for f in files if (spec.workspace / f).is_file()]
    if node_ids and not targets:
        empty = ExecResult(0, "", "none of the test files exist in the workspace", False, 0.0)
        return TestRun(dict.fromkeys(node_ids, "missing"), empty)
    if len(targets) > MAX_NAMED_FILES:
        targets = []
    with pytest_ready(spec, test_roots=test_roots) as ready:
        with Sandbox(ready.spec) as box:
            result = box.exec(ready.command(targets), timeout_s=timeout_s)
        stream = ready.channel.close()
    seen = stream.outcomes
    if not stream.finished:  # a session cut short: what it reported as passed may not have been the end of it
        seen = {n: "missing" if o == "passed" else o for n, o in seen.items()}
    if not node_ids:
        return TestRun(seen, result, stream.violations, stream.finished)
    outcomes: dict[str, Outcome] = {n: seen.get(n, "missing") for n in node_ids}
    return TestRun(outcomes, result, stream.violations, stream.finished)
