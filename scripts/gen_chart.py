#!/usr/bin/env python3
"""Generate the files of charts/tfk8s that repeat the launcher's rules (a developer tool).

The chart keeps its own templates, but every constant they share with the launcher comes from
here, so nothing is written twice by hand:

  charts/tfk8s/values.schema.json      JSON Schema of the values: the pydantic ClusterSpec's own
                                       schema plus what its validators check and JSON Schema can
                                       say (patterns, known resources, one volume source,
                                       checkpoint dir rules, role counts per strategy from
                                       worker.contract.ROLE_COUNTS, args need command, ...).
                                       Helm checks it before rendering anything.
  charts/tfk8s/templates/_plan.tpl     launcher/chart_plan.py: the launcher's rendered objects per
                                       shape, values as tokens, variants as @if nodes; the
                                       templates fill them (names, formats, env order, policies)
  charts/tfk8s/templates/_contract.tpl worker/contract.py as JSON for the templates
                                       (`$c := include "tfk8s.contract" . | fromJson`): roles,
                                       per-strategy rules, env names, labels, exit codes, ...

Rules JSON Schema cannot state (a dir under the volume's mountPath, generated names too long,
reserved env names, GPU requests == limits, shared MWMS checkpoints) are checked by the chart's
templates/_validate.tpl with the launcher's messages. Two chart values differ from the model on
purpose: `name` and `namespace` may be empty, meaning the release name and namespace.

    python scripts/gen_chart.py --write   # update the generated chart files
    python scripts/gen_chart.py --check   # exit 1 when one is out of date (a unit test does too)

Not part of the runtime packages: it imports the launcher (pydantic) and writes into the
source tree. The chart's files/supervise.py and files/job_watch.py are symlinks to the launcher's.
"""
from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as `python scripts/gen_chart.py` from anywhere
    sys.path.insert(0, str(REPO))

from launcher import (  # noqa: E402
    code_bundle, job_failure, job_watch, k8s_contract, plan, spec, supervise, supervised_pod,
)
from worker import contract  # noqa: E402
from worker.contract import Role, Strategy, Workload  # noqa: E402

CHART_DIR = REPO / "charts" / "tfk8s"
SCHEMA_FILE = CHART_DIR / "values.schema.json"
CONTRACT_FILE = CHART_DIR / "templates" / "_contract.tpl"
COMMAND = "python scripts/gen_chart.py --write"
GPU = spec.GPU

# The supervisor's interface: launcher/supervise.py defines these names (it runs alone in the
# pod and cannot import the contract); no task process reads them.
SUPERVISOR_ENV = {
    "watchJob": supervise.WATCH_JOB_ENV,
    "namespace": supervise.NAMESPACE_ENV,
    "graceSeconds": supervise.GRACE_ENV,
    "podGraceSeconds": supervise.POD_GRACE_ENV,
    "restartAttempt": supervise.RESTART_ATTEMPT_ENV,
    "podRestartPolicy": supervise.POD_RESTART_POLICY_ENV,
}


# ------------------------------------------------------------------------ values.schema.json
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


def _def(schema: dict, node: dict) -> dict:
    """The $defs entry a property refers to (directly, or as the non-null choice of anyOf), so
    the generator does not depend on the model's class names."""
    choices = [node, *node.get("anyOf", []), *node.get("allOf", [])]
    [ref] = [n["$ref"] for n in choices if "$ref" in n]
    return schema["$defs"][ref.removeprefix("#/$defs/")]


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


def _count_rule(role: Role, count: contract.Count) -> dict | None:
    """contract.Count as a constraint on roles.<role>.replicas (None: any count will do).

    A role that needs replicas (minimum > 0) must be set: the model's default is 0.
    """
    if count.minimum == count.maximum:
        constraint = {"const": count.minimum}
    else:
        constraint = {}
        if count.minimum > 0:
            constraint["minimum"] = count.minimum
        if count.maximum is not None:
            constraint["maximum"] = count.maximum
    if not constraint:
        return None
    return _replicas(role.value, constraint, need=count.minimum > 0)


def _role_count_rules() -> list[dict]:
    """contract.ROLE_COUNTS: one if/then per strategy, and a rule that is the same under every
    strategy (at most one evaluator) once, for all."""
    common = [role for role in contract.ROLES
              if len({contract.ROLE_COUNTS[s][role] for s in Strategy}) == 1]
    rules = []
    for strategy in Strategy:
        then = [_count_rule(role, contract.ROLE_COUNTS[strategy][role])
                for role in contract.ROLES if role not in common]
        rules.append({
            "if": {"required": ["strategy"], "properties": {"strategy": {"const": strategy.value}}},
            "then": _merge(*(rule for rule in then if rule)),
        })
    for role in common:
        rule = _count_rule(role, contract.ROLE_COUNTS[next(iter(Strategy))][role])
        if rule:
            rules.append(rule)
    return rules


def generate_schema() -> dict:
    schema = _strip_titles(spec.ClusterSpec.model_json_schema(by_alias=True, mode="validation"))
    props = schema["properties"]
    role_def = _def(schema, _def(schema, props["roles"])["properties"][Role.CHIEF.value])
    resources_def = _def(schema, role_def["properties"]["resources"])
    checkpoint_def = _def(schema, props["checkpoint"])
    volume_def = _def(schema, checkpoint_def["properties"]["volume"])
    program_def = _def(schema, props["program"])

    # Names checked with patternProperties + additionalProperties: false rather than
    # propertyNames, whose errors Helm reports without the object's path.
    env_name = _anchored(k8s_contract.ENV_NAME_PATTERN)
    env = {
        "type": "object",
        "patternProperties": {env_name: {"type": "string"}},
        "additionalProperties": False,
        "description": f"environment variables (names: {env_name}); "
                       + ", ".join(k8s_contract.RESERVED_ENV) + " are set by the launcher",
    }

    # name / namespace: DNS labels, or empty for the release's own name / namespace.
    props["name"].update({
        "maxLength": k8s_contract.MAX_LABEL,
        "pattern": f"^$|{_anchored(k8s_contract.DNS1035_PATTERN)}",
        "description": "cluster name (DNS-1035 label); empty: the Helm release name",
    })
    props["namespace"].update({
        "default": "",
        "maxLength": k8s_contract.MAX_LABEL,
        "pattern": f"^$|{_anchored(k8s_contract.DNS1123_LABEL_PATTERN)}",
        "description": "must equal the release namespace (helm --namespace); empty: that one",
    })
    schema["required"] = [r for r in schema["required"] if r != "name"]
    # The chart cannot read a local dir: it ships the archive given in codeArchive.
    props["codeArchive"] = {
        "type": "string", "contentEncoding": "base64",
        "description": "code: the archive of `python -m launcher.code_bundle DIR` (base64), e.g. "
                       "--set-file codeArchive=code.b64; `render --helm-values` includes it",
    }
    props["code"]["anyOf"].insert(0, {"type": "string"})  # code: ./src, the short form
    props["code"]["description"] = (
        "the launcher's local code dir; the chart needs codeArchive instead")
    props["env"] = env
    props["checkpoint"]["description"] = (
        "dir: an absolute path (under volume.mountPath when a volume is set) or a gs:// URL; "
        "unset: <mountPath>/<namespace>/<name>, the cluster's own dir"
    )

    role_def["properties"]["env"] = env
    quantity = {"anyOf": [
        {"type": "string", "pattern": _anchored(spec._QUANTITY.pattern)},
        {"type": "integer", "minimum": 0},
        {"type": "number", "minimum": 0},
    ]}
    for key in ("requests", "limits"):
        resources_def["properties"][key] = {
            "type": "object",
            "properties": {name: quantity for name in spec.KNOWN_RESOURCES},
            "additionalProperties": False,
        }
    resources_def["if"] = {
        "required": ["requests"], "properties": {"requests": {"required": [GPU]}},
    }
    resources_def["then"] = {
        "required": ["limits"], "properties": {"limits": {"required": [GPU]}},
    }
    resources_def["description"] = f"{GPU} must be set under limits (requests == limits)"

    program_def["properties"]["module"]["pattern"] = _anchored(k8s_contract.MODULE_NAME_PATTERN)
    volume_def["oneOf"] = [
        {"required": [source], "properties": {source: {"type": "object"}}}
        for source in ("persistentVolumeClaim", "hostPath")
    ]
    volume_def["description"] += " Set exactly one of persistentVolumeClaim or hostPath."
    checkpoint_def["allOf"] = [
        {   # only gs:// as remote storage, otherwise an absolute path
            "if": {"required": ["dir"], "properties": {"dir": {"type": "string", "pattern": "://"}}},
            "then": {"properties": {"dir": {"pattern": "^gs://"}}},
            "else": {"properties": {"dir": {"pattern": "^/"}}},
        },
        {   # a gs:// dir needs no volume
            "if": {"required": ["dir"],
                   "properties": {"dir": {"type": "string", "pattern": "^gs://"}}},
            "then": {"properties": {"volume": {"type": "null"}}},
        },
    ]

    evaluator = Role.EVALUATOR.value
    schema["allOf"] = [
        *_role_count_rules(),
        # args without command: set command too, or use program.args
        {"if": _is_set("args", "array"), "then": _is_set("command", "array")},
        # spec.QUEUE_NEEDS_JOBSET: Kueue admits a cluster as one unit only as a JobSet
        {"if": _is_set("queue", "string"), "then": {
            "required": ["workload"], "properties": {"workload": {"const": Workload.JOBSET.value}}}},
        # command (bring-your-own) and program (built-in worker) exclude each other
        {"if": _is_set("command", "array"), "then": {"properties": {"program": {"type": "null"}}}},
        {   # the evaluator reads the chief's checkpoints: shared volume or gs://
            "if": _replicas(evaluator, {"minimum": 1}, need=True),
            "then": {"required": ["checkpoint"], "properties": {"checkpoint": {"anyOf": [
                {"required": ["volume"], "properties": {"volume": {"type": "object"}}},
                {"required": ["dir"], "properties": {"dir": {"pattern": "^gs://"}}},
            ]}}},
        },
    ]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "tfk8s cluster spec (Helm values)",
        "description": f"Generated from launcher.spec.ClusterSpec and worker/contract.py by "
                       f"`{COMMAND}`; do not edit by hand.",
        **schema,
    }


def schema_text() -> str:
    return json.dumps(generate_schema(), indent=2) + "\n"


# ------------------------------------------------------------------------ templates/_contract.tpl
def _names(enum) -> dict[str, str]:
    """{"multiWorkerMirrored": "multi_worker_mirrored", ...}: the values by camelCase key."""
    def camel(name: str) -> str:
        first, *rest = name.lower().split("_")
        return first + "".join(part.title() for part in rest)
    return {camel(member.name): member.value for member in enum}


def generate_contract() -> dict:
    volume_fields = spec.Volume.model_fields
    return {
        "roles": [r.value for r in contract.ROLES],
        "role": _names(Role),
        # TF_CONFIG's cluster: never the evaluator.
        "trainingRoles": [r.value for r in contract.TRAINING_ROLES],
        "strategy": _names(Strategy),
        "strategies": {
            s.value: {
                "allowedRoles": [r.value for r in contract.allowed_roles(s)],
                "successRole": contract.success_role(s).value,
                # The evaluator, when it has replicas, is supervised too (the templates add it).
                "supervisedRoles": {
                    w.value: [r.value for r in k8s_contract.supervised_roles(s, False, w)]
                    for w in Workload},
                "successPolicy": k8s_contract.success_needs_index_policy(s),
                # A JobSet's success roles (the templates add the evaluator) and restarts.
                "setSuccessRoles": [r.value for r in k8s_contract.set_success_roles(s, False)],
                "setMaxRestarts": k8s_contract.set_max_restarts(s),
                # Roles that admit every TCP port from each other when they have GPUs (NCCL).
                "ncclRoles": [r.value for r in k8s_contract.nccl_roles(s)],
                # Roles with backoffLimitPerIndex (restartPolicy Never) instead of backoffLimit.
                "perIndexRoles": [r.value for r in k8s_contract.per_index_roles(s)],
                # Roles that only serve (contract.is_server): they linger after SIGTERM.
                "serverRoles": [r.value for r in contract.ROLES if contract.is_server(s, r)],
            }
            for s in Strategy
        },
        "successIndex": contract.SUCCESS_INDEX,
        "workload": _names(Workload),
        "queueLabel": k8s_contract.QUEUE_LABEL,
        "jobsetApiVersion": k8s_contract.JOBSET_API_VERSION,
        "jobsetJobIndex": k8s_contract.JOBSET_JOB_INDEX,
        "jobsetRestartStrategy": k8s_contract.JOBSET_RESTART_STRATEGY,
        "jobsetRestartAttemptKey": job_watch.RESTART_ATTEMPT_KEY,
        "fatalJobFailureReasons": list(k8s_contract.FATAL_JOB_FAILURE_REASONS),
        "nodeLossTaints": list(k8s_contract.NODE_LOSS_TAINTS),
        "env": {
            "tfConfig": contract.TF_CONFIG,
            "taskIndex": contract.TASK_INDEX,
            "grpcFailFast": contract.GRPC_FAIL_FAST,
            "strategy": contract.STRATEGY,
            "modelDir": contract.MODEL_DIR,
            "program": contract.PROGRAM,
            "peerTimeout": contract.PEER_TIMEOUT,
            "clusterName": contract.CLUSTER_NAME,
            "namespace": contract.NAMESPACE,
            "serverLinger": contract.SERVER_LINGER,
        },
        "serverLingerMarginSeconds": contract.SERVER_LINGER_MARGIN_SECONDS,
        "grpcFailFastValue": contract.GRPC_FAIL_FAST_VALUE,
        "reservedEnv": list(k8s_contract.RESERVED_ENV),
        "supervisorEnv": SUPERVISOR_ENV,
        # A supervised pod's job-watch container and what it shares with the task's
        # (launcher/supervised_pod.py); the templates add image, pull policy, env, and the
        # scripts' ConfigMap name.
        "supervisedPod": {
            "scripts": list(supervised_pod.SCRIPTS),
            "scriptsVolume": supervised_pod.SCRIPTS_VOLUME,
            "taskCommand": supervised_pod.task_command([]),
            "taskMounts": supervised_pod.task_mounts(),
            "sharedVolumes": supervised_pod.shared_volumes(),
            "watcher": supervised_pod.watcher(),
        },
        "defaults": {
            "program": contract.BUILTIN_PROGRAM,
            "peerTimeoutSeconds": contract.DEFAULT_PEER_TIMEOUT_SECONDS,
            "mountPath": volume_fields["mount_path"].default,
        },
        "labels": {
            "name": k8s_contract.LABEL_NAME,
            "instance": k8s_contract.LABEL_INSTANCE,
            "component": k8s_contract.LABEL_COMPONENT,
            "managedBy": k8s_contract.LABEL_MANAGED_BY,
            "strategy": k8s_contract.LABEL_STRATEGY,
        },
        "managedBy": k8s_contract.MANAGED_BY,
        "container": k8s_contract.CONTAINER,
        "gpuResource": spec.GPU,
        "supervisorDir": k8s_contract.SUPERVISOR_DIR,
        "indexAnnotation": k8s_contract.INDEX_ANNOTATION,
        "dns1035Pattern": k8s_contract.DNS1035_PATTERN,
        "maxLabel": k8s_contract.MAX_LABEL,
        # The Jobs' podFailurePolicy under restartPolicy Never (plan.restart_rules, rendered by
        # job_failure.pod_failure_policy), for the built-in worker and for a user's command; the
        # rules do not depend on the strategy.
        "podFailurePolicy": {
            kind: job_failure.pod_failure_policy(plan.restart_rules("Never", 0, Strategy.MIRRORED, builtin))
            for kind, builtin in (("builtin", True), ("command", False))},
        "maxFailedIndexes": k8s_contract.MAX_FAILED_INDEXES,
        "code": _code_contract(),
    }


def _code_contract() -> dict:
    """code_render's pod additions with a placeholder object, image and pull policy (the chart
    sets those), and the ConfigMap's key and annotations."""
    from launcher.code_render import (BYTES_ANNOTATION, CONTAINER_SECURITY, SHA256_ANNOTATION,
                                      pod_code)
    from launcher.plan import CodePlan
    stub = types.SimpleNamespace(code=CodePlan(dir=code_bundle.CODE_DIR, object_name=""),
                                 spec=types.SimpleNamespace(image="", image_pull_policy=""))
    pod = pod_code(stub, CONTAINER_SECURITY)
    init = {k: v for k, v in pod["init_containers"][0].items()
            if k not in ("image", "imagePullPolicy")}
    return {"dir": code_bundle.CODE_DIR, "archiveKey": code_bundle.ARCHIVE_KEY,
            "sha256Annotation": SHA256_ANNOTATION, "bytesAnnotation": BYTES_ANNOTATION,
            "initContainer": init, "mounts": pod["mounts"], "volumes": pod["volumes"]}


def contract_text() -> str:
    body = json.dumps(generate_contract(), indent=2)
    assert "{{" not in body and "}}" not in body, "the JSON would be read as template actions"
    return (
        "{{- /*\n"
        f"GENERATED by scripts/gen_chart.py from worker/contract.py: do not edit by hand.\n"
        f"Regenerate with `{COMMAND}` (a unit test fails when this file is stale).\n"
        "\n"
        "The rules the chart shares with the launcher, as JSON. Use:\n"
        '    {{- $c := include "tfk8s.contract" . | fromJson -}}\n'
        "Numbers come back as floats: compare them with `int`.\n"
        "*/ -}}\n"
        '{{- define "tfk8s.contract" -}}\n'
        f"{body}\n"
        "{{- end }}\n"
    )


# ------------------------------------------------------------------------ templates/_plan.tpl
PLAN_FILE = CHART_DIR / "templates" / "_plan.tpl"


def _template_safe_json(value) -> str:
    """Compact JSON without `{{` or `}}` (template actions): braces in strings escaped, a space
    between the JSON's own."""
    def hide(node):
        if isinstance(node, dict):
            return {hide(k): hide(v) for k, v in node.items()}
        if isinstance(node, list):
            return [hide(v) for v in node]
        return node.replace("{", "\0L").replace("}", "\0R") if isinstance(node, str) else node
    body = json.dumps(hide(value), separators=(",", ":"), ensure_ascii=False)
    while "{{" in body or "}}" in body:
        body = body.replace("{{", "{ {").replace("}}", "} }")
    body = body.replace("\\u0000L", "\\u007b").replace("\\u0000R", "\\u007d")
    assert json.loads(body) == value and "\\u0000" not in body
    return body


def plan_text() -> str:
    """launcher/chart_plan.py's objects per shape, one define each (a template reads only its
    own shape's), and the name formats and storage kinds."""
    from launcher import chart_plan
    data = chart_plan.generate()
    parts = [
        "{{- /*\n"
        "GENERATED by scripts/gen_chart.py from launcher/chart_plan.py (the launcher's own objects\n"
        f"with tokens for the values): do not edit by hand. Regenerate with `{COMMAND}`.\n"
        'Use: include "tfk8s.fill" with a shape\'s objects (see templates/_helpers.tpl).\n'
        "*/ -}}\n"]
    shapes = data.pop("shapes")
    for key, objects in [("rules", data), *((f"shape.{k}", v) for k, v in shapes.items())]:
        body = _template_safe_json(objects)
        parts.append(f'{{{{- define "tfk8s.{key}" -}}}}\n{body}\n{{{{- end }}}}\n')
    return "".join(parts)


# ------------------------------------------------------------------------ values.yaml
VALUES_FILE = CHART_DIR / "values.yaml"
COUNTS_BEGIN = "# Replica counts per strategy (generated by scripts/gen_chart.py from the contract):\n"
COUNTS_END = "#   (end of generated counts)\n"


def _count_text(role: Role, count: contract.Count) -> str | None:
    if count.maximum == 0:
        return None if role is Role.EVALUATOR else f"no {role.value}"
    if count.maximum == count.minimum:
        return f"{count.minimum} {role.value}"
    if count.maximum is None:
        return f">= {count.minimum} {role.value}"
    return f"<= {count.maximum} {role.value}" if count.minimum == 0 else \
        f"{count.minimum}-{count.maximum} {role.value}"


def values_text() -> str:
    """values.yaml with its replica-count table rewritten from contract.ROLE_COUNTS."""
    text = VALUES_FILE.read_text()
    start, end = text.index(COUNTS_BEGIN) + len(COUNTS_BEGIN), text.index(COUNTS_END)
    rows = []
    for strategy, counts in contract.ROLE_COUNTS.items():
        parts = [_count_text(role, counts[role]) for role in contract.ROLES]
        rows.append(f"#   {strategy.value:<23}{', '.join(p for p in parts if p)}\n")
    return text[:start] + "".join(rows) + text[end:]


# ------------------------------------------------------------------------ files
def expected_files() -> dict[Path, str]:
    """Every generated file in the chart and the text it must have."""
    return {SCHEMA_FILE: schema_text(), CONTRACT_FILE: contract_text(), VALUES_FILE: values_text(),
            PLAN_FILE: plan_text()}


def stale_files() -> list[Path]:
    return [path for path, text in expected_files().items()
            if not path.exists() or path.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/gen_chart.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="update the generated chart files")
    group.add_argument("--check", action="store_true",
                       help="exit 1 when a generated chart file is out of date")
    args = parser.parse_args(argv)
    if args.write:
        for path, text in expected_files().items():
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)
        return 0
    stale = stale_files()
    for path in stale:
        print(f"{path.relative_to(REPO)} is out of date: run {COMMAND}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
