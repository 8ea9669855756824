"""The outcome channel's protocol (pure) and its socket: reports counted once, in order, from one connection; every
other way of writing to it is a violation that scoring treats as tampering."""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path

from labbot.evals.scoring import testrun
from labbot.evals.scoring.testrun import OutcomeChannel, plugin_source, read_stream


def _lines(*docs: dict) -> bytes:
    return b"".join(json.dumps(d).encode() + b"\n" for d in docs)


START, FINISH = {"event": "start"}, {"event": "finish", "exitstatus": 0}


def _report(nodeid: str, when: str, outcome: str) -> dict:
    return {"nodeid": nodeid, "when": when, "outcome": outcome}


def test_a_clean_session_gives_each_tests_worst_phase() -> None:
    data = _lines(
        START,
        _report("t.py::a", "setup", "passed"),
        _report("t.py::a", "call", "passed"),
        _report("t.py::a", "teardown", "passed"),
        _report("t.py::b", "setup", "passed"),
        _report("t.py::b", "call", "failed"),
        _report("t.py::b", "teardown", "failed"),
        _report("t.py::c", "setup", "failed"),
        _report("t.py::d", "setup", "skipped"),
        FINISH,
    )
    report = read_stream(data)
    assert report.violations == [] and report.finished and report.started
    assert report.outcomes == {"t.py::a": "passed", "t.py::b": "error", "t.py::c": "error", "t.py::d": "skipped"}


def test_a_forged_report_before_the_real_one_is_a_violation_and_the_first_counts() -> None:
    data = _lines(
        START,
        _report("t.py::a", "call", "passed"),  # forged at import, before the test ran
        _report("t.py::a", "setup", "passed"),
        _report("t.py::a", "call", "failed"),  # the real one
        FINISH,
    )
    report = read_stream(data)
    assert report.violations == ["t.py::a reported its call twice"]


def test_reports_after_the_end_before_the_start_and_garbage_are_violations() -> None:
    after = read_stream(_lines(START, FINISH, _report("t.py::a", "call", "passed")))
    assert after.violations == ["a report after the session ended (line 3)"] and after.outcomes == {}
    before = read_stream(_lines(_report("t.py::a", "call", "passed"), START, FINISH))
    assert before.violations == ["a report before the session started (line 1)"] and before.outcomes == {}
    garbage = read_stream(b"not json\n" + _lines(START, {"nodeid": 3}, FINISH) + b'{"event": "st')
    assert garbage.violations == [
        "the outcome channel ended in the middle of a line",
        "line 1 of the outcome channel is not JSON",
        "line 3 of the outcome channel is not a report",
    ]


def test_a_rerun_allows_one_more_report_of_its_phase_and_a_cut_session_is_not_finished() -> None:
    data = _lines(START, _report("t.py::a", "call", "rerun"), _report("t.py::a", "call", "passed"))
    report = read_stream(data)
    assert report.violations == [] and report.outcomes == {"t.py::a": "passed"} and not report.finished


def test_the_socket_takes_the_first_connection_and_counts_the_rest_and_the_bytes() -> None:
    with tempfile.TemporaryDirectory() as folder:
        channel = OutcomeChannel(Path(folder))
        first = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        first.connect(str(channel.path))
        first.sendall(_lines(START, _report("t.py::a", "call", "passed")))
        second = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        second.connect(str(channel.path))
        second.sendall(_lines(_report("t.py::b", "call", "passed")))
        first.sendall(_lines(FINISH))
        first.close()
        second.close()
        report = channel.close()
        assert report.outcomes == {"t.py::a": "passed"}  # the second connection's report is not counted
        assert report.violations == ["1 more connection(s) to the outcome channel than the plugin's one"]
        assert not channel.path.exists()
        assert channel.close() is report  # closing twice is harmless


def test_a_flood_is_capped_counted_and_a_violation(monkeypatch) -> None:
    monkeypatch.setattr(testrun, "MAX_STREAM", 1000)
    with tempfile.TemporaryDirectory() as folder:
        channel = OutcomeChannel(Path(folder))
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(channel.path))
        conn.sendall(_lines(START) + b"x" * 50_000)
        conn.close()
        report = channel.close()
    assert any("more than 1000 bytes (49" in v for v in report.violations), report.violations


def test_the_plugin_source_names_the_socket_and_parses() -> None:
    source = plugin_source("/some/where.sock")
    compile(source, "plugin.py", "exec")
    assert "'/some/where.sock'" in source and "pytest_runtest_logreport" in source
