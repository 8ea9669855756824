"""A suite as an inspect ``Task``: one sample per eval task, the chosen solver, and the scorer that cannot be talked
into a pass (:func:`labbot.evals.scoring.score.score_sample` on what the solver left, in a fresh pristine copy).

A sample whose solver did not finish (killed at the per-sample limit, or an error) fails without being scored. The
score's metadata carries everything the results need: the outcomes of each test, what was applied and ignored, and
the tail of what the solver printed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import SandboxEnvironmentSpec, sandbox

from labbot.evals.running.solvers import DONE_KEY, OUTPUT_KEY, REASON_KEY, SolverSpec, build_solver
from labbot.evals.sandbox import inspect_provider  # registers the "labbot" sandbox provider with inspect
from labbot.evals.sandbox.bwrap import Limits
from labbot.evals.sandbox.inspect_provider import TASK_ID_KEY, LabbotSandbox, LabbotSandboxConfig
from labbot.evals.scoring.score import SampleScore, score_sample
from labbot.evals.suite import Suite, load

SCORER = "labbot_tests"


@dataclass(frozen=True)
class SampleDone:
    """Passed to the progress callback after each sample is scored."""

    task: str
    passed: bool
    done: int
    total: int
    passed_so_far: int


class _Progress:
    def __init__(self, total: int, callback: Callable[[SampleDone], None] | None) -> None:
        self.total, self.done, self.passed = total, 0, 0
        self.callback = callback

    def record(self, task: str, passed: bool) -> None:
        self.done += 1
        self.passed += passed
        if self.callback is not None:
            self.callback(SampleDone(task, passed, self.done, self.total, self.passed))


def unfinished(task_id: str, suite: Suite, reason: str) -> SampleScore:
    t = suite.task(task_id)
    return SampleScore(
        task_id,
        False,
        dict.fromkeys(t.fail_to_pass, "missing"),
        dict.fromkeys(t.pass_to_pass, "missing"),
        f"not scored: {reason}",
    )


@scorer(metrics=[accuracy()], name=SCORER)
def suite_scorer(
    suite_dir: str,
    venv: str,
    test_timeout_s: float,
    memory_mb: int,
    file_mb: int,
    progress: Callable[[str, bool], None] | None = None,
) -> Scorer:
    folder = Path(suite_dir)
    suite = load(folder)
    limits = Limits(timeout_s=test_timeout_s, memory_mb=memory_mb, file_mb=file_mb)

    async def score(state: TaskState, target: Target) -> Score:
        task_id = str(state.metadata[TASK_ID_KEY])
        output = str(state.store.get(OUTPUT_KEY, "") or "")
        if not state.store.get(DONE_KEY, False):
            reason = str(state.store.get(REASON_KEY, "") or "the solver did not finish (an error; see the log)")
            result = unfinished(task_id, suite, reason)
        else:
            workspace = sandbox().as_type(LabbotSandbox).workspace
            task = suite.task(task_id)
            result = await anyio.to_thread.run_sync(
                lambda: score_sample(folder, suite, task, workspace, Path(venv), limits)
            )
        if progress is not None:
            progress(task_id, result.passed)
        return Score(
            value=CORRECT if result.passed else INCORRECT,
            answer="passed" if result.passed else "failed",
            explanation=result.detail,
            metadata={"score": result.to_json(), "output": output},
        )

    return score


def suite_task(
    suite_dir: Path,
    solver: SolverSpec,
    *,
    venv: Path,
    limits: Limits,
    test_timeout_s: float,
    task_ids: Sequence[str] | None = None,
    on_sample: Callable[[SampleDone], None] | None = None,
    allow_hosts: Sequence[str] = (),
    solver_dir: Path | None = None,
    secrets: str | None = None,
) -> Task:
    """The inspect task for a suite (or the tasks ``task_ids`` of it). ``limits`` are per sample: the solver's wall
    clock and the memory and file size of every command it runs. ``solver_dir``, ``secrets``: a command solver's
    folder and the key of its variables (:func:`~labbot.evals.running.solvers.build_solver`)."""
    assert inspect_provider.PROVIDER == "labbot"
    suite = load(suite_dir)
    tasks = [suite.task(t) for t in task_ids] if task_ids else list(suite.tasks)
    samples = [
        Sample(
            id=t.id,
            input=t.statement,
            target="pass",
            metadata={TASK_ID_KEY: t.id, "path": t.path, "symbol": t.symbol, "also": t.also, "deletion": t.deletion},
        )
        for t in tasks
    ]
    progress = _Progress(len(samples), on_sample)
    config = LabbotSandboxConfig(
        suite_dir=str(suite_dir),
        venv=str(venv),
        timeout_s=limits.timeout_s,
        memory_mb=limits.memory_mb,
        file_mb=limits.file_mb,
        pids=limits.pids,
        tmp_mb=limits.tmp_mb,
        allow_hosts=tuple(allow_hosts),
        toolchain=tuple(suite.toolchain),
    )
    return Task(
        dataset=MemoryDataset(samples, name=suite.id),
        solver=build_solver(
            solver, suite_dir=suite_dir, timeout_s=limits.timeout_s, solver_dir=solver_dir, secrets=secrets
        ),
        scorer=suite_scorer(
            str(suite_dir), str(venv), test_timeout_s, limits.memory_mb, limits.file_mb, progress.record
        ),
        sandbox=SandboxEnvironmentSpec(inspect_provider.PROVIDER, config),
        name=f"labbot-eval-{suite.id}",
        metadata={"suite": suite.id, "solver": solver.label, "source": suite.source, "commit": suite.commit},
    )
