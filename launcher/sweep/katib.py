"""A Katib Experiment (kubeflow.org/v1beta1) whose trial is a TFJob, as a sweep.yaml (pure).

    python -m launcher import experiment.yaml > sweep.yaml

The parameters (int, double, categorical, discrete feasibleSpace; logUniform is a log range),
the objective (type, goal, objectiveMetricName), the algorithm (random, grid, tpe; others
refused), medianstop early stopping, the trial counts; the trialTemplate's TFJob converted by the
TFJob import (launcher/cluster_spec/tfjob/document.py), each `${trialParameters.X}` placeholder
becoming the parameter X references. Every field whose meaning changes is a note; every field
that cannot be mapped a Problem at its line. Katib's metrics collectors are not run: a trial's
objective is read from its progress lines as `status` reads them (docs/sweeps.md), and a note
says which collector the Experiment named.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from launcher.cluster_spec import loader
from launcher.cluster_spec.tfjob import document as tfjob
from launcher.errors import Problem, SpecError
from launcher.sweep import load

API_VERSION = "kubeflow.org/v1beta1"
KIND = "Experiment"
ALGORITHMS = {"random": "random", "grid": "grid", "tpe": "tpe"}
COLLECTOR_NOTE = (
    "Katib's {kind} collector is not run: the objective is the trial's evaluator's final evaluation "
    "(its tfk8s-progress `evaluated` lines, as `status` reads them); a program of your own prints those "
    "lines, or the trial runs the built-in evaluator (docs/sweeps.md#the-objective)"
)


@dataclass(frozen=True)
class ImportedSweep:
    name: str
    text: str
    notes: tuple[str, ...]


def holds_experiment(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and data.get("kind") == KIND
        and str(data.get("apiVersion", "")).startswith("kubeflow.org/")
    )


def holds_experiment_file(path: str | Path) -> bool:
    """Whether the YAML file at `path` is a Katib Experiment (not a TFJob or a cluster.yaml)."""
    try:
        documents = list(yaml.safe_load_all(Path(path).read_text()))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False  # the TFJob import says what is wrong with it
    return len(documents) == 1 and holds_experiment(documents[0])


def import_file(path: str | Path) -> ImportedSweep:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Problem(f"cannot read the Experiment file: {exc}", file=str(path))]) from None
    return import_text(text, str(path))


def import_text(text: str, filename: str) -> ImportedSweep:
    """The Experiment in `text` as a sweep.yaml; SpecError with each field that cannot be mapped."""
    data, lines, problems = loader._parse_yaml(text, filename)
    if problems:
        raise SpecError(problems)
    return _Import(data, lines, filename).run()


class _Import:
    def __init__(self, data: Any, lines: dict, filename: str):
        self.data, self.lines, self.filename = data, lines, filename
        self.problems: list[Problem] = []
        self.notes: list[str] = []
        self.refused_parameters: set[str] = set()  # refused already: no second refusal of their references

    def refuse(self, dotted: str, why: str, hint: str | None = None) -> None:
        self.problems.append(Problem(why, path=dotted, file=self.filename, line=self._line(dotted), hint=hint))

    def note(self, dotted: str, text: str) -> None:
        self.notes.append(f"{self.filename}:{self._line(dotted) or '-'}: {dotted}: {text}")

    def _line(self, dotted: str) -> int | None:
        return loader._line_for(tuple(int(p) if p.isdigit() else p for p in dotted.split(".")), self.lines)

    def run(self) -> ImportedSweep:
        data = self.data
        if not holds_experiment(data) or data.get("apiVersion") != API_VERSION:
            kind, version = (data.get("kind"), data.get("apiVersion")) if isinstance(data, dict) else (None, None)
            raise SpecError(
                [
                    Problem(
                        f"not a {KIND} of {API_VERSION} (kind {kind!r}, apiVersion {version!r})",
                        file=self.filename,
                        line=1,
                    )
                ]
            )
        meta, spec = data.get("metadata") or {}, data.get("spec") or {}
        name = meta.get("name")
        sweep: dict[str, Any] = {"name": name}
        parameters = self._parameters(spec.get("parameters") or [])
        sweep["objective"] = self._objective(spec.get("objective") or {})
        sweep.update(self._algorithm(spec.get("algorithm") or {}))
        if spec.get("earlyStopping"):
            sweep["earlyStopping"] = self._early_stopping(spec["earlyStopping"])
        sweep["parallelTrials"] = int(spec.get("parallelTrialCount", 3))  # Katib's default
        if "parallelTrialCount" not in spec:
            self.note("spec", "no parallelTrialCount: 3, Katib's default")
        if "maxTrialCount" in spec:
            sweep["maxTrials"] = int(spec["maxTrialCount"])
        if "maxFailedTrialCount" in spec:
            sweep["maxFailedTrials"] = int(spec["maxFailedTrialCount"])
        collector = ((spec.get("metricsCollectorSpec") or {}).get("collector") or {}).get("kind", "StdOut")
        self.note(
            "spec.metricsCollectorSpec" if spec.get("metricsCollectorSpec") else "spec",
            COLLECTOR_NOTE.format(kind=collector),
        )
        if "resumePolicy" in spec:
            self.note("spec.resumePolicy", "not used: a sweep resumes when `sweep` runs it again")
        cluster_text = self._trial_template(spec.get("trialTemplate") or {}, meta, parameters)
        if self.problems:
            raise SpecError(self.problems)
        sweep["parameters"] = parameters
        return ImportedSweep(name, self._written(sweep, cluster_text), tuple(self.notes))

    def _parameters(self, items: list) -> list[dict]:
        out = []
        for i, item in enumerate(items):
            at = f"spec.parameters.{i}"
            kind, space = item.get("parameterType"), item.get("feasibleSpace") or {}
            parameter: dict[str, Any] = {"name": item.get("name")}
            distribution = space.get("distribution", "uniform")
            if distribution not in ("uniform", "logUniform"):
                self.refuse(
                    f"{at}.feasibleSpace.distribution", f"{distribution!r}: a sweep samples uniform and logUniform only"
                )
                continue
            try:
                if kind in ("int", "double"):
                    number = int if kind == "int" else float
                    bounds = {"min": number(space["min"]), "max": number(space["max"])}
                    if "step" in space:
                        bounds["step"] = number(space["step"])
                    if distribution == "logUniform":
                        bounds["log"] = True
                    parameter["int" if kind == "int" else "float"] = bounds
                elif kind in ("categorical", "discrete"):
                    values = list(space.get("list") or [])
                    parameter["values"] = (
                        [_number(v) for v in values] if kind == "discrete" else [str(v) for v in values]
                    )
                else:
                    raise LookupError(f"{kind!r} is not int, double, categorical or discrete")
            except KeyError as exc:
                self.refuse(f"{at}.feasibleSpace", f"a {kind} parameter needs feasibleSpace.{exc.args[0]}")
                self.refused_parameters.add(item.get("name"))
                continue
            except LookupError as exc:
                self.refuse(f"{at}.parameterType", str(exc))
                self.refused_parameters.add(item.get("name"))
                continue
            except ValueError as exc:
                self.refuse(f"{at}.feasibleSpace", f"not a number: {exc}")
                self.refused_parameters.add(item.get("name"))
                continue
            out.append(parameter)
        return out

    def _objective(self, objective: dict) -> dict:
        out = {"metric": objective.get("objectiveMetricName"), "direction": objective.get("type")}
        if objective.get("goal") is not None:
            out["goal"] = float(objective["goal"])
        if objective.get("additionalMetricNames"):
            self.note("spec.objective.additionalMetricNames", "not kept: `sweep status` shows the objective's metric")
        if objective.get("metricStrategies"):
            self.note(
                "spec.objective.metricStrategies",
                "not used: the objective is the metric of the evaluation of the final checkpoint (Katib's `latest`)",
            )
        return out

    def _algorithm(self, algorithm: dict) -> dict:
        name = algorithm.get("algorithmName")
        if name not in ALGORITHMS:
            self.refuse(
                "spec.algorithm.algorithmName",
                f"{name!r}: a sweep searches by {', '.join(ALGORITHMS)}",
                hint="change it to one of those, or run this Experiment with Katib",
            )
            return {}
        out: dict[str, Any] = {"algorithm": ALGORITHMS[name]}
        for i, setting in enumerate(algorithm.get("algorithmSettings") or []):
            if setting.get("name") == "random_state":
                out["seed"] = int(setting["value"])
            else:
                self.note(
                    f"spec.algorithm.algorithmSettings.{i}", f"{setting.get('name')!r}: not used (Optuna's defaults)"
                )
        return out

    def _early_stopping(self, early: dict) -> dict:
        if early.get("algorithmName") != "medianstop":
            self.refuse(
                "spec.earlyStopping.algorithmName",
                f"{early.get('algorithmName')!r}: a sweep stops early by medianstop only",
            )
            return {}
        out: dict[str, Any] = {"rule": "median"}
        for i, setting in enumerate(early.get("algorithmSettings") or []):
            key = {"min_trials_required": "minTrials", "start_step": "startStep"}.get(setting.get("name"))
            if key is None:
                self.note(f"spec.earlyStopping.algorithmSettings.{i}", f"{setting.get('name')!r}: not used")
            else:
                out[key] = int(setting["value"])
        return out

    def _trial_template(self, template: dict, meta: dict, parameters: list[dict]) -> str | None:
        at = "spec.trialTemplate"
        trial = template.get("trialSpec")
        if trial is None:
            self.refuse(at, "only an inline trialSpec is read (not a configMap)", hint="inline the TFJob as trialSpec")
            return None
        if trial.get("kind") != "TFJob":
            self.refuse(f"{at}.trialSpec.kind", f"{trial.get('kind')!r}: the trial must be a TFJob")
            return None
        for key in ("primaryContainerName", "primaryPodLabels", "successCondition", "failureCondition", "retain"):
            if key in template:
                self.note(
                    f"{at}.{key}",
                    "not needed: a trial's outcome is its cluster's phase, its success role's exit (docs/lifecycle.md)",
                )
        by_name = {p["name"]: p for p in parameters}
        used = set()
        for i, item in enumerate(template.get("trialParameters") or []):
            reference = item.get("reference")
            parameter = by_name.get(reference)
            if parameter is None and reference in self.refused_parameters:
                continue
            if parameter is None:
                self.refuse(f"{at}.trialParameters.{i}.reference", f"{reference!r} is no parameter of spec.parameters")
                continue
            if "placeholder" in parameter:
                self.refuse(
                    f"{at}.trialParameters.{i}",
                    f"parameter {reference!r} is referenced twice: a sweep puts each parameter in one place",
                )
                continue
            parameter["placeholder"] = "${trialParameters." + str(item.get("name")) + "}"
            used.add(reference)
        for i, parameter in enumerate(parameters):
            if parameter["name"] not in used:
                self.refuse(
                    f"spec.parameters.{i}",
                    f"{parameter['name']!r} is referenced by no trialParameters: no trial would use it",
                )
        job = {**trial, "metadata": {**(trial.get("metadata") or {}), "name": meta.get("name")}}
        if meta.get("namespace"):
            job["metadata"]["namespace"] = meta["namespace"]
        label = f"{self.filename} ({at}.trialSpec)"
        try:
            imported = tfjob.import_text(yaml.safe_dump(job, sort_keys=False), label)
        except SpecError as exc:
            for p in exc.problems:
                dotted = f"{at}.trialSpec.{p.path}" if p.path else f"{at}.trialSpec"
                self.problems.append(
                    Problem(p.message, path=dotted, file=self.filename, line=self._line(dotted), hint=p.hint)
                )
            return None
        for text in imported[0].notes:  # `<label>:<line>: <TFJob path>: <note>`, at its line here
            _, source, note = text.removeprefix(f"{label}:").split(": ", 2)
            self.note(f"{at}.trialSpec.{source}", note)
        return imported[0].text

    def _written(self, sweep: dict, cluster_text: str) -> str:
        head = [f"# imported from {self.filename} ({KIND} {sweep['name']}) by `python -m launcher import`"]
        body = yaml.safe_dump({k: sweep[k] for k in ("name",)}, sort_keys=False)
        cluster = "cluster:\n" + "".join(f"  {line}\n" if line else "\n" for line in cluster_text.splitlines())
        rest = yaml.safe_dump(
            {k: v for k, v in sweep.items() if k != "name"}, sort_keys=False, default_flow_style=None, width=100
        )
        text = "\n".join(head) + "\n" + body + cluster + rest
        try:  # what the Experiment says, a sweep may still refuse
            load.load_text(text, f"{self.filename} as sweep.yaml")
        except SpecError as exc:
            raise SpecError(
                [
                    Problem(f"as sweep.yaml, {p.path or 'the sweep'}: {p.message}", file=self.filename, hint=p.hint)
                    for p in exc.problems
                ]
            ) from None
        return text


def _number(value: Any) -> int | float:
    text = str(value)
    try:
        return int(text)
    except ValueError:
        return float(text)
