#!/usr/bin/env python3
"""Generate the files of charts/tfk8s that repeat the launcher's rules (a developer tool).

The chart keeps its own templates, but every constant they share with the launcher comes from
here, so nothing is written twice by hand:

  charts/tfk8s/values.schema.json      launcher/chart/chart_schema.py: JSON Schema of the values, the
                                       spec's own schema plus what its validators check and JSON
                                       Schema can say. Helm checks it before rendering anything.
  charts/tfk8s/templates/_plan.tpl     launcher/chart/chart_plan.py: the launcher's rendered objects per
                                       shape, values as tokens, variants as @if nodes; the
                                       templates fill them (names, formats, env order, policies)
  charts/tfk8s/templates/_contract.tpl worker/contract.py as JSON for the templates
                                       (`$c := include "tfk8s.contract" . | fromJson`): roles,
                                       per-strategy rules, env names, labels, exit codes, ...

Rules JSON Schema cannot state (a dir under the volume's mountPath, generated names too long,
reserved env names, GPU requests == limits, shared MWMS checkpoints) are checked by the chart's
templates/_validate.tpl with the launcher's messages: the str.format strings its validators use,
in _contract.tpl's "messages" with {field} as @field@ (launcher/chart_schema.messages). Two chart
values differ from the model on purpose: `name` and `namespace` may be empty, meaning the
release name and namespace.

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

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as `python scripts/gen_chart.py` from anywhere
    sys.path.insert(0, str(REPO))

from launcher import k8s_contract  # noqa: E402
from launcher.chart import chart_schema
from launcher.cluster_spec import role_spec, spec
from launcher.code_shipping import code_bundle
from launcher.k8s_contract import Workload  # noqa: E402
from launcher.plan import job_failure, plan
from launcher.render import supervised_pod
from worker import contract  # noqa: E402
from worker.contract import Role, Strategy  # noqa: E402

CHART_DIR = REPO / "charts" / "tfk8s"
SCHEMA_FILE = CHART_DIR / "values.schema.json"
CONTRACT_FILE = CHART_DIR / "templates" / "_contract.tpl"
COMMAND = chart_schema.COMMAND


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
                    w.value: [r.value for r in k8s_contract.supervised_roles(s, False, w)] for w in Workload
                },
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
        "reservedEnv": list(k8s_contract.RESERVED_ENV),
        # A supervised pod's job-watch container and what it shares with the task's
        # (launcher/render/supervised_pod.py); the templates add image, pull policy, env, and the
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
            "strategy": k8s_contract.LABEL_STRATEGY,
        },
        "container": k8s_contract.CONTAINER,
        "gpuResource": role_spec.GPU,
        "indexAnnotation": k8s_contract.INDEX_ANNOTATION,
        "dns1035Pattern": k8s_contract.DNS1035_PATTERN,
        "maxLabel": k8s_contract.MAX_LABEL,
        # The Jobs' podFailurePolicy under restartPolicy Never (plan.restart_rules, rendered by
        # job_failure.pod_failure_policy), for the built-in worker and for a user's command; the
        # rules do not depend on the strategy.
        "podFailurePolicy": {
            kind: job_failure.pod_failure_policy(plan.restart_rules("Never", 0, Strategy.MIRRORED, builtin))
            for kind, builtin in (("builtin", True), ("command", False))
        },
        "maxFailedIndexes": k8s_contract.MAX_FAILED_INDEXES,
        "code": _code_contract(),
        # What templates/_validate.tpl refuses with: the launcher's messages, @field@ to fill.
        "messages": chart_schema.messages(),
    }


def _code_contract() -> dict:
    """code_render's pod additions with a placeholder object, image and pull policy (the chart
    sets those), and the ConfigMap's key and annotations."""
    from launcher.plan.plan import CodePlan
    from launcher.render.code_render import BYTES_ANNOTATION, CONTAINER_SECURITY, SHA256_ANNOTATION, pod_code

    stub = types.SimpleNamespace(
        code=CodePlan(dir=code_bundle.CODE_DIR, object_name=""),
        spec=types.SimpleNamespace(image="", image_pull_policy=""),
    )
    pod = pod_code(stub, CONTAINER_SECURITY)
    init = {k: v for k, v in pod["init_containers"][0].items() if k not in ("image", "imagePullPolicy")}
    return {
        "dir": code_bundle.CODE_DIR,
        "archiveKey": code_bundle.ARCHIVE_KEY,
        "sha256Annotation": SHA256_ANNOTATION,
        "bytesAnnotation": BYTES_ANNOTATION,
        "initContainer": init,
        "mounts": pod["mounts"],
        "volumes": pod["volumes"],
    }


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
    """launcher/chart/chart_plan.py's objects per shape, one define each (a template reads only its
    own shape's), and the name formats and storage kinds."""
    from launcher.chart import chart_plan

    data = chart_plan.generate()
    parts = [
        "{{- /*\n"
        "GENERATED by scripts/gen_chart.py from launcher/chart/chart_plan.py (the launcher's own objects\n"
        f"with tokens for the values): do not edit by hand. Regenerate with `{COMMAND}`.\n"
        'Use: include "tfk8s.fill" with a shape\'s objects (see templates/_helpers.tpl).\n'
        "*/ -}}\n"
    ]
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
    return f"<= {count.maximum} {role.value}" if count.minimum == 0 else f"{count.minimum}-{count.maximum} {role.value}"


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
    return {
        SCHEMA_FILE: chart_schema.schema_text(),
        CONTRACT_FILE: contract_text(),
        VALUES_FILE: values_text(),
        PLAN_FILE: plan_text(),
    }


def stale_files() -> list[Path]:
    return [path for path, text in expected_files().items() if not path.exists() or path.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/gen_chart.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="update the generated chart files")
    group.add_argument("--check", action="store_true", help="exit 1 when a generated chart file is out of date")
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
