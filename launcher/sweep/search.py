"""The search: which values the next trial gets, and whether a running one stops early.

One Optuna study per sweep, in a journal file of the sweep's dir: every trial asked, each value
reported and each trial's end is a line there, so a sweep whose launcher restarts carries on
with the same trials and the same sampler history. grid is every combination in turn (each
enqueued as the next trial's values: Optuna's GridSampler stops a study only inside its own
optimize loop), random is Optuna's RandomSampler, tpe its TPESampler; the median rule is a pruner of ours
(_median_rule). Optuna is imported here only (`pip install 'tfk8s[sweep]'`).
"""

from __future__ import annotations

import logging
import math
import random
import statistics
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

from launcher.errors import LauncherError
from launcher.sweep.spec import Parameter, SweepSpec

STUDY_FILE = "study.journal"
# user attributes of an Optuna trial
ATTR_CLUSTER = "cluster"
ATTR_MESSAGE = "message"
ATTR_SUBMITTED = "submitted"  # set once its cluster was created: a cluster gone after it is lost, not new

# Optuna's states, by name (so callers need not import optuna)
RUNNING, COMPLETE, FAIL, PRUNED = "RUNNING", "COMPLETE", "FAIL", "PRUNED"


def _optuna():
    try:
        import optuna
    except ImportError:
        raise LauncherError(
            "sweeps need Optuna, which is not installed: pip install 'tfk8s[sweep]' (or pip install optuna)"
        ) from None
    optuna.logging.set_verbosity(logging.WARNING)
    return optuna


def best_of(direction: str):
    """min or max: the better of an objective's values, by its direction."""
    return min if direction == "minimize" else max


def grid_values(parameter: Parameter) -> list[Any]:
    """Every value a grid gives the parameter (int: each step; float: min + k*step up to max)."""
    if parameter.values is not None:
        return list(parameter.values)
    if parameter.int is not None:
        return list(range(parameter.int.min, parameter.int.max + 1, parameter.int.step))
    low, high, step = parameter.float.min, parameter.float.max, parameter.float.step
    count = int(math.floor((high - low) / step + 1e-9)) + 1
    return [round(low + k * step, 12) for k in range(count)]


def grid_size(sweep: SweepSpec) -> int:
    return math.prod(len(grid_values(p)) for p in sweep.parameters)


def trial_budget(sweep: SweepSpec) -> int:
    """How many trials the sweep runs at most: maxTrials, a grid's combinations at most."""
    if sweep.algorithm == "grid":
        return min(grid_size(sweep), sweep.max_trials or grid_size(sweep))
    return sweep.max_trials


@dataclass(frozen=True)
class Trial:
    """A trial as the study keeps it."""

    number: int
    values: dict[str, Any]
    state: str  # RUNNING, COMPLETE, FAIL, PRUNED
    value: float | None
    cluster: str | None
    message: str
    intermediate: dict[int, float]
    submitted: bool = False


class Search:
    """The sweep's study: open() it from its dir (created or resumed), or in memory (dry runs)."""

    def __init__(self, sweep: SweepSpec, study):
        self.sweep, self._study = sweep, study
        self._optuna = _optuna()

    @classmethod
    def open(cls, sweep: SweepSpec, directory: Path | None) -> "Search":
        """The study in `directory`/study.journal (resumed when it exists), or, with None, in
        memory."""
        optuna = _optuna()
        storage = None
        if directory is not None:
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend

            storage = JournalStorage(JournalFileBackend(str(directory / STUDY_FILE)))
        study = optuna.create_study(
            study_name=sweep.name,
            storage=storage,
            load_if_exists=True,
            direction=sweep.objective.direction,
            pruner=_pruner(optuna, sweep),
        )
        # The sampler's random state is not in the journal: reseeded with the seed alone, a
        # resumed sweep would draw its first trials' values again.
        study.sampler = _sampler(optuna, sweep, resumed_trials=len(study.get_trials(deepcopy=False)))
        return cls(sweep, study)

    def trials(self) -> list[Trial]:
        return [
            Trial(
                number=t.number,
                values=dict(t.params),
                state=t.state.name,
                value=t.value if t.state.name == COMPLETE else None,
                cluster=t.user_attrs.get(ATTR_CLUSTER),
                message=t.user_attrs.get(ATTR_MESSAGE, ""),
                intermediate=dict(t.intermediate_values),
                submitted=bool(t.user_attrs.get(ATTR_SUBMITTED)),
            )
            for t in self._study.get_trials(deepcopy=False)
        ]

    def ask(self, cluster_of) -> Trial:
        """A new trial's values from the sampler; `cluster_of(number)` names its cluster, kept
        with it before it is submitted (so a restart finds it)."""
        if self.sweep.algorithm == "grid":  # the next combination no trial has had
            taken = [t.values for t in self.trials()]
            self._study.enqueue_trial(next(c for c in combinations(self.sweep) if c not in taken))
        trial = self._study.ask(self._distributions())
        trial.set_user_attr(ATTR_CLUSTER, cluster_of(trial.number))
        return self._one(trial.number)

    def submitted(self, number: int) -> None:
        self._trial(number).set_user_attr(ATTR_SUBMITTED, True)

    def report(self, number: int, step: int, value: float) -> None:
        self._trial(number).report(value, step)

    def should_stop(self, number: int) -> bool:
        """The median rule's verdict on the values reported so far (False without the rule)."""
        return self.sweep.early_stopping is not None and self._trial(number).should_prune()

    def complete(self, number: int, value: float, message: str = "") -> None:
        self._note(number, message)
        self._study.tell(number, value)

    def fail(self, number: int, message: str) -> None:
        self._note(number, message)
        self._study.tell(number, state=self._optuna.trial.TrialState.FAIL)

    def stop(self, number: int, message: str) -> None:
        """Ended early by the median rule (Optuna's PRUNED)."""
        self._note(number, message)
        self._study.tell(number, state=self._optuna.trial.TrialState.PRUNED)

    def best(self) -> Trial | None:
        done = [t for t in self.trials() if t.state == COMPLETE]
        if not done:
            return None
        pick = best_of(self.sweep.objective.direction)
        return pick(done, key=lambda t: t.value)

    def _one(self, number: int) -> Trial:
        return next(t for t in self.trials() if t.number == number)

    def _note(self, number: int, message: str) -> None:
        if message:
            self._trial(number).set_user_attr(ATTR_MESSAGE, message)

    def _trial(self, number: int):
        frozen = self._study.get_trials(deepcopy=False)[number]
        return self._optuna.trial.Trial(self._study, frozen._trial_id)

    def _distributions(self) -> dict:
        distributions = self._optuna.distributions
        out = {}
        for p in self.sweep.parameters:
            if self.sweep.algorithm == "grid" or p.values is not None:
                out[p.name] = distributions.CategoricalDistribution(
                    grid_values(p) if self.sweep.algorithm == "grid" else p.values
                )
            elif p.int is not None:
                step = 1 if p.int.log else p.int.step
                out[p.name] = distributions.IntDistribution(p.int.min, p.int.max, log=p.int.log, step=step)
            else:
                out[p.name] = distributions.FloatDistribution(
                    float(p.float.min), float(p.float.max), log=p.float.log, step=p.float.step
                )
        return out


def _sampler(optuna, sweep: SweepSpec, resumed_trials: int = 0):
    """The sweep's sampler; `resumed_trials` (the trials a resumed study has) moves the seed
    on, so a seeded sweep stays repeatable and a resumed one draws new values."""
    seed = None if sweep.seed is None else sweep.seed + resumed_trials
    if sweep.algorithm in ("grid", "random"):  # a grid's trials are enqueued (Search.ask)
        return optuna.samplers.RandomSampler(seed=seed)
    # constant_liar: trials running in parallel are counted as if they ended badly, so parallel
    # asks spread out instead of piling on one point
    return optuna.samplers.TPESampler(seed=seed, constant_liar=sweep.parallel_trials > 1)


def _pruner(optuna, sweep: SweepSpec):
    rule = sweep.early_stopping
    if rule is None:
        return optuna.pruners.NopPruner()
    return _median_rule(optuna, rule.min_trials, rule.start_step, sweep.objective.direction)


def _median_rule(optuna, min_trials: int, start_step: int, direction: str):
    """The median stopping rule over steps as the evaluator reports them: a running trial whose
    best value by its latest step S is worse than the median of the finished trials' best values
    by S is stopped (Katib's medianstop judges by step the same way). Optuna's MedianPruner
    compares values at S itself only: an evaluator evaluates the newest checkpoint, so trials'
    steps differ and it never judged (seen on the 8-trial digits sweep)."""
    best = best_of(direction)

    class MedianByStep(optuna.pruners.BasePruner):
        def prune(self, study, trial) -> bool:
            step = trial.last_step
            if step is None or step < start_step:
                return False
            by_step = [
                best(v for s, v in t.intermediate_values.items() if s <= step)
                for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                if any(s <= step for s in t.intermediate_values)
            ]
            if len(by_step) < max(min_trials, 1):
                return False
            median = statistics.median(by_step)
            mine = best(v for s, v in trial.intermediate_values.items() if s <= step)
            return mine < median if direction == "maximize" else mine > median

    return MedianByStep()


def combinations(sweep: SweepSpec) -> list[dict[str, Any]]:
    """A grid's every combination, in the order its trials get them: the parameters' order,
    the last varying fastest; shuffled by `seed` when the sweep has one."""
    names = [p.name for p in sweep.parameters]
    out = [dict(zip(names, values)) for values in product(*(grid_values(p) for p in sweep.parameters))]
    if sweep.seed is not None:
        random.Random(sweep.seed).shuffle(out)
    return out
