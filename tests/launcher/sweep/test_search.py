"""The search over Optuna: grid, random and TPE suggestions, its study kept in a file, the median rule."""

from __future__ import annotations

import math

import pytest

from launcher.sweep import search
from launcher.sweep.search import COMPLETE, PRUNED, RUNNING, Search
from launcher.sweep.spec import SweepSpec

PARAMETERS = [
    {"name": "batch", "flag": "--global-batch-size", "int": {"min": 16, "max": 256, "log": True}},
    {"name": "lr", "env": "LR", "float": {"min": 1e-4, "max": 1e-1, "log": True}},
    {"name": "loop", "flag": "--loop", "values": ["custom", "fit"]},
]


def sweep(algorithm="random", parameters=PARAMETERS, **fields) -> SweepSpec:
    data = {
        "name": "sw",
        "cluster": "unused.yaml",
        "parameters": parameters,
        "objective": {"metric": "loss", "direction": "minimize"},
        "algorithm": algorithm,
        **fields,
    }
    if algorithm != "grid":
        data.setdefault("maxTrials", 10)
    return SweepSpec.model_validate(data)


def name(number: int) -> str:
    return f"sw-t{number}"


def in_space(values: dict) -> bool:
    return (
        isinstance(values["batch"], int)
        and 16 <= values["batch"] <= 256
        and 1e-4 <= values["lr"] <= 1e-1
        and values["loop"] in ("custom", "fit")
    )


def test_a_grid_gives_each_combination_once_and_its_size_is_the_budget():
    parameters = [
        {"name": "batch", "flag": "--b", "int": {"min": 16, "max": 48, "step": 16}},
        {"name": "lr", "env": "LR", "float": {"min": 0.1, "max": 0.3, "step": 0.1}},
        {"name": "loop", "flag": "--loop", "values": ["custom", "fit"]},
    ]
    s = sweep("grid", parameters)
    assert search.grid_values(s.parameters[1]) == [0.1, 0.2, 0.3]
    assert search.trial_budget(s) == 18 and search.trial_budget(sweep("grid", parameters, maxTrials=5)) == 5
    study = Search.open(s, None)
    asked = [study.ask(name).values for _ in range(18)]
    assert sorted(map(str, asked)) == sorted(map(str, search.combinations(s)))
    assert asked[0] == {"batch": 16, "lr": 0.1, "loop": "custom"}  # in order without a seed
    shuffled = search.combinations(sweep("grid", parameters, seed=3))
    assert shuffled != search.combinations(s) and sorted(map(str, shuffled)) == sorted(map(str, asked))


@pytest.mark.parametrize("algorithm", ["random", "tpe"])
def test_suggestions_stay_in_their_ranges_and_a_seed_repeats_them(algorithm):
    def run(seed):
        study = Search.open(sweep(algorithm, seed=seed), None)
        out = []
        for _ in range(12):
            trial = study.ask(name)
            out.append(trial.values)
            study.complete(trial.number, (math.log10(trial.values["lr"]) + 2) ** 2)  # best at lr 0.01
        return out, study

    first, study = run(7)
    assert all(in_space(v) for v in first)
    assert run(7)[0] == first and run(8)[0] != first
    best = study.best()
    assert best.state == COMPLETE and best.value == min(t.value for t in study.trials())


def test_the_study_survives_in_its_file(tmp_path):
    s = sweep("tpe", seed=7)  # a seeded sweep, as docs/sweeps.md's
    study = Search.open(s, tmp_path)
    a, b = study.ask(name), study.ask(name)
    study.complete(a.number, 0.5, "final evaluation ckpt-20")
    study.report(b.number, 10, 0.9)
    again = Search.open(s, tmp_path)  # as a restarted launcher does
    kept = {t.number: t for t in again.trials()}
    assert kept[0].state == COMPLETE and kept[0].value == 0.5 and kept[0].message == "final evaluation ckpt-20"
    assert kept[1].state == RUNNING and kept[1].cluster == "sw-t1" and kept[1].intermediate == {10: 0.9}
    assert kept[0].values == a.values and kept[1].values == b.values
    resumed = again.ask(name)
    assert resumed.number == 2
    # the sampler's state is not in the file: reseeded alike, it drew trial 0's values again
    assert resumed.values not in (a.values, b.values), (resumed.values, a.values, b.values)


def test_the_median_rule_stops_a_trial_worse_than_the_finished_ones_median():
    s = sweep(earlyStopping={"rule": "median", "minTrials": 2, "startStep": 5})
    study = Search.open(s, None)
    for loss in (0.4, 0.6, 0.8):
        trial = study.ask(name)
        study.report(trial.number, 10, loss)
        study.complete(trial.number, loss)
    worse, better, early = study.ask(name), study.ask(name), study.ask(name)
    study.report(worse.number, 10, 0.7)
    study.report(better.number, 10, 0.5)
    study.report(early.number, 4, 5.0)  # before startStep: never judged
    assert study.should_stop(worse.number) and not study.should_stop(better.number)
    assert not study.should_stop(early.number)
    study.stop(worse.number, "stopped early")
    assert next(t for t in study.trials() if t.number == worse.number).state == PRUNED


def test_the_median_rule_judges_by_step_when_the_trials_report_other_steps():
    """Each evaluator evaluates the newest checkpoint: the finished trials reported steps 300 and
    900, 600 and 1200; a running trial at step 700 is judged against their best by 700."""
    s = sweep(
        earlyStopping={"rule": "median", "minTrials": 2}, objective={"metric": "accuracy", "direction": "maximize"}
    )
    study = Search.open(s, None)
    for reports, final in (({300: 0.80, 900: 0.95}, 0.95), ({600: 0.90, 1200: 0.97}, 0.97)):
        trial = study.ask(name)
        for step, value in reports.items():
            study.report(trial.number, step, value)
        study.complete(trial.number, final)
    worse, better, unjudged = study.ask(name), study.ask(name), study.ask(name)
    study.report(worse.number, 700, 0.5)  # the median of 0.80 and 0.90 by step 700: 0.85
    study.report(better.number, 700, 0.88)
    study.report(unjudged.number, 200, 0.1)  # no finished trial had reported by step 200
    assert study.should_stop(worse.number) and not study.should_stop(better.number)
    assert not study.should_stop(unjudged.number)


def test_without_the_rule_no_trial_stops():
    study = Search.open(sweep(), None)
    for loss in (0.1, 0.2, 0.3, 9.0):
        trial = study.ask(name)
        study.report(trial.number, 10, loss)
    assert not study.should_stop(3)
