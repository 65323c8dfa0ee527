"""values.schema.json for charts/tfk8s, generated from the pydantic ClusterSpec.

Helm validates every install/upgrade/template/lint against the chart's values.schema.json, so
bad values fail before anything is created. The schema is the model's own JSON Schema plus what
the model checks in validators and JSON Schema can say: name/namespace/env-name/quantity
patterns, known resource names, exactly one volume source, checkpoint dir rules, and the
cross-field rules (role counts per strategy, args need command, command excludes program, the
evaluator needs shared checkpoint storage). Rules JSON Schema cannot state (a dir under the
volume's mountPath, generated names too long, reserved env names, GPU requests == limits) are
checked by the chart's templates/_validate.tpl with the launcher's messages.

Two chart values differ from the model on purpose: `name` and `namespace` may be empty, meaning
the Helm release name and the release namespace.

    python -m launcher.helm_schema > charts/tfk8s/values.schema.json
    python -m launcher.helm_schema --write   # update charts/tfk8s/values.schema.json
    python -m launcher.helm_schema --check   # exit 1 when the committed schema is stale

The chart's files/supervise.py is a symlink to launcher/supervise.py (Helm follows it, and
`helm package` stores its contents), so the script has one source.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from launcher import names, spec

CHART_DIR = Path(__file__).resolve().parent.parent / "charts" / "tfk8s"
SCHEMA_FILE = CHART_DIR / "values.schema.json"


def _anchored(pattern: str) -> str:
    """Python's `re.match` anchors at the start; JSON Schema patterns search: anchor both ends."""
    body = pattern.removeprefix("^").removesuffix("$")
    return f"^{body}$"


def _strip_titles(node: Any) -> Any:
    """pydantic's auto titles ("Runasuser") only add noise to error output."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "title":
                continue
            if key in ("properties", "$defs"):
                out[key] = {k: _strip_titles(v) for k, v in value.items()}
            else:
                out[key] = _strip_titles(value)
        return out
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def _is_set(field: str, type_: str) -> dict:
    """`field` is present and not null (Helm drops null values while merging)."""
    return {"required": [field], "properties": {field: {"type": type_}}}


def _replicas(role: str, constraint: dict, need: bool = False) -> dict:
    """A constraint on roles.<role>.replicas; with need, the value must be present too."""
    inner: dict = {"properties": {"replicas": constraint}}
    outer: dict = {"properties": {role: inner}}
    top: dict = {"properties": {"roles": outer}}
    if need:
        inner["required"] = ["replicas"]
        outer["required"] = [role]
        top["required"] = ["roles"]
    return top


def _merge(*schemas: dict) -> dict:
    """One schema with the constraints of all (disjoint leaves): flatter error output than allOf."""
    out: dict = {}
    for schema in schemas:
        for key, value in schema.items():
            if key == "required":
                out[key] = sorted(set(out.get(key, [])) | set(value))
            elif isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = _merge(out[key], value)
            else:
                out[key] = value
    return out


def _strategy_rules() -> list[dict]:
    def when(strategy: str, *then: dict) -> dict:
        return {
            "if": {"required": ["strategy"], "properties": {"strategy": {"const": strategy}}},
            "then": _merge(*then),
        }

    S = spec.Strategy
    return [
        when(S.parameter_server.value,
             _replicas("chief", {"const": 1}, need=True),
             _replicas("worker", {"minimum": 1}, need=True),
             _replicas("ps", {"minimum": 1}, need=True)),
        when(S.multi_worker_mirrored.value,
             _replicas("chief", {"const": 0}),
             _replicas("ps", {"const": 0}),
             _replicas("worker", {"minimum": 1}, need=True)),
        when(S.mirrored.value,
             _replicas("chief", {"const": 1}, need=True),
             _replicas("worker", {"const": 0}),
             _replicas("ps", {"const": 0})),
    ]


def generate() -> dict:
    schema = _strip_titles(spec.ClusterSpec.model_json_schema(by_alias=True, mode="validation"))
    defs = schema["$defs"]
    props = schema["properties"]

    # Names checked with patternProperties + additionalProperties: false rather than
    # propertyNames, whose errors Helm reports without the object's path.
    env = {
        "type": "object",
        "patternProperties": {_anchored(spec._ENV_NAME.pattern): {"type": "string"}},
        "additionalProperties": False,
        "description": "environment variables (names: " + _anchored(spec._ENV_NAME.pattern)
                       + "); " + ", ".join(spec.RESERVED_ENV) + " are set by the launcher",
    }

    # name / namespace: DNS labels, or empty for the release's own name / namespace.
    props["name"].update({
        "maxLength": names.MAX_LABEL,
        "pattern": f"^$|{_anchored(names._DNS1035.pattern)}",
        "description": "cluster name (DNS-1035 label); empty: the Helm release name",
    })
    props["namespace"].update({
        "default": "",
        "maxLength": names.MAX_LABEL,
        "pattern": f"^$|{_anchored(names._DNS1123.pattern)}",
        "description": "must equal the release namespace (helm --namespace); empty: that one",
    })
    schema["required"] = [r for r in schema["required"] if r != "name"]
    props["env"] = env
    props["checkpoint"]["description"] = (
        "dir: an absolute path (under volume.mountPath when a volume is set) or a gs:// URL"
    )

    defs["Role"]["properties"]["env"] = env
    quantity = {"anyOf": [
        {"type": "string", "pattern": _anchored(spec._QUANTITY.pattern)},
        {"type": "integer", "minimum": 0},
        {"type": "number", "minimum": 0},
    ]}
    for key in ("requests", "limits"):
        defs["Resources"]["properties"][key] = {
            "type": "object",
            "properties": {name: quantity for name in spec.KNOWN_RESOURCES},
            "additionalProperties": False,
        }
    gpu = "nvidia.com/gpu"
    defs["Resources"]["if"] = {
        "required": ["requests"], "properties": {"requests": {"required": [gpu]}},
    }
    defs["Resources"]["then"] = {
        "required": ["limits"], "properties": {"limits": {"required": [gpu]}},
    }
    defs["Resources"]["description"] = f"{gpu} must be set under limits (requests == limits)"

    defs["Program"]["properties"]["module"]["pattern"] = (
        r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
    )
    defs["Volume"]["oneOf"] = [
        {"required": [source], "properties": {source: {"type": "object"}}}
        for source in ("persistentVolumeClaim", "hostPath")
    ]
    defs["Volume"]["description"] += " Set exactly one of persistentVolumeClaim or hostPath."
    defs["Checkpoint"]["allOf"] = [
        {   # only gs:// as remote storage, otherwise an absolute path
            "if": {"required": ["dir"], "properties": {"dir": {"pattern": "://"}}},
            "then": {"properties": {"dir": {"pattern": "^gs://"}}},
            "else": {"properties": {"dir": {"pattern": "^/"}}},
        },
        {   # a gs:// dir needs no volume
            "if": {"required": ["dir"], "properties": {"dir": {"pattern": "^gs://"}}},
            "then": {"properties": {"volume": {"type": "null"}}},
        },
    ]

    schema["allOf"] = [
        *_strategy_rules(),
        _replicas("evaluator", {"maximum": 1}),
        # args without command: set command too, or use program.args
        {"if": _is_set("args", "array"), "then": _is_set("command", "array")},
        # command (bring-your-own) and program (built-in worker) exclude each other
        {"if": _is_set("command", "array"), "then": {"properties": {"program": {"type": "null"}}}},
        {   # the evaluator reads the chief's checkpoints: shared volume or gs://
            "if": _replicas("evaluator", {"minimum": 1}, need=True),
            "then": {"required": ["checkpoint"], "properties": {"checkpoint": {"anyOf": [
                {"required": ["volume"], "properties": {"volume": {"type": "object"}}},
                {"required": ["dir"], "properties": {"dir": {"pattern": "^gs://"}}},
            ]}}},
        },
    ]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "tfk8s cluster spec (Helm values)",
        "description": "Generated from launcher.spec.ClusterSpec by `python -m launcher.helm_schema`; "
                       "do not edit by hand.",
        **schema,
    }


def schema_text() -> str:
    return json.dumps(generate(), indent=2) + "\n"


def expected_files() -> dict[Path, str]:
    """Every generated file in the chart and the text it must have."""
    return {SCHEMA_FILE: schema_text()}


def stale_files() -> list[Path]:
    return [path for path, text in expected_files().items()
            if not path.exists() or path.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launcher.helm_schema", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true",
                       help="update values.schema.json in the chart")
    group.add_argument("--check", action="store_true",
                       help="exit 1 when a generated chart file is out of date")
    args = parser.parse_args(argv)
    if args.write:
        for path, text in expected_files().items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}", file=sys.stderr)
        return 0
    if args.check:
        stale = stale_files()
        for path in stale:
            print(f"{path} is out of date: run python -m launcher.helm_schema --write",
                  file=sys.stderr)
        return 1 if stale else 0
    sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
