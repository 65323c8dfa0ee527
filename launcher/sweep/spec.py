"""sweep.yaml: one pydantic model, camelCase keys like the cluster spec (docs/sweeps.md).

name: digits-batch
cluster: cluster.yaml            # or the cluster spec inline
parameters:
  - {name: batch, flag: --global-batch-size, int: {min: 16, max: 128, log: true}}
  - {name: lr, env: LEARNING_RATE, float: {min: 1.0e-4, max: 0.1, log: true}}
objective: {metric: accuracy, direction: maximize, goal: 0.99}
algorithm: tpe
parallelTrials: 2
maxTrials: 8
"""

from __future__ import annotations

import re
from typing import Literal, Union

from pydantic import Field, StrictBool, StrictFloat, StrictInt, field_validator, model_validator

from launcher.cluster_spec import names
from launcher.cluster_spec.role_spec import SpecModel
from launcher.cluster_spec.spec import CrossFieldProblems

ALGORITHMS = ("grid", "random", "tpe")
PARAMETER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
# A trial is the cluster `<sweep>-t<N>`; its generated names (`<name>-<role>-<index>`) must fit
# 63 characters, so the sweep's name leaves room for the trial number and the longest role.
MAX_SWEEP_NAME = 40

Number = Union[StrictInt, StrictFloat]
Value = Union[StrictBool, StrictInt, StrictFloat, str]


class IntRange(SpecModel):
    min: StrictInt = Field(description="the smallest value")
    max: StrictInt = Field(description="the largest value (included)")
    log: StrictBool = Field(False, description="sampled on a log scale (min must be 1 or more)")
    step: StrictInt = Field(1, ge=1, description="the values are min, min+step, ... (not with log)")

    @model_validator(mode="after")
    def _bounds(self) -> "IntRange":
        _check_bounds(self.min, self.max, self.log)
        if self.log and self.step != 1:
            raise ValueError("step is for a linear range: remove step, or log")
        return self


class FloatRange(SpecModel):
    min: Number = Field(description="the smallest value")
    max: Number = Field(description="the largest value")
    log: StrictBool = Field(False, description="sampled on a log scale (min must be above 0)")
    step: Number | None = Field(
        None, gt=0, description="the values are min, min+step, ... up to max: what a grid takes (not with log)"
    )

    @model_validator(mode="after")
    def _bounds(self) -> "FloatRange":
        _check_bounds(self.min, self.max, self.log)
        if self.log and self.step is not None:
            raise ValueError("step is for a linear range: remove step, or log")
        return self


def _check_bounds(low: float, high: float, log: bool) -> None:
    if low > high:
        raise ValueError(f"min {low} is above max {high}: swap them")
    if log and low <= 0:
        raise ValueError(f"a log range needs min above 0, not {low}: set min > 0, or remove log")


class Parameter(SpecModel):
    """One hyperparameter: where a trial's value goes (flag, env or placeholder) and what values
    it takes (int, float or values)."""

    name: str = Field(description="its name in `sweep status` and the search")
    flag: str | None = Field(
        None,
        description="a flag of `program.args` (the built-in worker) or of `args` (a command of your own): "
        "its value is replaced (`--flag V` or `--flag=V`), or `--flag V` appended",
    )
    env: str | None = Field(None, description="an `env` variable set to the value")
    placeholder: str | None = Field(
        None,
        description="a text replaced by the value wherever it appears in command, args, program.args and "
        "env values (a Katib import's `${trialParameters.X}`)",
    )
    int: IntRange | None = Field(None, description="a range of integers")
    float: FloatRange | None = Field(None, description="a range of numbers")
    values: list[Value] | None = Field(None, min_length=1, description="the values to choose from (categorical)")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not PARAMETER_NAME.match(value):
            raise ValueError(f"{value!r}: a parameter name is letters, digits, '_', '.' or '-', starting with a letter")
        return value

    @field_validator("flag")
    @classmethod
    def _flag(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("-") or "=" in value or " " in value):
            raise ValueError(f"{value!r} is not a flag: write it as it is passed, e.g. --global-batch-size")
        return value

    @model_validator(mode="after")
    def _one_each(self) -> "Parameter":
        targets = [k for k in ("flag", "env", "placeholder") if getattr(self, k) is not None]
        kinds = [k for k in ("int", "float", "values") if getattr(self, k) is not None]
        problems = []
        if len(targets) != 1:
            problems.append(("", f"set exactly one of flag, env and placeholder (it has {_listed(targets)})"))
        if len(kinds) != 1:
            problems.append(("", f"set exactly one of int, float and values (it has {_listed(kinds)})"))
        if problems:
            raise ValueError("; ".join(message for _, message in problems))
        return self

    @property
    def target(self) -> str:
        return next(f"{k} {getattr(self, k)}" for k in ("flag", "env", "placeholder") if getattr(self, k) is not None)


def _listed(keys: list[str]) -> str:
    return ", ".join(keys) if keys else "none"


class Objective(SpecModel):
    metric: str = Field(
        min_length=1,
        description="a metric of the evaluator's final evaluation (the built-in one: `accuracy`, `loss`); "
        "without an evaluator, `loss` is the training's last reported loss",
    )
    direction: Literal["minimize", "maximize"] = Field(description="which way is better")
    goal: Number | None = Field(None, description="a trial that reaches it ends the sweep (its running trials too)")


class EarlyStopping(SpecModel):
    rule: Literal["median"] = Field(
        description="`median`: a trial whose evaluation at a step is worse than the median of the finished "
        "trials' at that step is stopped (needs an evaluator: its evaluations are the intermediate values)"
    )
    min_trials: StrictInt = Field(3, ge=1, description="finished trials before the rule stops any")
    start_step: StrictInt = Field(0, ge=0, description="evaluations at earlier steps are never judged")


class SweepSpec(SpecModel):
    """sweep.yaml (docs/sweeps.md)."""

    name: str = Field(description=f"DNS-1035, at most {MAX_SWEEP_NAME} characters; trial N is cluster `<name>-tN`")
    cluster: str | dict = Field(description="the base cluster spec: a path (relative to sweep.yaml) or inline")
    parameters: list[Parameter] = Field(min_length=1, description="what each trial varies")
    objective: Objective
    algorithm: Literal["grid", "random", "tpe"] = Field(
        description="grid: every combination; random; tpe: Optuna's Tree-structured Parzen Estimator"
    )
    seed: StrictInt | None = Field(None, description="the search's random seed (random, tpe; grid's order)")
    parallel_trials: StrictInt = Field(1, ge=1, le=100, description="trials running at once")
    max_trials: StrictInt | None = Field(
        None, ge=1, le=10000, description="trials in all (grid: at most its combinations, the default)"
    )
    max_failed_trials: StrictInt = Field(3, ge=0, description="more failed trials than this end the sweep, Failed")
    early_stopping: EarlyStopping | None = Field(None, description="stop trials that do worse early on")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        problem = names.dns1035_problem(value)
        if problem is None and len(value) > MAX_SWEEP_NAME:
            problem = f"{len(value)} characters; a sweep's name has at most {MAX_SWEEP_NAME} (its trials' need room)"
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _cross_field(self) -> "SweepSpec":
        problems: list[tuple[str, str]] = []
        seen: dict[str, int] = {}
        for i, parameter in enumerate(self.parameters):
            if parameter.name in seen:
                problems.append(
                    (f"parameters.{i}.name", f"{parameter.name!r} is also parameters[{seen[parameter.name]}]")
                )
            seen.setdefault(parameter.name, i)
            if self.algorithm == "grid" and parameter.float is not None and parameter.float.step is None:
                problems.append(
                    (
                        f"parameters.{i}.float",
                        "a grid takes finitely many values: give the range a step, or list values",
                    )
                )
            if self.algorithm == "grid" and parameter.int is not None and parameter.int.log:
                problems.append((f"parameters.{i}.int.log", "a grid takes every integer of the range: remove log"))
        if self.algorithm != "grid" and self.max_trials is None:
            problems.append(("maxTrials", f"{self.algorithm} needs maxTrials: how many trials in all"))
        if problems:
            raise CrossFieldProblems(problems)
        return self
