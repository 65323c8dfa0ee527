"""TFJob files in, cluster.yaml text out (pure): the TFJobs of a file (several documents, or a
`List`), each converted (convert.py) and written as YAML with a comment above every key whose
meaning changed; a refusal is a Problem at its line in the TFJob file.

    python -m launcher import tfjob.yaml > cluster.yaml
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from launcher.cluster_spec import loader
from launcher.cluster_spec.role_spec import RoleSpec
from launcher.cluster_spec.spec import ClusterSpec
from launcher.cluster_spec.tfjob import image_config
from launcher.cluster_spec.tfjob.cluster import ImageCommand
from launcher.cluster_spec.tfjob.convert import API_VERSION, KIND, Note, convert, generated_name, is_tfjob
from launcher.errors import Problem, SpecError

Lines = dict[tuple, int]


@dataclass(frozen=True)
class Imported:
    """One TFJob as a cluster.yaml: `text` (with its comments), `notes` for stderr."""

    name: str
    text: str
    notes: tuple[str, ...]


# A file too large, too aliased or too nested to parse is still a TFJob file when it says so.
_SAYS_TFJOB = re.compile(rf"^kind:\s*[\"']?{KIND}[\"']?\s*$", re.MULTILINE)


def holds_tfjob(path: str | Path) -> bool:
    """Whether the YAML file at `path` holds a TFJob (or a List of them), not a cluster.yaml."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return False  # the spec loader says what is wrong with it
    try:
        documents = [value for _, value in loader.guarded_documents(text, str(path), "a TFJob file")]
    except SpecError:
        return bool(_SAYS_TFJOB.search(text))  # then import says what is wrong with it
    return any(is_tfjob(item) for document in documents for item in _items(document))


def import_file(path: str | Path) -> list[Imported]:
    """Every TFJob of the file as a cluster.yaml; SpecError with each refusal at its line."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Problem(f"cannot read the TFJob file: {exc}", file=str(path))]) from None
    return import_text(text, str(path), image_command=image_config.local_image_command)


def load_one_packed(
    path: str | Path, *, shared_disk: bool = False, taker: str = "a submit"
) -> tuple[loader.Loaded, tuple[str, ...]]:
    """The file's one TFJob loaded as `import` converts it, and its notes (submit, a sweep's
    base: `taker`, who takes one); SpecError for a file of several."""
    imported = import_file(path)
    if len(imported) != 1:
        hint = f"python -m launcher import {path} writes each as a cluster.yaml; give them one by one"
        raise SpecError([Problem(f"holds {len(imported)} TFJobs; {taker} takes one", file=str(path), hint=hint)])
    text = imported[0].text
    return loader.load_text_packed(text, f"{path} as cluster.yaml", shared_disk=shared_disk), imported[0].notes


def import_text(
    text: str,
    filename: str,
    make_name: Callable[[str], str] = generated_name,
    image_command: ImageCommand | None = None,
) -> list[Imported]:
    """Every TFJob of `text` as a cluster.yaml; SpecError with every refusal of every TFJob at
    once, each at its TFJob path and line (make_name, image_command: see convert)."""
    jobs, others = _tfjobs(text, filename)
    out, problems = [], []
    for job, lines, prefix in jobs:
        converted = convert(job, make_name, image_command)
        refused = [
            Problem(r.why, path=r.source, file=filename, line=_line(lines, prefix, r.source)) for r in converted.refused
        ]
        problems += refused
        if not converted.spec.get("roles"):
            continue
        notes = tuple(
            dict.fromkeys(
                f"{filename}:{_line(lines, prefix, n.source) or '-'}: {n.source}: {n.text}" for n in converted.notes
            )
        )
        written = _commented(converted.spec, converted.notes, filename)
        try:  # what the TFJob says, tfk8s may still refuse (an evaluator without shared checkpoints)
            loader.load_text(written, filename=f"{filename} as cluster.yaml")
        except SpecError as exc:
            seen = {p.path for p in refused}
            for p in exc.problems:
                source = converted.source_of(p.path or "")
                if refused and (p.path or "").split(".")[0] in ("command", "args", "roles", "workingDir"):
                    continue  # what a refused field left out of the cluster.yaml: said once, above
                if source in seen:
                    continue
                problems.append(
                    Problem(
                        f"{p.message} (tfk8s's {p.path or 'spec'})",
                        path=source,
                        file=filename,
                        line=_line(lines, prefix, source),
                        hint=p.hint,
                    )
                )
            continue
        if refused:
            continue
        out.append(Imported(converted.spec["name"], written, notes))
    if problems:
        raise SpecError(problems)
    if not out:
        raise SpecError([Problem(f"no {KIND} ({API_VERSION}) in the file", file=filename)])
    if others:  # what else the file holds is not dropped unsaid
        out[0] = Imported(out[0].name, out[0].text, (*others, *out[0].notes))
    return out


def _tfjobs(text: str, filename: str) -> tuple[list[tuple[dict, Lines, tuple]], list[str]]:
    """(TFJob, the file's line index, the TFJob's path in its document) for each TFJob, and a
    note for each other object of the file (a claim, a ConfigMap: tfk8s creates none of them)."""
    found, others = [], []
    for node, document in loader.guarded_documents(text, filename, "a TFJob file"):
        lines: Lines = {}
        if node is not None:
            _index(node, (), lines)
        items = _items(document)
        prefix_of = (lambda i: ("items", i)) if isinstance(document, dict) and document.get("kind") == "List" else None
        for i, item in enumerate(items):
            if is_tfjob(item):
                found.append((item, lines, prefix_of(i) if prefix_of else ()))
            elif isinstance(item, dict):
                kind, name = item.get("kind"), (item.get("metadata") or {}).get("name")
                line = _line(lines, prefix_of(i) if prefix_of else (), "kind")
                others.append(f"{filename}:{line}: {kind} {name}: not a TFJob, left out: apply it yourself")
    return found, others


def _items(document: object) -> list:
    if isinstance(document, dict) and document.get("kind") == "List":
        return list(document.get("items") or [])
    return [document]


def _index(node: yaml.Node, path: tuple, lines: Lines) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _index(value, path + (key.value,), lines)
            lines[path + (key.value,)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, path + (i,), lines)


def _line(lines: Lines, prefix: tuple, dotted: str) -> int | None:
    """The line of a TFJob path ("spec.tfReplicaSpecs.PS.template", or several: the first)."""
    first = dotted.split(", ")[0]
    parts = tuple(int(p) if p.isdigit() else p for p in first.split("."))
    path = prefix + parts
    for cut in range(len(path), len(prefix) - 1, -1):
        if path[:cut] in lines:
            return lines[path[:cut]]
    return None


class _NoAliases(yaml.SafeDumper):
    """Each value written out where it is: a shared anchor (&id001) would make an edit of one
    role's block an edit of another's."""

    def ignore_aliases(self, data) -> bool:
        return True


def _in_model_order(spec: dict) -> dict:
    """The keys in the order docs/spec.md lists them (the model's), each role's too."""
    ordered = _ordered(spec, ClusterSpec)
    if "roles" in ordered:
        ordered["roles"] = {role: _ordered(fields, RoleSpec) for role, fields in ordered["roles"].items()}
    return ordered


def _ordered(data: dict, model) -> dict:
    keys = [field.alias or name for name, field in model.model_fields.items()]
    return {key: data[key] for key in sorted(data, key=lambda k: keys.index(k) if k in keys else len(keys))}


def _commented(spec: dict, notes: list[Note], filename: str) -> str:
    """The spec as YAML, each note a comment above the key it is about (the head: the rest)."""
    text = yaml.dump(_in_model_order(spec), Dumper=_NoAliases, sort_keys=False, default_flow_style=None, width=100)
    lines = text.splitlines()
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    index: Lines = {}
    _index(node, (), index)
    above: dict[int, list[str]] = {}
    head = [f"# imported from {filename} ({KIND} {spec.get('name')}) by `python -m launcher import`"]
    for note in notes:
        at = index.get(tuple(note.target.split("."))) if note.target else None
        if at is None:
            head.append(f"# {note.source}: {note.text}")
        else:
            above.setdefault(at, []).append(f"{note.source}: {note.text}")
    out = [*head]
    for number, line in enumerate(lines, start=1):
        indent = line[: len(line) - len(line.lstrip())]
        out += [f"{indent}# {comment}" for comment in above.get(number, [])]
        out.append(line)
    return "\n".join(out) + "\n"
