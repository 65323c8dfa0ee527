"""A trial's cluster spec from the base spec and its values, and what its status says of the
objective (pure).

Trial N of sweep S is the cluster `S-tN`, labelled with its sweep and number; its model dir is
its own: the default one is per cluster name, and a base spec's own `checkpoint.dir` gets the
trial's name appended.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from launcher.cluster_spec.spec import SHARED_DISK, ClusterSpec
from launcher.errors import Problem, SpecError
from launcher.k8s_contract import LABEL_SWEEP, LABEL_SWEEP_TRIAL
from launcher.status.status import ClusterStatus
from launcher.sweep.spec import Objective, Parameter, SweepSpec


def trial_name(sweep: str, number: int) -> str:
    return f"{sweep}-t{number}"


def format_value(value: Any) -> str:
    """A value as a trial's argument or env text: true/false, integers as they are, floats
    exactly (repr: the value the search chose, not a rounding of it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def first_value(parameter: Parameter) -> Any:
    if parameter.values is not None:
        return parameter.values[0]
    return (parameter.int or parameter.float).min


def target_problems(sweep: SweepSpec, base: ClusterSpec) -> list[tuple[int, str]]:
    """(parameter index, why) for each parameter whose target the base spec cannot take."""
    problems = []
    texts = _texts(base)
    for i, parameter in enumerate(sweep.parameters):
        if parameter.placeholder is not None and not any(parameter.placeholder in t for t in texts):
            problems.append(
                (
                    i,
                    f"placeholder {parameter.placeholder!r} is in none of the base spec's command, args, "
                    "program.args and env values: write it where the value goes, or use flag or env",
                )
            )
        if (
            parameter.flag is not None
            and not base.builtin
            and base.command
            and any(parameter.flag in part for part in base.command)
        ):
            problems.append(
                (
                    i,
                    f"flag {parameter.flag} is in the base spec's command, where a flag's value is not replaced: "
                    "move it to args, or mark its value with a placeholder",
                )
            )
    return problems


def _texts(base: ClusterSpec) -> list[str]:
    return [
        *(base.command or []),
        *(base.args or []),
        *(base.program.args if base.program else []),
        *(entry.value for entry in base.env if entry.value is not None),
        *(entry.value for role in base.active_roles() for entry in base.pods(role).env if entry.value is not None),
        *(
            word
            for role in base.active_roles()
            for word in [*(base.pods(role).command or []), *(base.pods(role).args or [])]
        ),
    ]


def trial_spec(
    sweep: SweepSpec, base: ClusterSpec, number: int, values: dict[str, Any], *, shared_disk: bool = False
) -> ClusterSpec:
    """Trial `number`'s cluster: the base spec with each parameter's value at its target, its
    own name, labels and model dir. SpecError when the result is no valid cluster."""
    data = base.model_dump(by_alias=True)
    name = trial_name(sweep.name, number)
    data["name"] = name
    data["labels"] = {**data.get("labels", {}), LABEL_SWEEP: sweep.name, LABEL_SWEEP_TRIAL: str(number)}
    if base.checkpoint.dir is not None:  # a dir of its own, beside its siblings'
        data["checkpoint"]["dir"] = f"{base.checkpoint.dir.rstrip('/')}/{name}"
    for parameter in sweep.parameters:
        text = format_value(values[parameter.name])
        if parameter.env is not None:
            data["env"] = _with_env(list(data.get("env") or []), parameter.env, text)
        elif parameter.flag is not None:
            if base.builtin:
                program = data.get("program") or {}
                data["program"] = {**program, "args": with_flag(list(program.get("args") or []), parameter.flag, text)}
            else:
                data["args"] = with_flag(list(data.get("args") or []), parameter.flag, text)
        else:
            _replace_placeholder(data, parameter.placeholder, text)
    try:
        return ClusterSpec.model_validate(data, context={SHARED_DISK: shared_disk})
    except ValidationError as exc:
        raise SpecError(
            [
                Problem(err["msg"].removeprefix("Value error, "), path=".".join(str(p) for p in err["loc"]))
                for err in exc.errors(include_url=False)
            ]
        ) from None


def with_flag(args: list[str], flag: str, value: str) -> list[str]:
    """`args` with flag's value replaced: `--flag V` and `--flag=V` (each occurrence), else
    `--flag V` appended."""
    out, found, i = [], False, 0
    while i < len(args):
        arg = args[i]
        if arg == flag and i + 1 < len(args):
            out += [flag, value]
            found, i = True, i + 2
            continue
        if arg.startswith(flag + "="):
            out.append(f"{flag}={value}")
            found = True
        else:
            out.append(arg)
        i += 1
    return out if found else [*out, flag, value]


def _with_env(entries: list[dict], name: str, text: str) -> list[dict]:
    """`entries` (an env list) with `name` set to `text`: in its place when there, else last."""
    if any(entry["name"] == name for entry in entries):
        return [{"name": name, "value": text} if entry["name"] == name else entry for entry in entries]
    return [*entries, {"name": name, "value": text}]


def _replace_placeholder(data: dict, placeholder: str, text: str) -> None:
    def swap(items):
        return None if items is None else [item.replace(placeholder, text) for item in items]

    def swap_env(entries):
        return [
            {**entry, "value": entry["value"].replace(placeholder, text)} if entry.get("value") is not None else entry
            for entry in entries or []
        ]

    data["command"] = swap(data.get("command"))
    data["args"] = swap(data.get("args"))
    if data.get("program"):
        data["program"] = {**data["program"], "args": swap(data["program"].get("args") or [])}
    data["env"] = swap_env(data.get("env"))
    for role in (data.get("roles") or {}).values():  # an imported TFJob's env and command are its roles'
        if isinstance(role, dict):
            role["env"] = swap_env(role.get("env"))
            for key in ("command", "args"):
                if role.get(key) is not None:
                    role[key] = swap(role[key])


# --- the objective ------------------------------------------------------------------------


def objective_value(status: ClusterStatus, objective: Objective) -> tuple[float | None, str]:
    """The objective's value of a trial that succeeded, from the progress lines `status` reads:
    the metric of the evaluator's evaluation of the final checkpoint; without evaluations,
    `loss` is the training's last loss. (None, why) when the trial reported no such value."""
    training = status.training
    metric = objective.metric
    if training is not None and training.history:
        final = [e for e in training.history if e.final]
        if not final:
            return None, "the evaluator reported no evaluation of the final checkpoint"
        if metric not in final[-1].metrics:
            have = ", ".join(sorted(final[-1].metrics)) or "none"
            return None, f"the final evaluation has no metric {metric!r} (it has: {have})"
        return final[-1].metrics[metric], f"final evaluation {final[-1].checkpoint}"
    if metric == "loss" and training is not None and training.loss is not None:
        return training.loss, f"training loss at step {training.step}"
    return None, f"no metric {metric!r} was reported: the cluster has no evaluator, or it evaluated nothing"


def intermediate_values(status: ClusterStatus, metric: str) -> list[tuple[int, float]]:
    """(step, value) of each evaluation that has the metric: what the median rule judges."""
    if status.training is None:
        return []
    return [(e.step, e.metrics[metric]) for e in status.training.history if e.step is not None and metric in e.metrics]
