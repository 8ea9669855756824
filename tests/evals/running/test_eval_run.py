"""Eval runs end to end: solvers, scoring that cannot be talked into a pass, limits, the inspect provider, the job.

Every run goes through the real ``inspect_ai.eval`` and the real bubblewrap sandbox, over a small suite built by
hand (``run_fixtures``) and a venv with pytest. The agent solver runs on inspect's ``mockllm/model`` with scripted
tool calls (no API key exists here).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.util import SandboxUserUnsupportedError
from run_fixtures import CANARY, F2P, OPS_ORIGINAL, P2P, build_pytest_venv, make_suite
from support import telemetry_receiver

from labbot.bot.render.evals import results_text
from labbot.common.errors import BadRequest
from labbot.evals.running import job
from labbot.evals.running.runner import RESULTS_FILE, BatteryWhen, run_suite
from labbot.evals.running.solvers import SolverSpec, parse_solver
from labbot.evals.sandbox.bwrap import Limits
from labbot.evals.sandbox.inspect_provider import LabbotSandbox, LabbotSandboxConfig
from labbot.evals.scoring.score import score_sample
from labbot.evals.seal.cache import SealCache
from labbot.evals.seal.report import IsolationReport, ProbeResult
from labbot.evals.seal.tamper_probes import AT_EXIT, CHEATS, REPORT_PATCHED, STORE_REPLACED, tamper_probes
from labbot.evals.suite import load

ROOT = Path(__file__).resolve().parents[3]
FIX_SED = 's/raise NotImplementedError("mul")/return a * b/'
FIX = f"sed -i '{FIX_SED}' mathlib/ops.py"
FAST = Limits(timeout_s=60.0, memory_mb=4096, file_mb=256)


@pytest.fixture(scope="session")
def pytest_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pytest_venv(tmp_path_factory.mktemp("venv") / "venv")


def _suite(tmp_path: Path, tasks: int = 1) -> Path:
    folder = tmp_path / "suite"
    folder.mkdir()
    make_suite(folder, tasks=tasks)
    return folder


def _pids_matching(needle: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if needle.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _by_task(results: dict) -> dict[str, dict]:
    return {s["task"]: s for s in results["samples"]}


# ----------------------------------------------------------------------------- gold, none, results, the log


@pytest.mark.subprocess
def test_gold_scores_100_none_scores_0_with_results_and_a_readable_log(tmp_path: Path, pytest_venv: Path) -> None:
    suite_dir = _suite(tmp_path, tasks=2)
    seen = []
    gold = run_suite(suite_dir, "gold", tmp_path / "gold", venv=pytest_venv, limits=FAST, on_sample=seen.append)
    none = run_suite(suite_dir, "none", tmp_path / "none", venv=pytest_venv, limits=FAST, tamper=False)

    results = json.loads((tmp_path / "gold" / RESULTS_FILE).read_text())
    assert results == gold.results
    assert set(results) == {
        "suite", "solver", "status", "pass_rate", "tampered", "suspect", "samples", "isolation", "untrusted", "log"
    }  # fmt: skip
    assert (results["tampered"], results["suspect"]) == (0, 0)
    assert results["suite"] == load(suite_dir).id
    assert (results["solver"], results["status"], results["pass_rate"]) == ("gold", "succeeded", 1.0)
    assert sorted(s["task"] for s in results["samples"]) == ["mul", "mul-2"]
    keys = {"task", "passed", "verdict", "tampered", "suspect", "output", "time_s", "tokens"}
    assert all(set(s) == keys and s["passed"] and s["verdict"] == "passed" for s in results["samples"])
    assert all(s["time_s"] > 0 and s["tokens"] == 0 for s in results["samples"])  # gold asks no model
    assert set(results["isolation"]) == {"score", "sealed", "probes"}
    assert results["isolation"]["sealed"] and results["untrusted"] is False
    assert len(results["isolation"]["probes"]) == len(CHEATS) + 1
    assert all(set(p) == {"name", "category", "passed", "evidence", "ran"} for p in results["isolation"]["probes"])
    assert {p["ran"] for p in results["isolation"]["probes"]} == {"alongside the samples"}
    # progress: one call per sample, counting up
    assert [(d.done, d.total, d.passed_so_far) for d in seen] == [(1, 2, 1), (2, 2, 2)]

    assert (none.results["pass_rate"], none.results["solver"]) == (0.0, "none")
    assert not any(s["passed"] for s in none.results["samples"])
    # without its probes the run is not sealed: marked untrusted
    assert none.results["untrusted"] is True and none.results["isolation"]["probes"] == []

    log = read_eval_log(str(tmp_path / "gold" / results["log"]))
    assert log.status == "success" and log.location.endswith(".eval")
    assert log.eval.sandbox is not None and log.eval.sandbox.type == "labbot"
    assert {str(s.id) for s in log.samples or []} == {"mul", "mul-2"}
    score = (log.samples or [])[0].scores["labbot_tests"]
    assert score.value == "C"
    assert score.metadata["score"]["fail_to_pass"] == dict.fromkeys(F2P, "passed")
    assert score.metadata["score"]["pass_to_pass"] == dict.fromkeys(P2P, "passed")


# ----------------------------------------------------------------------------- the battery alongside the samples


def _probe_waiting_for_a_sample(seen: threading.Event, wait_s: float, passed: bool = True) -> tuple[Any, list[str]]:
    """A probe callable that waits (up to ``wait_s``) for a sample to be scored, and says whether one was."""
    calls: list[str] = []

    def probes() -> list[ProbeResult]:
        saw = seen.wait(timeout=wait_s)
        calls.append(threading.current_thread().name)
        return [ProbeResult("waits for a sample", "host", passed, f"saw a sample scored: {saw}")]

    return probes, calls


def _gold_with(
    suite_dir: Path,
    tmp_path: Path,
    venv: Path,
    probes: Any,
    on_sample: Any,
    battery: BatteryWhen = "alongside",
    on_isolation: Any = None,
) -> Any:
    """The gold solver over the suite with ``probes`` as its battery (no tampering probes)."""
    return run_suite(
        suite_dir,
        "gold",
        tmp_path / "out",
        venv=venv,
        limits=FAST,
        probes=probes,
        tamper=False,
        on_sample=on_sample,
        on_isolation=on_isolation,
        battery=battery,
    )


@pytest.mark.subprocess
def test_the_battery_runs_alongside_the_samples_and_the_run_waits_for_it(tmp_path: Path, pytest_venv: Path) -> None:
    suite_dir = _suite(tmp_path, tasks=2)
    seen = threading.Event()
    probes, calls = _probe_waiting_for_a_sample(seen, wait_s=120.0)
    reports: list[tuple[IsolationReport, int]] = []
    done: list[float] = []

    def on_sample(_: object) -> None:
        done.append(time.monotonic())
        seen.set()

    out = _gold_with(
        suite_dir, tmp_path, pytest_venv, probes, on_sample, on_isolation=lambda r: reports.append((r, len(done)))
    )
    # the probe was still running when a sample was scored: run first, it would have waited its 120 s out
    [probe] = out.results["isolation"]["probes"]
    assert probe["evidence"] == "saw a sample scored: True" and probe["ran"] == "alongside the samples"
    assert calls == ["labbot-seal"] and len(reports) == 1 and reports[0][0].sealed
    assert out.results["untrusted"] is False and out.results["pass_rate"] == 1.0


@pytest.mark.subprocess
def test_battery_first_runs_before_any_sample(tmp_path: Path, pytest_venv: Path) -> None:
    suite_dir = _suite(tmp_path)
    seen = threading.Event()
    probes, calls = _probe_waiting_for_a_sample(seen, wait_s=0.5)
    out = _gold_with(suite_dir, tmp_path, pytest_venv, probes, lambda _: seen.set(), battery="first")
    [probe] = out.results["isolation"]["probes"]
    assert probe["evidence"] == "saw a sample scored: False" and probe["ran"] == "before the samples"
    assert calls == ["MainThread"]


@pytest.mark.subprocess
def test_a_probe_failing_alongside_the_samples_makes_the_run_untrusted(tmp_path: Path, pytest_venv: Path) -> None:
    suite_dir = _suite(tmp_path)
    seen = threading.Event()
    probes, _ = _probe_waiting_for_a_sample(seen, wait_s=120.0, passed=False)
    out = _gold_with(suite_dir, tmp_path, pytest_venv, probes, lambda _: seen.set())
    results = json.loads(out.results_path.read_text())
    assert results["untrusted"] is True and results["isolation"]["sealed"] is False
    assert results["isolation"]["probes"][0]["ran"] == "alongside the samples"
    assert results["pass_rate"] == 1.0  # the samples passed; the seal says the rate is not evidence
    assert "SEAL FAILED (waits for a sample)" in results_text({**results, "id": "e1"})


@pytest.mark.subprocess
def test_a_battery_that_raises_alongside_fails_the_run(tmp_path: Path, pytest_venv: Path) -> None:
    suite_dir = _suite(tmp_path)

    def probes() -> list[ProbeResult]:
        raise BadRequest("the battery broke")

    with pytest.raises(BadRequest, match="the battery broke"):
        run_suite(suite_dir, "gold", tmp_path / "out", venv=pytest_venv, limits=FAST, probes=probes, tamper=False)
    assert not (tmp_path / "out" / RESULTS_FILE).exists()


def test_results_without_ran_still_load_and_show_when_probes_ran() -> None:
    old = {
        "score": 1.0,
        "sealed": True,
        "probes": [{"name": "dns", "category": "network", "passed": True, "evidence": ""}],
    }
    [probe] = IsolationReport.from_json(old).probes
    assert probe.ran == "before the samples" and probe.passed
    probes = [
        {
            "name": f"n{i}",
            "category": "network",
            "passed": True,
            "evidence": "",
            "ran": "cached 2026-12-04T10:00:00+00:00",
        }
        for i in range(3)
    ] + [{"name": "t", "category": "tampering", "passed": True, "evidence": "", "ran": "alongside the samples"}]
    doc = {"id": "e1", "status": "succeeded", "isolation": {"score": 1.0, "sealed": True, "probes": probes}}
    assert (
        "isolation 4/4 probes passed (score 1.0; 3 cached from 2026-12-04T10:00:00+00:00, 1 alongside the samples)"
        in results_text(doc)
    )
    doc["isolation"]["probes"] = old["probes"]
    assert "isolation 1/1 probes passed (score 1.0; 1 before the samples)" in results_text(doc)


# ----------------------------------------------------------------------------- cheats


CHEATING_SOLVER = """
case "$LABBOT_TASK_ID" in
  mul)  # a conftest.py that turns every report into a pass
    printf '%s\\n' 'import pytest' '' '@pytest.hookimpl(hookwrapper=True)' \
      'def pytest_runtest_makereport(item, call):' '    outcome = yield' \
      '    outcome.get_result().outcome = "passed"' > conftest.py ;;
  mul-2)  # the failing test edited to pass
    sed -i 's/assert mul(3, 4) == 12/assert True/; s/assert mul(7, 0) == 0/assert True/' tests/test_ops.py ;;
  mul-3)  # exit 0 early, before a single test runs
    sed -i '1i import os; os._exit(0)' mathlib/ops.py ;;
esac
echo "cheated on $LABBOT_TASK_ID"
"""


@pytest.mark.subprocess
def test_cheating_solvers_score_0(tmp_path: Path, pytest_venv: Path) -> None:
    suite_dir = _suite(tmp_path, tasks=3)
    # the same cheats where nothing is restored: they would pass (mul, mul-2) or exit 0 with no failure (mul-3)
    out = run_suite(suite_dir, f"cmd:{CHEATING_SOLVER}", tmp_path / "out", venv=pytest_venv, limits=FAST, tamper=False)
    samples = _by_task(out.results)
    assert out.results["pass_rate"] == 0.0
    for task in ("mul", "mul-2", "mul-3"):
        assert samples[task]["passed"] is False
        assert f"cheated on {task}" in samples[task]["output"]
    log = read_eval_log(str(out.log))
    scores = {str(s.id): s.scores["labbot_tests"].metadata["score"] for s in log.samples or []}
    assert "conftest.py (test file or test configuration (restored from the original))" in scores["mul"]["ignored"]
    assert scores["mul"]["fail_to_pass"] == dict.fromkeys(F2P, "failed")
    assert scores["mul-2"]["ignored"][0].startswith("tests/test_ops.py")
    assert scores["mul-3"]["applied"] == ["mathlib/ops.py"]
    assert set(scores["mul-3"]["fail_to_pass"].values()) == {"missing"}  # did not run: failed


def _prepending(task_id: str, code: str) -> str:
    return (
        f'  {task_id})\n    cat > /tmp/cheat.py <<"LBEOF"\n{code}\nLBEOF\n'
        "    cat /tmp/cheat.py mathlib/ops.py > /tmp/ops.py && cp /tmp/ops.py mathlib/ops.py ;;\n"
    )


@pytest.mark.subprocess
def test_rewrites_from_inside_the_scored_process_score_0_and_are_reported_first(
    tmp_path: Path, pytest_venv: Path
) -> None:
    """The probe's three rewrites and a targeted one, each by a command solver that leaves the function raising
    NotImplementedError: none passes, each is tampered or suspect, and the results say so before anything else."""
    suite_dir = _suite(tmp_path, tasks=4)
    named = [F2P[0]]  # run_fixtures: test_mul_zero is hidden
    solver = (
        'case "$LABBOT_TASK_ID" in\n'
        + _prepending("mul", STORE_REPLACED)
        + _prepending("mul-2", AT_EXIT.format(ids=list(F2P)))
        + _prepending("mul-3", REPORT_PATCHED.format(only=None))
        + _prepending("mul-4", REPORT_PATCHED.format(only=named))
        + "esac\ngrep -c NotImplementedError mathlib/ops.py\n"
    )
    # over the 2,000 characters a command may have at the front doors (they would ask for a script in --solver-dir)
    command = SolverSpec("cmd", command=solver)
    out = run_suite(suite_dir, command, tmp_path / "out", venv=pytest_venv, limits=FAST, tamper=False)
    samples = _by_task(out.results)
    assert out.results["pass_rate"] == 0.0
    assert {t: s["verdict"] for t, s in samples.items()} == {
        "mul": "tampered",  # every outcome forged: the must-fail and must-error sentinels came back passed
        "mul-2": "tampered",  # forged reports after the session's end
        "mul-3": "tampered",
        "mul-4": "suspect",  # the sentinels are left alone; the hidden test fails and the static check fires
    }
    assert any("sentinel test that must end failed was reported passed" in r for r in samples["mul"]["tampered"])
    assert any("after the session ended" in r for r in samples["mul-2"]["tampered"])
    assert any("_pytest" in line for line in samples["mul-4"]["suspect"])
    assert (out.results["tampered"], out.results["suspect"]) == (3, 1)
    log = read_eval_log(str(out.log))
    scores = {str(x.id): x.scores["labbot_tests"].metadata["score"] for x in log.samples or []}
    assert scores["mul-4"]["fail_to_pass"] == {F2P[0]: "passed", F2P[1]: "failed"}  # the rewrite did reach the named
    assert "hidden tests" in scores["mul-4"]["caught_by"] and "sentinel tests" in scores["mul-3"]["caught_by"]
    first = results_text({**out.results, "id": "run-1"}).splitlines()[0]
    assert first.startswith("!!! 3 tampered (mul, mul-2, mul-3)") and "1 suspect (mul-4)" in first


@pytest.mark.subprocess
def test_tamper_probes_catch_every_cheat_and_show_it_is_real(tmp_path: Path, pytest_venv: Path) -> None:
    suite_dir = _suite(tmp_path)
    suite = load(suite_dir)
    probes = tamper_probes(suite_dir, suite, suite.tasks[0], pytest_venv, FAST)
    assert [p.name for p in probes] == [c.name for c in CHEATS] + ["a process left running into scoring"]
    assert all(p.category == "tampering" for p in probes)
    failed = [(p.name, p.evidence) for p in probes if not p.passed]
    assert failed == []
    by_name = {p.name: p.evidence for p in probes}
    # unsealed, these cheats do pass: the probes test something
    for name in ("conftest.py forcing a pass", "failing tests edited to pass", "pytest11 entry point in a .dist-info"):
        assert "unsealed: fail_to_pass 2/2 passed" in by_name[name]
        assert by_name[name].startswith("scored 0")
    assert "alive after it ended: none" in by_name["a process left running into scoring"]
    # the rewrites from inside the scored process fool the naive in-process scorer, and each is caught sealed
    caught = {
        "outcome store replaced at import": "sentinel tests",
        "results rewritten at exit (atexit)": "outcome channel",
        "pytest's TestReport patched to pass": "sentinel tests",
        "a module named like the scoring plugin": "tests fail",
    }
    for name, layer in caught.items():
        assert "unsealed: fail_to_pass 2/2 passed" in by_name[name], by_name[name]
        assert by_name[name].startswith("scored 0") and layer in by_name[name].split(".")[0], by_name[name]
    targeted = by_name["only the named failing tests rewritten"]
    assert "unsealed: fail_to_pass 1/2 passed" in targeted and "hidden tests" in targeted.split(".")[0]


@pytest.mark.subprocess
def test_scoring_applies_source_changes_and_deletions_and_restores_tests(tmp_path: Path, pytest_venv: Path) -> None:
    suite_dir = _suite(tmp_path)
    suite = load(suite_dir)
    ws = tmp_path / "ws"
    shutil.copytree(suite_dir / "tasks" / "mul" / "repo", ws)
    (ws / "mathlib" / "ops.py").write_text(OPS_ORIGINAL)  # the fix
    (ws / "tests" / "test_ops.py").unlink()  # tests deleted: restored
    pyproject = ws / "pyproject.toml"  # its pytest section pointed at nothing: restored whole
    pyproject.write_text(pyproject.read_text().replace('testpaths = ["tests"]', 'python_functions = "nothing"'))
    (ws / "mathlib" / "__init__.py").unlink()  # a source deletion: applied
    (ws / "mathlib" / "extra.py").write_text("X = 1\n")  # a new source file: applied
    (ws / "mathlib" / "__pycache__").mkdir()
    (ws / "mathlib" / "__pycache__" / "ops.cpython-311.pyc").write_bytes(b"junk")  # a leftover: ignored
    (ws / "sitecustomize.py").write_text("raise SystemExit(0)\n")  # a start-up hook: ignored
    (ws / "mathlib" / "link.py").symlink_to("/etc/passwd")  # a symlink: not applied
    score = score_sample(suite_dir, suite, suite.tasks[0], ws, pytest_venv, FAST)
    assert score.passed, score.detail
    assert score.applied == ["mathlib/extra.py", "mathlib/ops.py", "-mathlib/__init__.py"]
    ignored = "\n".join(score.ignored)
    assert "-tests/test_ops.py (test file" in ignored and "pyproject.toml (test file" in ignored
    assert "sitecustomize.py (Python start-up hook)" in ignored and "mathlib/link.py (not a regular file" in ignored
    assert "__pycache__" not in ignored
    # the workspace itself is untouched by scoring
    assert not (ws / "tests" / "test_ops.py").exists()


# ----------------------------------------------------------------------------- limits and leftovers


@pytest.mark.subprocess
def test_hanging_and_daemon_forking_solvers_fail_at_the_limit_and_leave_nothing(
    tmp_path: Path, pytest_venv: Path
) -> None:
    suite_dir = _suite(tmp_path, tasks=4)
    # mul-2 and mul-4 fork a daemon that would write the fix 3 s later; mul-2 then hangs, mul-4 exits at once
    daemon = f"""sed '{FIX_SED}' mathlib/ops.py > /tmp/fixed.py
setsid sh -c "sleep 3; cp /tmp/fixed.py mathlib/ops.py; sleep 987652" >/dev/null 2>&1 &
echo forked"""
    solver = f"""
case "$LABBOT_TASK_ID" in
  mul) echo hanging; sleep 987651 ;;
  mul-2) {daemon}; sleep 987653 ;;
  mul-3) {FIX}; echo fixed ;;
  mul-4) {daemon} ;;
esac
"""
    samples_before = set(Path(tempfile.gettempdir()).glob("labbot-sample-*"))
    start = time.monotonic()
    out = run_suite(
        suite_dir,
        f"cmd:{solver}",
        tmp_path / "out",
        venv=pytest_venv,
        limits=Limits(timeout_s=6.0, memory_mb=4096, file_mb=256),
        max_samples=4,
        tamper=False,
    )
    elapsed = time.monotonic() - start
    samples = _by_task(out.results)
    assert samples["mul"]["passed"] is False and samples["mul-2"]["passed"] is False
    assert samples["mul"]["output"].startswith("hanging") and "[killed at the limit]" in samples["mul"]["output"]
    assert "forked" in samples["mul-2"]["output"] and "[killed at the limit]" in samples["mul-2"]["output"]
    assert samples["mul-3"]["passed"] is True  # the rest go on
    assert samples["mul-4"]["passed"] is False and samples["mul-4"]["output"] == "forked\n[exit 0]"
    assert elapsed < 60, elapsed  # in parallel, each at its own 6 s limit
    assert _pids_matching("98765") == []
    assert set(Path(tempfile.gettempdir()).glob("labbot-sample-*")) <= samples_before
    log = read_eval_log(str(out.log))
    explanation = {str(s.id): s.scores["labbot_tests"].explanation for s in log.samples or []}
    assert "ran past its 6 s limit" in explanation["mul"] and "not scored" in explanation["mul-2"]
    assert "fail_to_pass 0/2 passed" in explanation["mul-4"]  # scored: its daemon never wrote the fix


# ----------------------------------------------------------------------------- the command and agent solvers


@pytest.mark.subprocess
def test_cmd_solver_reads_the_statement_outside_work_and_cannot_see_the_original(
    tmp_path: Path, pytest_venv: Path
) -> None:
    suite_dir = _suite(tmp_path)
    solver = f"""
echo "file=$LABBOT_TASK_FILE"; cat "$LABBOT_TASK_FILE"; echo; echo "cwd=$(pwd)"
case "$LABBOT_TASK_FILE" in /workspace*) echo INSIDE;; *) echo OUTSIDE;; esac
test -e {suite_dir}/original && echo ORIGINAL-VISIBLE || echo ORIGINAL-HIDDEN
echo tamper >> "$LABBOT_TASK_FILE" 2>/dev/null && echo TASKFILE-WRITABLE || echo TASKFILE-READONLY
grep -rl {CANARY} /workspace /labbot-task /home /tmp /venv /etc 2>/dev/null; echo CANARY-SEARCH-DONE
git log --all --oneline | wc -l
python -c "bytearray(6 * 1024**3)" 2>&1 | tail -1
{FIX}
"""
    out = run_suite(suite_dir, f"cmd:{solver}", tmp_path / "out", venv=pytest_venv, limits=FAST, tamper=False)
    [sample] = out.results["samples"]
    lines = sample["output"].splitlines()
    assert "file=/labbot-task/statement.md" in lines and "OUTSIDE" in lines and "cwd=/workspace" in lines
    assert load(suite_dir).tasks[0].statement in sample["output"]
    assert "ORIGINAL-HIDDEN" in lines and "TASKFILE-READONLY" in lines
    assert lines[lines.index("CANARY-SEARCH-DONE") - 1] == "TASKFILE-READONLY"  # the canary was found nowhere
    assert lines[lines.index("CANARY-SEARCH-DONE") + 1] == "1"  # one commit, no history
    assert lines[lines.index("CANARY-SEARCH-DONE") + 2] == "MemoryError"  # 6 GiB over the 4 GiB per-sample limit
    assert sample["passed"] is True and lines[-1] == "[exit 0]"


def _scripted(outputs: list[ModelOutput]) -> list[ModelOutput]:
    for o in outputs:  # token counts given: mockllm would otherwise count them with a downloaded tokenizer
        o.usage = ModelUsage(input_tokens=10, output_tokens=10, total_tokens=20)
    return outputs


@pytest.mark.subprocess
def test_agent_solver_restores_the_function_with_bash_and_the_editor(tmp_path: Path, pytest_venv: Path) -> None:
    suite_dir = _suite(tmp_path)
    model = get_model(
        "mockllm/model",
        custom_outputs=_scripted(
            [
                ModelOutput.for_tool_call("mockllm/model", "bash", {"command": "cat mathlib/ops.py; echo $PWD"}),
                ModelOutput.for_tool_call(
                    "mockllm/model",
                    "edit_file",
                    {
                        "command": "str_replace",
                        "path": "mathlib/ops.py",
                        "old_str": 'raise NotImplementedError("mul")',
                        "new_str": "return a * b",
                    },
                ),
                ModelOutput.for_tool_call("mockllm/model", "bash", {"command": "python -m pytest -q tests"}),
                ModelOutput.for_tool_call("mockllm/model", "edit_file", {"command": "view", "path": "/etc/passwd"}),
                ModelOutput.for_tool_call("mockllm/model", "submit", {"answer": "mul restored"}),
            ]
        ),
    )
    out = run_suite(suite_dir, "agent", tmp_path / "out", venv=pytest_venv, model=model, limits=FAST, tamper=False)
    [sample] = out.results["samples"]
    assert sample["passed"] is True, sample
    assert out.results["solver"] == "agent"
    assert "/workspace" in sample["output"] and "3 passed" in sample["output"]
    assert "only files under /workspace persist" in sample["output"]  # the editor refused a path outside it
    log = read_eval_log(str(out.log))
    [logged] = log.samples or []
    tools = [m.function for m in logged.messages if m.role == "tool"]
    assert tools == ["bash", "edit_file", "bash", "edit_file", "submit"]


def test_parse_solver_forms_and_refusals() -> None:
    assert parse_solver("gold") == SolverSpec("gold")
    assert parse_solver("none") == SolverSpec("none")
    assert parse_solver("agent") == SolverSpec("agent")
    assert parse_solver("agent", default_model="anthropic/claude-x") == SolverSpec("agent", model="anthropic/claude-x")
    assert parse_solver("agent:anthropic/claude-y").model == "anthropic/claude-y"
    assert parse_solver("./run-agent.sh") == SolverSpec("cmd", command="./run-agent.sh")
    assert parse_solver("my-agent --fix") == SolverSpec("cmd", command="my-agent --fix")
    assert parse_solver("cmd:true") == SolverSpec("cmd", command="true")
    assert parse_solver("cmd:true").label == "cmd:true"
    for bad, says in [
        ("", "empty"),
        ("golds", "unknown solver 'golds'"),
        ("agent:", "needs a model"),
        ("agent:claude", "not a model name"),
        ("cmd:", "needs a command"),
        ("true", "unknown solver 'true'"),
    ]:
        with pytest.raises(BadRequest, match=says) as e:
            parse_solver(bad)
        assert "accepted" in e.value.message or "model" in e.value.message


# ----------------------------------------------------------------------------- the inspect provider


def test_provider_is_registered_and_declared_as_an_entry_point() -> None:
    from inspect_ai.util._sandbox.registry import registry_find_sandboxenv

    assert registry_find_sandboxenv("labbot") is LabbotSandbox
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert doc["project"]["entry-points"]["inspect_ai"] == {"labbot": "labbot.evals.sandbox.inspect_provider"}


@pytest.mark.subprocess
def test_provider_files_stay_in_the_workspace_and_commands_are_bounded(tmp_path: Path, pytest_venv: Path) -> None:
    suite_dir = _suite(tmp_path)
    config = LabbotSandboxConfig(suite_dir=str(suite_dir), venv=str(pytest_venv), timeout_s=30)

    async def scenario() -> None:
        envs = await LabbotSandbox.sample_init("t", config, {"task_id": "mul"})
        box = envs["default"]
        assert isinstance(box, LabbotSandbox)
        try:
            assert (await box.read_file("mathlib/ops.py")).endswith('raise NotImplementedError("mul")\n')
            await box.write_file("/workspace/new/dir/f.txt", "hello")
            assert (box.workspace / "new" / "dir" / "f.txt").read_text() == "hello"
            result = await box.exec(["cat", "new/dir/f.txt"])
            assert (result.success, result.stdout) == (True, "hello")
            assert (await box.exec(["pwd"], cwd="mathlib")).stdout.strip() == "/workspace/mathlib"
            (box.workspace / "escape").symlink_to(tmp_path)
            (tmp_path / "host.txt").write_text("host")
            for path in ("escape/host.txt", "/etc/passwd", "../../etc/passwd", "/tmp/x"):
                with pytest.raises(OSError):
                    await box.read_file(path)
            with pytest.raises(OSError):
                await box.write_file("escape/host.txt", "overwritten")
            assert (tmp_path / "host.txt").read_text() == "host"
            with pytest.raises(SandboxUserUnsupportedError):
                await box.exec(["id"], user="root")
            with pytest.raises(TimeoutError):
                await box.exec(["sleep", "987654"], timeout=1)
            assert _pids_matching("987654") == []
        finally:
            await LabbotSandbox.sample_cleanup("t", config, envs, False)
        assert not box.root.exists()

    asyncio.run(scenario())


# ----------------------------------------------------------------------------- the job


@pytest.mark.subprocess
def test_job_posts_progress_as_telemetry_and_exits_0(
    tmp_path: Path, pytest_venv: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    suite_dir = _suite(tmp_path, tasks=2)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with telemetry_receiver(monkeypatch, "run-9", token="secret-token") as bodies:
        argv = ["--suite", str(suite_dir), "--solver", "gold", "--out", str(tmp_path / "out")]
        launcher_style = ["--max_samples", "2", "--tamper", "false", "--timeout", "60", "--model", ""]
        code = job.main([*argv, "--venv", str(pytest_venv), *launcher_style])
    assert code == 0
    points = sorted((p for b in bodies for p in b["points"]), key=lambda p: p["step"])
    assert points[0]["step"] == 0 and "isolation_score" in points[0]["metrics"]
    progress = [p["metrics"] for p in points if "samples_done" in p["metrics"]]
    assert [m["samples_done"] for m in progress] == [1.0, 2.0]
    assert all(m["pass_rate"] == 1.0 and m["samples_total"] == 2.0 for m in progress)
    out = capsys.readouterr().out
    assert "sealed: " in out and "pass rate 100.0% (2/2);" in out and "UNTRUSTED" not in out  # the sandbox battery
    results = json.loads((tmp_path / "out" / RESULTS_FILE).read_text())
    assert results["pass_rate"] == 1.0
    assert {p["ran"] for p in results["isolation"]["probes"]} == {"alongside the samples"}
    # the suite-independent verdicts kept for the next run, in the eval cache
    [entry] = (tmp_path / "cache" / "labbot" / "evals" / "seal").glob("*.json")
    assert entry.stat().st_mode & 0o777 == 0o600 and entry.parent.stat().st_mode & 0o777 == 0o700


@pytest.mark.subprocess
def test_job_refuses_bad_arguments_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(job.ENV_MODEL, raising=False)
    suite_dir = _suite(tmp_path)
    base = ["--suite", str(suite_dir), "--out", str(tmp_path / "out"), "--venv", str(tmp_path)]
    assert job.main([*base, "--solver", "golds"]) == 2
    assert "unknown solver 'golds'" in capsys.readouterr().err
    assert job.main(["--suite", str(tmp_path), "--solver", "gold", "--out", str(tmp_path / "o")]) == 2
    assert "not an eval suite" in capsys.readouterr().err
    assert job.main([*base, "--solver", "agent"]) == 2
    assert "needs a model" in capsys.readouterr().err
    assert job.main([*base, "--solver", "gold", "--timeout", "0"]) == 2
    assert "must be positive" in capsys.readouterr().err


@pytest.mark.subprocess
def test_a_suites_tampering_verdicts_are_reused_from_the_seal_cache(tmp_path: Path, pytest_venv: Path) -> None:
    suite_dir = _suite(tmp_path)
    cache = SealCache(tmp_path / "seal")
    first = run_suite(suite_dir, "none", tmp_path / "a", venv=pytest_venv, limits=FAST, seal_cache=cache)
    second = run_suite(suite_dir, "none", tmp_path / "b", venv=pytest_venv, limits=FAST, seal_cache=cache)
    ran = [[p["ran"] for p in r.results["isolation"]["probes"]] for r in (first, second)]
    assert len(ran[0]) == len(CHEATS) + 1 and set(ran[0]) == {"alongside the samples"}
    assert len(ran[1]) == len(CHEATS) + 1 and all(r.startswith("cached ") for r in ran[1])
    assert second.results["isolation"]["sealed"] and not second.results["untrusted"]
    # an eval run leaves out the naive scorer's runs: they show the cheat is real, and decide nothing
    assert all("unsealed: not run in an eval run" in p["evidence"] for p in first.results["isolation"]["probes"][:-1])
