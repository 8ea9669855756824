"""An experiment's Optuna study: kept in labbot's own database (Optuna's RDB storage on the same URL, in its own
tables), so it survives a restart of labbot and is the same study on every replica.

The sampler is built again for each question asked of it, seeded from the experiment's search seed and how many
trials the study holds, so a restart of labbot (or a change of leader) neither repeats the random draws already made
nor depends on a sampler's memory: everything the samplers and pruners know is in the storage. (The grid sampler
keeps the one seed: it orders the grid by it, and marks in the storage which points are taken.) TPE and CMA-ES run
with Optuna's constant liar / independent fallback so that trials running at once are not all drawn at the same
point. The pruners' resource is the step: ASHA and Hyperband start at a ninth of the runs' length (rungs at 1/9, 1/3
and the end with a reduction factor of 3: earlier rungs judged tiny-lm's curves before they had sorted themselves, and
stopped the best config; ``benchmarks/experiment_search.py``), the median pruner after a fifth of it.
"""

from __future__ import annotations

import logging
import threading
import warnings
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.pruners import BasePruner, HyperbandPruner, MedianPruner, NopPruner, SuccessiveHalvingPruner
from optuna.samplers import BaseSampler, CmaEsSampler, GridSampler, RandomSampler, TPESampler
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.exc import SQLAlchemyError

from labbot.training.experiments.plan import ExperimentPlan
from labbot.training.experiments.space import Dimension

REDUCTION = 3

optuna.logging.set_verbosity(optuna.logging.WARNING)
optuna.logging.disable_default_handler()  # Optuna's records go through labbot's logging (and its redaction)
optuna.logging.enable_propagation()
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
log = logging.getLogger(__name__)


def distribution(d: Dimension) -> BaseDistribution:
    if d.kind == "choice":
        return CategoricalDistribution(list(d.values))
    assert d.low is not None and d.high is not None
    if d.kind == "int":
        return IntDistribution(int(d.low), int(d.high))
    return FloatDistribution(d.low, d.high, log=d.kind == "loguniform")


def distributions(plan: ExperimentPlan) -> dict[str, BaseDistribution]:
    return {d.name: distribution(d) for d in plan.space.dimensions}


def sampler(plan: ExperimentPlan, asked: int) -> BaseSampler:
    """The plan's sampler, seeded for the ``asked``-th question (so draws differ across ticks and restarts)."""
    seed = (plan.search_seed * 1_000_003 + asked) % (2**32)
    startup = max(2, min(10, plan.trials // 3))
    if plan.search == "grid":  # its order of the grid follows its seed: one seed, or configs would repeat
        return GridSampler({d.name: list(d.grid_values()) for d in plan.space.dimensions}, seed=plan.search_seed)
    if plan.search == "random":
        return RandomSampler(seed=seed)
    if plan.search == "cmaes":
        return CmaEsSampler(seed=seed, n_startup_trials=startup, warn_independent_sampling=False)
    return TPESampler(seed=seed, n_startup_trials=startup, multivariate=True, constant_liar=True)


def pruner(plan: ExperimentPlan) -> BasePruner:
    steps = plan.max_steps
    first = max(1, steps // REDUCTION**2) if steps else 1
    if plan.prune == "asha":
        return SuccessiveHalvingPruner(min_resource=first if steps else "auto", reduction_factor=REDUCTION)
    if plan.prune == "hyperband":
        return HyperbandPruner(min_resource=first, max_resource=steps or "auto", reduction_factor=REDUCTION)
    if plan.prune == "median":
        return MedianPruner(n_startup_trials=3, n_warmup_steps=(steps // 5) if steps else 0)
    return NopPruner()


class Studies:
    """The studies in one database: Optuna's storage opened once, on first use, on labbot's URL."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._storage: RDBStorage | None = None
        self._lock = threading.Lock()

    @property
    def storage(self) -> RDBStorage:
        with self._lock:
            if self._storage is None:
                kwargs: dict[str, Any] = {"pool_pre_ping": True}
                if self.url.startswith("sqlite"):
                    kwargs = {"connect_args": {"timeout": 30}}
                try:
                    self._storage = RDBStorage(self.url, engine_kwargs=kwargs)
                except SQLAlchemyError:  # another replica created Optuna's tables at the same moment: they exist now
                    log.info("Optuna's storage was being created by another replica; opening it again")
                    self._storage = RDBStorage(self.url, engine_kwargs=kwargs)
            return self._storage

    def create(self, name: str, goal: str) -> None:
        optuna.create_study(
            storage=self.storage,
            study_name=name,
            direction="minimize" if goal == "min" else "maximize",
            load_if_exists=True,
        )

    def open(self, name: str, plan: ExperimentPlan) -> optuna.Study:
        return optuna.load_study(study_name=name, storage=self.storage, sampler=sampler(plan, 0), pruner=pruner(plan))

    def ask(self, name: str, plan: ExperimentPlan) -> FrozenTrial:
        """A new trial of the study (RUNNING in the storage), its parameters drawn."""
        study = self.open(name, plan)
        study.sampler = sampler(plan, len(study.get_trials(deepcopy=False)))  # seeded for this ask (module docstring)
        trial = study.ask(distributions(plan))
        return study._storage.get_trial(trial._trial_id)

    def trials(self, name: str, plan: ExperimentPlan, *, running: bool = False) -> list[FrozenTrial]:
        states = (TrialState.RUNNING,) if running else None
        return self.open(name, plan).get_trials(deepcopy=False, states=states)

    def report(self, name: str, plan: ExperimentPlan, trial_id: int, values: list[tuple[int, float]]) -> int | None:
        """Tell the trial its intermediate values in step order; returns the step at which the pruner stops it (None:
        it goes on, or it is no longer running)."""
        study = self.open(name, plan)
        if study._storage.get_trial(trial_id).state != TrialState.RUNNING:
            return None
        trial = optuna.trial.Trial(study, trial_id)
        for step, value in values:
            trial.report(value, step)
            if plan.prune != "none" and trial.should_prune():
                return step
        return None

    def tell(self, name: str, plan: ExperimentPlan, number: int, *, value: float | None, state: TrialState) -> bool:
        """End a trial (complete with ``value``, pruned or failed) unless it has ended already (a restart told it
        before it could record so). Returns whether it was told now."""
        study = self.open(name, plan)
        frozen = next((t for t in study.get_trials(deepcopy=False) if t.number == number), None)
        if frozen is None or frozen.state != TrialState.RUNNING:
            return False
        try:
            if state == TrialState.COMPLETE:
                study.tell(number, value)
            else:
                study.tell(number, state=state)
        except (RuntimeError, ValueError) as e:  # another replica (a person's stop) told it a moment ago
            log.info("trial #%d of %s not told again: %s", number, name, e)
            return False
        return True
