#!/usr/bin/env python3
"""Generate the files of charts/tfk8s that repeat the launcher's rules (a developer tool).

The chart's templates are written by hand, per object, as a Helm user reads them;
tests/charts/test_helm_parity.py keeps their objects equal to `launcher render`. What they
share with the launcher's rules comes from here:

  charts/tfk8s/values.schema.json      scripts/chart_schema.py: JSON Schema of the values, the
                                       spec's own schema plus what its validators check and JSON
                                       Schema can say. Helm checks it before rendering anything.
  charts/tfk8s/templates/_contract.tpl the rules as YAML for the templates
                                       (`$c := include "tfk8s.contract" . | fromYaml`): roles,
                                       per-strategy rules, podFailurePolicy, messages, ...
  charts/tfk8s/values.yaml             only its table of replica counts per strategy and each
                                       key's `# --` description (values.schema.json's; the chart
                                       README's table is made from them: scripts/generate.py)

Rules JSON Schema cannot state (a dir under the volume's mountPath, generated names too long,
reserved env names, GPU requests == limits, shared MWMS checkpoints) are checked by the chart's
templates/_validate.tpl with the launcher's messages: the str.format strings its validators use,
in _contract.tpl's "messages" as they are, {field}s filled by the chart (scripts/chart_schema.messages). Two chart
values differ from the model on purpose: `name` and `namespace` may be empty, meaning the
release name and namespace.

Written and checked with every other generated file by scripts/generate.py (--write / --check).

Not part of the runtime packages: it imports the launcher (pydantic) and writes into the
source tree. The chart's files/supervise.py and files/job_watch.py are symlinks to the launcher's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as `python scripts/gen_chart.py` from anywhere
    sys.path.insert(0, str(REPO))

from launcher import k8s_contract  # noqa: E402
from launcher.cluster_spec import names, pod_fields, role_spec, spec
from launcher.code_shipping import code_bundle
from launcher.k8s_contract import Workload  # noqa: E402
from launcher.plan import plan
from launcher.render import job_failure
from scripts import chart_schema, chart_values_doc
from worker import args, contract  # noqa: E402
from worker.contract import Role, Strategy  # noqa: E402

CHART_DIR = REPO / "charts" / "tfk8s"
SCHEMA_FILE = CHART_DIR / "values.schema.json"
CONTRACT_FILE = CHART_DIR / "templates" / "_contract.tpl"
COMMAND = chart_schema.COMMAND


# ------------------------------------------------------------------------ templates/_contract.tpl
def generate_contract() -> dict:
    """The rules the templates read, as the launcher decides them; the objects' layout is
    written in the templates themselves (tests/charts keep both equal to `render`)."""
    volume_fields = spec.Volume.model_fields
    return {
        "roles": [r.value for r in contract.ROLES],
        # TF_CONFIG's cluster: never the evaluator.
        "trainingRoles": [r.value for r in contract.TRAINING_ROLES],
        # dataService: its roles (TF_CONFIG lists the service's own tasks), who reads through it
        # (TFK8S_DATA_SERVICE) and who may reach each role's port (its NetworkPolicy).
        "dataServiceRoles": [r.value for r in contract.DATA_SERVICE_ROLES],
        "dataReaders": [r.value for r in contract.DATA_READERS],
        "dataServiceFlag": args.DATA_SERVICE_FLAG,  # the built-in worker's flag that needs a dataService
        # a sweep's trial (labels[sweepLabel]) tells its tasks the sweep's name (plan.task_env)
        "sweepLabel": k8s_contract.LABEL_SWEEP,
        "sweepEnv": contract.SWEEP,
        "dataServiceClients": {
            r.value: [c.value for c in k8s_contract.data_service_clients(r)] for r in contract.DATA_SERVICE_ROLES
        },
        "strategies": {
            s.value: {
                "successRole": contract.success_role(s).value,
                # The evaluator, when it has replicas, is supervised too (the templates add it).
                "supervisedRoles": {
                    w.value: [r.value for r in k8s_contract.supervised_roles(s, False, w, has_data_service=True)]
                    for w in Workload
                },
                # The success role's Job succeeds when index 0 does (a Job successPolicy).
                "successPolicy": k8s_contract.success_needs_index_policy(s),
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
        "nodeLossTaints": list(k8s_contract.NODE_LOSS_TAINTS),
        "serverLingerMarginSeconds": contract.SERVER_LINGER_MARGIN_SECONDS,
        # TFK8S_PLATFORM as submit names it (k8s_contract.kubernetes_platform).
        "platform": {
            "configMap": k8s_contract.ROOT_CA_CONFIGMAP,
            "key": k8s_contract.ROOT_CA_KEY,
            "prefix": k8s_contract.PLATFORM_PREFIX,
            "digits": k8s_contract.PLATFORM_DIGITS,
        },
        "reservedEnv": list(k8s_contract.RESERVED_ENV),
        "defaults": {
            "program": contract.BUILTIN_PROGRAM,
            "mountPath": volume_fields["mount_path"].default,
        },
        "gpuResource": role_spec.GPU,
        "dns1035Pattern": k8s_contract.DNS1035_PATTERN,
        "maxLabel": k8s_contract.MAX_LABEL,
        # The kinds names.generated_names reports a name of (the refusal says which).
        "generatedKinds": dict(zip(("service", "account", "job", "hostname"), _generated_kinds())),
        # The Jobs' podFailurePolicy under restartPolicy Never (plan.restart_rules, rendered by
        # launcher/render/job_failure.py), for the built-in worker and for a user's command; the
        # rules do not depend on the strategy.
        "podFailurePolicy": {
            kind: job_failure.pod_failure_policy(plan.restart_rules("Never", 0, Strategy.MIRRORED, builtin))
            for kind, builtin in (("builtin", True), ("command", False))
        },
        # A command's fatalExitCodes: a FailJob rule for this container (templates/_job.tpl), and
        # the codes it may not take, with what they mean (templates/_validate.tpl).
        "containerName": k8s_contract.CONTAINER,
        "reservedExitCodes": {str(code): meaning for code, meaning in k8s_contract.RESERVED_EXIT_CODES.items()},
        "code": _code_contract(),
        # What a role's pod fields may not set (pod_fields.role_problems): templates/_validate.tpl
        # iterates over these lists, refusing with $c.messages.
        "podPolicy": pod_policy(),
        # What templates/_validate.tpl refuses with: the launcher's messages, {field}s to fill.
        "messages": chart_schema.messages(),
    }


def pod_policy() -> dict:
    """pod_fields' lists as they are; a home (where a refused key is set instead) is a
    str.format text with {role} to fill."""
    homes = {**pod_fields.POD_SPEC_HOMES, **pod_fields.TASK_CONTAINER_HOMES}
    for key, text in homes.items():
        chart_schema.plain_fields(key, text)
    return {
        "podSpecHomes": dict(pod_fields.POD_SPEC_HOMES),
        "podSecuritySet": list(pod_fields.POD_SECURITY_SET),
        "watcherContainer": k8s_contract.WATCHER_CONTAINER,
        "taskContainerMaySet": list(pod_fields.TASK_CONTAINER_MAY_SET),
        "taskContainerHomes": dict(pod_fields.TASK_CONTAINER_HOMES),
        "taskSecurityMaySet": list(pod_fields.TASK_SECURITY_MAY_SET),
        "reservedContainers": list(pod_fields.RESERVED_CONTAINERS),
        "reservedVolumes": list(pod_fields.RESERVED_VOLUMES),
        "restrictedVolumeTypes": list(pod_fields.RESTRICTED_VOLUME_TYPES),
        "reservedLabels": list(pod_fields.RESERVED_LABELS),
        "launcherMounts": list(pod_fields.LAUNCHER_MOUNTS),
        # the values Pod Security restricted allows; a refused securityContext value of an added
        # container as JSON (the chart compares toJson: true is not 1)
        "seLinuxTypes": list(pod_fields.SELINUX_TYPES),
        "seLinuxUnset": list(pod_fields.SELINUX_UNSET),
        "appArmorTypes": list(pod_fields.APPARMOR_TYPES),
        "safeSysctls": list(pod_fields.SAFE_SYSCTLS),
        "probes": list(pod_fields.PROBES),
        "lifecycleHandlers": list(pod_fields.LIFECYCLE_HANDLERS),
        "hostActions": list(pod_fields.HOST_ACTIONS),
        "addedSecurityRefused": {
            key: {"refused": [json.dumps(value) for value in refused], "allowed": allowed}
            for key, (refused, allowed) in pod_fields.ADDED_SECURITY_REFUSED.items()
        },
        "addedCapabilities": list(pod_fields.ADDED_CAPABILITIES),
        "seccompTypes": list(pod_fields.SECCOMP_TYPES),
    }


def _generated_kinds() -> list[str]:
    return [kind for _, kind, _ in names.generated_names("x", Workload.JOBS, {Role.CHIEF: 1})]


def _code_contract() -> dict:
    """Where pods find the code, and the unpacking init container as manifests/job.yaml.j2 lays
    it out, without what the chart's templates set themselves (image, pull policy, security:
    templates/_job.tpl)."""
    from launcher.cluster_spec.spec import ClusterSpec
    from launcher.render import render

    sample = ClusterSpec.model_validate(
        {"name": "x", "strategy": "mirrored", "roles": {"chief": {"replicas": 1}}, "code": code_bundle.CODE_DIR}
    )
    cluster = plan.plan(sample, code_bundle.Bundle(root="", archive=b"", files=()))
    [(_, job)] = render.job_specs(render.render(cluster))
    [init] = job["template"]["spec"]["initContainers"]
    [volume] = [v for v in job["template"]["spec"]["volumes"] if v["name"] == "code"]
    return {
        "dir": code_bundle.CODE_DIR,
        "volume": volume,
        "initContainer": {k: v for k, v in init.items() if k not in ("image", "imagePullPolicy", "securityContext")},
    }


def contract_text() -> str:
    body = yaml.safe_dump(generate_contract(), sort_keys=False, width=100)
    assert "{{" not in body and "}}" not in body, "the YAML would be read as template actions"
    return (
        "{{- /*\n"
        f"GENERATED by scripts/gen_chart.py from worker/contract.py: do not edit by hand.\n"
        f"Regenerate with `{COMMAND}` (a unit test fails when this file is stale).\n"
        "\n"
        "The rules the chart shares with the launcher, as YAML. Use:\n"
        '    {{- $c := include "tfk8s.contract" . | fromYaml -}}\n'
        "Numbers come back as floats: compare them with `int`.\n"
        "*/ -}}\n"
        '{{- define "tfk8s.contract" -}}\n'
        f"{body}\n"
        "{{- end }}\n"
    )


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
    """values.yaml with its replica-count table rewritten from contract.ROLE_COUNTS, and each
    key's `# --` description from values.schema.json (scripts/chart_values_doc.py)."""
    text = VALUES_FILE.read_text()
    start, end = text.index(COUNTS_BEGIN) + len(COUNTS_BEGIN), text.index(COUNTS_END)
    rows = []
    for strategy, counts in contract.ROLE_COUNTS.items():
        parts = [_count_text(role, counts[role]) for role in contract.COUNTED_ROLES]
        rows.append(f"#   {strategy.value:<23}{', '.join(p for p in parts if p)}\n")
    text = text[:start] + "".join(rows) + text[end:]
    described = chart_values_doc.schema_descriptions(chart_schema.generate_schema(), yaml.safe_load(text))
    return chart_values_doc.with_descriptions(text, described)


# ------------------------------------------------------------------------ files
def expected_files() -> dict[Path, str]:
    """Every generated file in the chart and the text it must have."""
    return {
        SCHEMA_FILE: chart_schema.schema_text(),
        CONTRACT_FILE: contract_text(),
        VALUES_FILE: values_text(),
    }


def stale_files() -> list[Path]:
    return [path for path, text in expected_files().items() if not path.exists() or path.read_text() != text]


if __name__ == "__main__":
    sys.exit(f"{__file__} is a module of scripts/generate.py: run {COMMAND} (or --check)")
