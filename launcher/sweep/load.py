"""Load sweep.yaml into a SweepSpec and its base cluster spec; every failure is a SpecError
naming file:line and field, as the cluster spec's loader does (launcher/cluster_spec/loader.py,
whose YAML reading and error mapping this reuses)."""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

from launcher.cluster_spec import loader
from launcher.cluster_spec.loader import Loaded
from launcher.cluster_spec.spec import CrossFieldProblems
from launcher.cluster_spec.tfjob import document as tfjob
from launcher.errors import Problem, SpecError
from launcher.sweep import trials
from launcher.sweep.spec import SweepSpec


class LoadedSweep(NamedTuple):
    sweep: SweepSpec
    base: Loaded  # the base cluster spec, validated, its code packed
    filename: str


def load_file(path: str | Path, *, shared_disk: bool = False) -> LoadedSweep:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError([Problem(f"cannot read the sweep: {exc.strerror}", file=str(path))]) from None
    except UnicodeDecodeError:
        raise SpecError([Problem("the sweep is not UTF-8 text", file=str(path))]) from None
    return load_text(text, str(path), path.parent, shared_disk=shared_disk)


def load_text(text: str, filename: str = "<sweep>", base_dir: Path | None = None, *, shared_disk: bool = False):
    """The sweep in `text`; a `cluster:` path is relative to base_dir (default: the working
    dir). shared_disk: its trials run as local processes (launcher/cluster_spec/spec.py)."""
    data, lines, problems = loader._parse_yaml(text, filename)
    if problems:
        raise SpecError(problems)
    return load_data(data, filename, base_dir, lines=lines, shared_disk=shared_disk)


def load_data(
    data: Any,
    filename: str = "<dict>",
    base_dir: Path | None = None,
    *,
    lines: dict | None = None,
    shared_disk: bool = False,
) -> LoadedSweep:
    lines = lines or {}
    if not isinstance(data, dict):
        raise SpecError(
            [Problem("a sweep is a YAML mapping (name:, cluster:, parameters:, objective:, algorithm:)", file=filename)]
        )
    try:
        sweep = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_problems(exc, lines, filename)) from None
    base = _base(sweep, filename, base_dir or Path.cwd(), lines, shared_disk)
    loaded = LoadedSweep(sweep, base, filename)
    _check_trial(loaded, lines, shared_disk)
    return loaded


UNION_TAGS = {"str", "int", "float", "bool"}  # pydantic's names of a union's members in an error's loc


def _problems(exc: ValidationError, lines: dict, filename: str) -> list[Problem]:
    """pydantic's errors at their field paths and lines. As the cluster loader's, but a
    parameter's own `int` and `float` keys are kept in the path (they are no union tags there),
    and an unknown key's hint names the sweep's keys."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(
            part
            for i, part in enumerate(err["loc"])
            if part not in UNION_TAGS
            or err["type"] == "extra_forbidden"
            or err["loc"][i - 2 : i - 1] == ("parameters",)
        )
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, CrossFieldProblems):
            for dotted, message in cause.problems:
                path = tuple(int(p) if p.isdigit() else p for p in dotted.split("."))
                problems.append(Problem(message, path=loader._dotted(path), file=filename, line=_line(path, lines)))
            continue
        hint = None
        if err["type"] == "extra_forbidden" and loc:
            allowed = _allowed_keys([p for p in loc[:-1] if isinstance(p, str)])
            close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
            hint = (
                f"did you mean {close[0]!r}?" if close else ("allowed keys: " + ", ".join(allowed) if allowed else None)
            )
        elif err["type"] == "missing" and loc:
            hint = f"add {loc[-1]!r}"
        problems.append(
            Problem(
                loader._message(err, loc), path=loader._dotted(loc), file=filename, line=_line(loc, lines), hint=hint
            )
        )
    return problems


def _line(path: tuple, lines: dict) -> int | None:
    """The line of the innermost part of `path` the file has; None for a key it lacks at its top."""
    line = loader._line_for(path, lines)
    return None if line is not None and path[:1] not in lines else line


def _allowed_keys(parts: list[str]) -> list[str]:
    model: Any = SweepSpec
    for part in parts:
        if part.isdigit():
            continue
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return []
        model = next((a for a in _members(field.annotation) if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if model is None:
            return []
    return [f.alias or n for n, f in model.model_fields.items()]


def _members(annotation: Any) -> list:
    """The types an annotation names: Optional[X] and list[X] are X."""
    args = typing.get_args(annotation)
    return [m for a in args for m in _members(a)] if args else [annotation]


def _base(sweep: SweepSpec, filename: str, base_dir: Path, lines: dict, shared_disk: bool) -> Loaded:
    if isinstance(sweep.cluster, str):
        path = base_dir / sweep.cluster
        if not path.is_file():
            raise SpecError(
                [
                    Problem(
                        f"{str(path)!r} is not a file",
                        path="cluster",
                        file=filename,
                        line=loader._line_for(("cluster",), lines),
                        hint="a cluster.yaml path relative to the sweep file, or the cluster spec inline",
                    )
                ]
            )
        if tfjob.holds_tfjob(path):  # as submit takes one: converted as `import` does
            return tfjob.load_one_packed(path, shared_disk=shared_disk, taker="a sweep's base")[0]
        return loader.load_file_packed(path, shared_disk=shared_disk)
    inner = {path[1:]: line for path, line in lines.items() if path[:1] == ("cluster",)}
    try:
        return loader.load_data_packed(sweep.cluster, filename, base_dir, shared_disk=shared_disk)
    except SpecError as exc:
        raise SpecError([_under_cluster(p, inner) for p in exc.problems]) from None


def _under_cluster(problem: Problem, inner: dict) -> Problem:
    """A problem of the inline cluster spec, at its path and line in the sweep file."""
    parts = tuple(int(p) if p.isdigit() else p for p in problem.path.replace("[", ".").replace("]", "").split(".") if p)
    line = loader._line_for(parts, inner) if parts else inner.get(())
    path = f"cluster.{problem.path}" if problem.path else "cluster"
    return Problem(problem.message, path=path, file=problem.file, line=line, hint=problem.hint)


def _check_trial(loaded: LoadedSweep, lines: dict, shared_disk: bool) -> None:
    """A trial of the first values is a valid cluster: a parameter's target must exist, and the
    trials' names must fit (refused now, not at the first submit)."""
    sweep = loaded.sweep
    problems = [
        Problem(message, path=f"parameters[{i}]", file=loaded.filename, line=_line(("parameters", i), lines))
        for i, message in trials.target_problems(sweep, loaded.base.spec)
    ]
    if problems:
        raise SpecError(problems)
    first = {p.name: trials.first_value(p) for p in sweep.parameters}
    try:
        trials.trial_spec(sweep, loaded.base.spec, 0, first, shared_disk=shared_disk)
    except SpecError as exc:
        raise SpecError(
            [
                Problem(
                    f"trial {trials.trial_name(sweep.name, 0)} (the first values) is no valid cluster: "
                    f"{p.path or 'the spec'}: {p.message}",
                    path="cluster",
                    file=loaded.filename,
                    line=loader._line_for(("cluster",), lines),
                    hint=p.hint,
                )
                for p in exc.problems
            ]
        ) from None
