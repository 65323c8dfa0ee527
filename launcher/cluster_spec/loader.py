"""Load cluster.yaml into a ClusterSpec; every failure becomes a SpecError naming file:line and field.

pydantic reports field paths; PyYAML's composed node tree knows where each path sits in the file.
"""

from __future__ import annotations

import difflib
import logging
import types
import typing
from pathlib import Path
from typing import Any, NamedTuple, Union

import yaml
from pydantic import BaseModel, ValidationError

from launcher.cluster_spec import code_entry
from launcher.cluster_spec.spec import (
    COUNTED_ROLES,
    SHARED_DISK,
    ClusterSpec,
    CrossFieldProblems,
    Strategy,
)
from launcher.code_shipping import code_bundle
from launcher.errors import Problem, SpecError
from launcher.k8s_contract import role_count_problems

Path_ = tuple[Union[str, int], ...]


# Rendered, a spec's values are repeated in every Job (env, args): a 10 MB spec rendered 13 MB
# of YAML in 22 s, far over what the API server stores per object (1.5 MB).
MAX_SPEC_BYTES = 256 * 1024


class Loaded(NamedTuple):
    """A spec and its code as its load packed it (None without `code:`): what plan() takes, so
    a command packs the code once, and what ships is the dir as it was at the load."""

    spec: ClusterSpec
    code: code_bundle.Bundle | None


def load_file(path: str | Path, *, shared_disk: bool = False) -> ClusterSpec:
    """load_file_packed's spec (its code checked by packing it, the archive not kept)."""
    return load_file_packed(path, shared_disk=shared_disk).spec


def load_text(
    text: str, filename: str = "<spec>", base_dir: Path | None = None, *, shared_disk: bool = False
) -> ClusterSpec:
    """load_text_packed's spec (its code checked by packing it, the archive not kept)."""
    return load_text_packed(text, filename, base_dir, shared_disk=shared_disk).spec


def load_data(
    data: Any, filename: str = "<dict>", base_dir: Path | None = None, *, shared_disk: bool = False
) -> ClusterSpec:
    """load_data_packed's spec (its code checked by packing it, the archive not kept)."""
    return load_data_packed(data, filename, base_dir, shared_disk=shared_disk).spec


def load_file_packed(path: str | Path, *, shared_disk: bool = False) -> Loaded:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError([Problem(f"cannot read the spec: {exc.strerror}", file=str(path))]) from None
    except UnicodeDecodeError:
        raise SpecError([Problem("the spec is not UTF-8 text", file=str(path))]) from None
    return load_text_packed(text, filename=str(path), base_dir=path.parent, shared_disk=shared_disk)


def load_text_packed(
    text: str, filename: str = "<spec>", base_dir: Path | None = None, *, shared_disk: bool = False
) -> Loaded:
    """The spec in `text`; its code dir (if any) is relative to `base_dir` (default: the
    working dir), checked here by packing it (pack_code). shared_disk: the spec runs as local
    processes on one disk, so the rules that make pods on different nodes share their
    checkpoints do not apply (spec.SHARED_DISK)."""
    if len(text.encode()) > MAX_SPEC_BYTES:
        raise SpecError(
            [
                Problem(
                    f"the spec is {len(text.encode()) // 1024} KiB, over the {MAX_SPEC_BYTES // 1024} KiB "
                    "a spec may have",
                    file=filename,
                    hint="large data belongs in files: code: for programs, a volume for data",
                )
            ]
        )
    data, lines, problems = _parse_yaml(text, filename)
    if problems:
        raise SpecError(problems)
    if not isinstance(data, dict):
        raise SpecError(
            [
                Problem(
                    "the spec must be a YAML mapping (name:, strategy:, roles: ...)",
                    file=filename,
                    line=1,
                    hint="see examples/ for complete specs",
                )
            ]
        )
    return _validate(data, lines, filename, shared_disk, base_dir)


def load_data_packed(
    data: Any, filename: str = "<dict>", base_dir: Path | None = None, *, shared_disk: bool = False
) -> Loaded:
    """A spec given as a mapping (the Python API): the same problems as from a file, without
    line numbers."""
    if not isinstance(data, dict):
        raise SpecError(
            [
                Problem(
                    f"the spec must be a mapping, not {type(data).__name__}",
                    file=filename,
                    hint="see examples/ for complete specs",
                )
            ]
        )
    return _validate(data, {}, filename, shared_disk, base_dir)


def _validate(data: dict, lines: dict[Path_, int], filename: str, shared_disk: bool, base_dir: Path | None) -> Loaded:
    try:
        spec = ClusterSpec.model_validate(data, context={SHARED_DISK: shared_disk})
    except ValidationError as exc:
        problems = _problems(exc, lines, filename)
        raise SpecError(problems + _role_problems_of_raw(data, problems, lines, filename)) from None
    return Loaded(spec, None) if spec.code is None else _with_code(spec, base_dir or Path.cwd(), lines, filename)


def _with_code(spec: ClusterSpec, base: Path, lines: dict[Path_, int], filename: str) -> Loaded:
    """The spec with code.path made absolute, once its code packs and holds the entry point (a
    load refuses what a submit would), and the code as packed. A dir out of `base` (the spec
    file's directory, else the working dir) needs `code.outside`."""
    if (outside := code_bundle.outside_of(spec.code, base)) is not None:
        message, hint = outside
        raise SpecError(
            [Problem(message, path="code.path", file=filename, line=_line_for(("code", "path"), lines), hint=hint)]
        )
    root = code_bundle.resolve(spec.code, base)
    code = pack_code(spec, root=root, filename=filename, lines=lines)
    if (note := code_entry.program_from_image(spec, code)) is not None:
        logging.getLogger("tfk8s.spec").info(f"note: {filename}: {note}")
    return Loaded(spec.model_copy(update={"code": spec.code.model_copy(update={"path": str(root)})}), code)


def pack_code(
    spec: ClusterSpec, *, root: Path | None = None, filename: str = "<spec>", lines: dict[Path_, int] | None = None
) -> code_bundle.Bundle | None:
    """The spec's code packed (None without `code:`): what plan() and render() take. The dir is
    `root`, else code.path (absolute after a load; relative: to the working dir). SpecError
    when it cannot ship or lacks the spec's entry point (code_entry)."""
    if spec.code is None:
        return None
    code, lines = spec.code, lines or {}
    root = root or code_bundle.resolve(code, Path.cwd())
    where = _line_for(("code", "path"), lines)
    try:
        bundle = code_bundle.pack_checked(root, code.exclude, code.path)
    except code_bundle.TooLarge as exc:
        raise SpecError([Problem(str(exc), path="code", file=filename, line=where, hint=exc.hint)]) from None
    except (ValueError, OSError) as exc:
        raise SpecError(
            [
                Problem(
                    f"{code.path!r} cannot be packed: {exc}",
                    path="code.path",
                    file=filename,
                    line=where,
                    hint="code is a directory, relative to the spec file's directory",
                )
            ]
        ) from None
    problems = [
        Problem(message, path=field, file=filename, hint=hint, line=_line_for(tuple(field.split(".")), lines))
        for field, (message, hint) in code_entry.problems(spec, bundle)
    ]
    if problems:
        raise SpecError(problems)
    return bundle


def _parse_yaml(text: str, filename: str) -> tuple[Any, dict[Path_, int], list[Problem]]:
    loader = None
    try:
        loader = yaml.SafeLoader(text)  # the reader already rejects control characters here
        node = loader.get_single_node()
        # before constructing: aliases may repeat a node exponentially (362 bytes made 374 MB)
        if node is not None and (too_big := _aliases_over_limit(node, filename)) is not None:
            return None, {}, [too_big]
        data = loader.construct_document(node) if node is not None else None
    except yaml.reader.ReaderError as exc:
        return (
            None,
            {},
            [
                Problem(
                    f"invalid YAML: {exc.reason} (character #x{exc.character:04x})",
                    file=filename,
                    hint="remove control characters from the file",
                )
            ],
        )
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        what = exc.problem or str(exc)
        return (
            None,
            {},
            [
                Problem(
                    f"invalid YAML: {what}", file=filename, line=line, hint="check indentation and quoting at that line"
                )
            ],
        )
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        # ValueError/TypeError: PyYAML constructing odd values (e.g. unhashable keys, bad timestamps).
        return None, {}, [Problem(f"invalid YAML: {exc}", file=filename)]
    finally:
        if loader is not None:
            loader.dispose()
    lines: dict[Path_, int] = {}
    problems: list[Problem] = []
    if node is not None:
        _index_lines(node, (), lines, problems, filename)
    return data, lines, problems


def too_large(text: str, filename: str, what: str = "a spec") -> Problem | None:
    """The size refusal every input gets before it is parsed (a spec, a TFJob file)."""
    size = len(text.encode())
    if size <= MAX_SPEC_BYTES:
        return None
    return Problem(
        f"the file is {size // 1024} KiB, over the {MAX_SPEC_BYTES // 1024} KiB {what} may have",
        file=filename,
        hint="large data belongs in files: code: for programs, a volume for data",
    )


def guarded_documents(text: str, filename: str, what: str = "a spec") -> list[tuple[yaml.Node, Any]]:
    """(node, value) of each YAML document of `text`, through the guards a spec gets: its size
    before parsing, aliases measured before they are expanded, nesting bounded; SpecError else."""
    if (big := too_large(text, filename, what)) is not None:
        raise SpecError([big])
    out = []
    loader = yaml.SafeLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None and (expanded := _aliases_over_limit(node, filename)) is not None:
                raise SpecError([expanded])
            out.append((node, loader.construct_document(node) if node is not None else None))
    except yaml.reader.ReaderError as exc:
        raise SpecError(
            [Problem(f"invalid YAML: {exc.reason} (character #x{exc.character:04x})", file=filename)]
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise SpecError(
            [Problem(f"invalid YAML: {exc.problem or exc}", file=filename, line=mark.line + 1 if mark else None)]
        ) from None
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        what_went_wrong = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise SpecError([Problem(f"invalid YAML: {what_went_wrong}", file=filename)]) from None
    finally:
        loader.dispose()
    return out


def _aliases_over_limit(root: yaml.Node, filename: str) -> Problem | None:
    """A Problem at the innermost node whose value, its aliases expanded, is over
    MAX_SPEC_BYTES (or refers to itself), else None. Sizes count each scalar's characters and
    one per node; an alias is the same node object as its anchor, so each is measured once."""
    sizes: dict[int, float] = {}

    def size(node: yaml.Node) -> float:
        if id(node) in sizes:
            return sizes[id(node)]
        if isinstance(node, yaml.ScalarNode):
            return sizes.setdefault(id(node), 1 + len(node.value))
        sizes[id(node)] = float("inf")  # while measuring: an alias back to it never ends
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
        sizes[id(node)] = 1 + sum(size(child) for child in children)
        return sizes[id(node)]

    if size(root) <= MAX_SPEC_BYTES:
        return None
    node, seen = root, {id(root)}
    while True:
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
        inner = next((c for c in children if not isinstance(c, yaml.ScalarNode) and size(c) > MAX_SPEC_BYTES), None)
        if inner is None or id(inner) in seen:  # innermost, or back at a node that holds itself
            break
        node = inner
        seen.add(id(node))
    endless = size(node) == float("inf")
    return Problem(
        "a YAML alias (*name) in this value refers to the value itself: it never ends"
        if endless
        else f"YAML aliases (*name) expand this value to over {MAX_SPEC_BYTES // 1024} KiB, the most a spec may have",
        file=filename,
        line=node.start_mark.line + 1,
        hint="write the values out, or repeat fewer aliases",
    )


def _index_lines(node: yaml.Node, path: Path_, lines: dict, problems: list, filename: str) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else repr(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                # PyYAML keeps the last value silently; a lost setting is worse than an error.
                problems.append(
                    Problem(
                        f"duplicate key {key!r} (first at line {seen[key]})",
                        path=_dotted(path + (key,)),
                        file=filename,
                        line=line,
                        hint="keep one of them",
                    )
                )
            seen[key] = line
            _index_lines(value_node, path + (key,), lines, problems, filename)
            lines[path + (key,)] = line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, path + (i,), lines, problems, filename)


def _dotted(path: typing.Iterable) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_for(path: Path_, lines: dict[Path_, int]) -> int | None:
    for cut in range(len(path), -1, -1):
        if path[:cut] in lines:
            return lines[path[:cut]]
    return None


def _problems(exc: ValidationError, lines: dict[Path_, int], filename: str) -> list[Problem]:
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        if err["type"] != "extra_forbidden":
            loc = tuple(p for p in loc if not _is_union_tag(p))
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, CrossFieldProblems):
            for dotted, message in cause.problems:
                path = tuple(int(p) if p.isdigit() else p for p in dotted.split("."))
                problems.append(Problem(message, path=dotted, file=filename, line=_line_for(path, lines)))
            continue
        problems.append(
            Problem(
                _message(err, loc),
                path=_dotted(loc),
                file=filename,
                line=_line_for(loc, lines),
                hint=_hint(err, loc),
            )
        )
    return problems


def _role_problems_of_raw(data: dict, found: list[Problem], lines: dict[Path_, int], filename: str) -> list[Problem]:
    """The replica-count rules, checked on the raw mapping when field errors kept pydantic
    from running the model's cross-field validator (which then reported nothing)."""
    if any(p.path.startswith("roles.") and p.path.endswith(".replicas") for p in found) or any(
        p.path == "strategy" for p in found
    ):
        return []  # the counts or the strategy are themselves wrong: nothing sound to check
    try:
        strategy = Strategy(data.get("strategy"))
    except ValueError:
        return []
    roles = data.get("roles") or {}
    if not isinstance(roles, dict):
        return []
    counts = {}
    for role in COUNTED_ROLES:
        role_data = roles.get(role) or {}
        value = role_data.get("replicas", 0) if isinstance(role_data, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            return []
        counts[role] = value
    reported = {p.path for p in found}
    out = []
    for dotted, message in role_count_problems(strategy, counts, own_command=data.get("command") is not None):
        if dotted in reported:
            continue
        path = tuple(dotted.split("."))
        out.append(Problem(message, path=dotted, file=filename, line=_line_for(path, lines)))
    return out


def _is_union_tag(part: Any) -> bool:
    # pydantic adds the member type's name to the loc of union errors (e.g. 'str', 'int').
    return isinstance(part, str) and part in {"str", "int", "float", "bool"}


def _message(err: dict, loc: Path_) -> str:
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    if err["type"] == "extra_forbidden":
        return f"unknown key {loc[-1]!r}" if loc else "unknown key"
    return msg


def _hint(err: dict, loc: Path_) -> str | None:
    if err["type"] == "extra_forbidden" and loc:
        allowed = _allowed_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
        if close:
            return f"did you mean {close[0]!r}?"
        if allowed:
            return "allowed keys: " + ", ".join(allowed)
    if err["type"] == "missing":
        return f"add {loc[-1]!r}" if loc else None
    if err["type"] == "bool_type":  # a strict boolean field: "false" in quotes is a string
        return "write true or false, without quotes"
    return None


def _allowed_keys(path: Path_) -> list[str]:
    """The camelCase keys accepted at `path`, by walking the pydantic model types."""
    annotation: Any = ClusterSpec
    for part in path:
        annotation = _unwrap_optional(annotation)
        origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = next((f for n, f in annotation.model_fields.items() if (f.alias or n) == part), None)
            if field is None:
                return []
            annotation = field.annotation
        elif origin in (list, dict):
            annotation = typing.get_args(annotation)[-1]
        else:
            return []
    annotation = _unwrap_optional(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [f.alias or n for n, f in annotation.model_fields.items()]
    return []


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation
