"""Kubernetes-shaped spec values (a role's volumes, affinity, partial pod template...) checked
against the kubernetes client's models: the keys the API knows for each type, by their
camelCase names, and the type of each value. The client's own deserializer drops an unknown key
silently, and a hand-written pydantic copy of PodSpec would drift from the API; the models'
`openapi_types` and `attribute_map` are the API's own shapes, generated from its OpenAPI spec.

Pure; the client is imported only when a spec has such a value (the API loads no client)."""

from __future__ import annotations

import difflib
import importlib
import re
from functools import lru_cache

# Problems: (dotted path from the spec's root, one-line message).
Problems = list[tuple[str, str]]
_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict\(str, (.+)\)$")
# Maps of quantities, where YAML's numbers (cpu: 2) are what a user writes.
_QUANTITY_MAPS = ("limits", "requests")
_PRIMITIVES = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}


@lru_cache(maxsize=1)
def _models():
    return importlib.import_module("kubernetes.client.models")


@lru_cache(maxsize=None)
def fields_of(type_name: str) -> dict[str, str]:
    """camelCase key -> type name of the kubernetes client model `type_name` (e.g. V1Volume)."""
    model = getattr(_models(), type_name)
    return {model.attribute_map[attr]: kind for attr, kind in model.openapi_types.items()}


def problems(value: object, type_name: str, path: str) -> Problems:
    """What in `value` is not a `type_name` (a client model name, `list[...]`, `dict(str, ...)`
    or a primitive), each at its dotted path below `path`."""
    if (match := _LIST.match(type_name)) is not None:
        if not isinstance(value, list):
            return [(path, f"must be a list, not {_kind(value)}")]
        return [p for i, item in enumerate(value) for p in problems(item, match.group(1), f"{path}.{i}")]
    if (match := _DICT.match(type_name)) is not None:
        if not isinstance(value, dict):
            return [(path, f"must be a mapping, not {_kind(value)}")]
        inner = match.group(1)
        if inner == "str" and path.rsplit(".", 1)[-1] in _QUANTITY_MAPS:
            inner = "float"  # a quantity: 2, 0.5 or "4Gi"
            return [(f"{path}.{k}", "must be a quantity") for k, v in value.items() if not _is(v, ("str", "float"))]
        return [p for key, item in value.items() for p in problems(item, inner, f"{path}.{key}")]
    if type_name == "object":  # IntOrString and free-form fields
        return []
    if type_name in _PRIMITIVES:
        if not _is(value, (type_name,)):
            return [(path, f"must be {'a string' if type_name == 'str' else 'a ' + type_name}, not {_kind(value)}")]
        return []
    if not isinstance(value, dict):
        return [(path, f"must be a mapping ({type_name[2:]}), not {_kind(value)}")]
    known = fields_of(type_name)
    out: Problems = []
    for key, item in value.items():
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"a {type_name[2:]} has none: see kubectl explain"
            out.append((f"{path}.{key}", f"unknown key {key!r} ({hint})"))
        else:
            out += problems(item, known[key], f"{path}.{key}")
    return out


def _is(value: object, type_names: tuple[str, ...]) -> bool:
    if isinstance(value, bool):
        return "bool" in type_names
    return any(isinstance(value, _PRIMITIVES[name]) for name in type_names)


def _kind(value: object) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
