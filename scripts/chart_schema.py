"""The chart's values.schema.json, generated from the spec (scripts/gen_chart.py writes it).

The pydantic ClusterSpec's own JSON Schema plus what its validators check and JSON Schema can
say: patterns, known resources, one volume source, checkpoint dir rules, role counts per
strategy (worker.contract.ROLE_COUNTS), args need command. Helm checks values against it before
rendering anything. What it cannot say, templates/_validate.tpl checks with the messages of
`messages()`. A developer-time module: nothing at run time imports it.
"""

from __future__ import annotations

import copy
import json
import string
from typing import Any

from launcher import k8s_contract
from launcher.cluster_spec import checkpoints, names, pod_fields, role_spec, spec
from launcher.k8s_contract import Workload
from worker import contract
from worker.contract import Role, Strategy

GPU = role_spec.GPU
COMMAND = "python scripts/generate.py --write"  # what regenerates the chart's files

# The chart's own refusals, of values the model does not have (the release's name and
# namespace stand in for empty ones; codeArchive for code), as str.format strings.
RELEASE_NAME_PROBLEM = (
    'empty, so the release name "{release}" is the cluster name, but it is '
    "{problem}; set name in the values or choose another release name"
)
NAMESPACE_MISMATCH = (
    'the values say "{namespace}" but the release namespace is "{release}"; the '
    "pods' TF_CONFIG addresses contain it: install with --namespace {namespace},"
    ' or set namespace to "" (the release namespace)'
)
CODE_NEEDS_ARCHIVE = (
    "the chart cannot read a local directory; set codeArchive to its archive in "
    "base64 (python -m launcher code-archive DIR > code.b64, then --set-file "
    "codeArchive=code.b64), or use the values of `python -m launcher render "
    "--helm-values SPEC`"
)
PROMETHEUS_RULE_WITHOUT_CRD = (
    "the cluster serves no monitoring.coreos.com/v1 PrometheusRule (the Prometheus Operator's CRDs are not "
    "installed): install them, or load docs/tfk8s-alerts.yaml into Prometheus as a rule file"
)

# The chart's values that the spec does not have (JSON Schema each): pod extras for Helm users
# (templates/_job.tpl), and the dashboard and alerts as objects (templates/monitoring.yaml).
_OBJECTS = {"type": "array", "items": {"type": "object"}}
_SHIPPED = {
    "type": "object",
    "properties": {
        "enabled": {"type": "boolean"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "additionalProperties": False,
}
CHART_ONLY = {
    "affinity": {"type": "object", "description": "every pod's affinity (Kubernetes Affinity), e.g. nodeAffinity"},
    "sidecars": {
        **_OBJECTS,
        "description": "containers run beside the task in every pod (native sidecars: initContainers with "
        "restartPolicy Always, which never keep a Job from completing; Kubernetes >= 1.29)",
    },
    "extraVolumes": {**_OBJECTS, "description": "volumes added to every pod"},
    "extraVolumeMounts": {**_OBJECTS, "description": "volumeMounts added to the task's container"},
    "platform": {
        "type": "string",
        "default": "",
        "description": "the Kubernetes cluster as the model dir's OWNER.json names it; empty: read at helm "
        "install (kubernetes:ca- and the CA's sha256 in ConfigMap kube-root-ca.crt), none under helm template",
    },
    "grafanaDashboard": {
        **_SHIPPED,
        "description": "enabled: the Grafana dashboard as a ConfigMap carrying `labels` (docs/metrics.md)",
    },
    "prometheusRule": {
        **_SHIPPED,
        "description": "enabled: the alert rules as a PrometheusRule carrying `labels` (docs/metrics.md)",
    },
}


def messages() -> dict[str, str]:
    """What templates/_validate.tpl refuses with ($c.messages): the launcher's own str.format
    texts as they are; the chart's tfk8s.message fills each {field}."""
    table = {
        "dns1035TooLong": names.DNS1035_TOO_LONG,
        "notDns1035": names.NOT_DNS1035,
        "generatedName": names.GENERATED_NAME,
        "reservedEnv": role_spec.RESERVED_ENV_SET,
        "envNamedTwice": role_spec.ENV_NAMED_TWICE,
        "gpuNotInLimits": role_spec.GPU_NOT_IN_LIMITS,
        "dirNotUnderMount": spec.DIR_NOT_UNDER_MOUNT,
        "mwmsUnshared": checkpoints.MWMS_UNSHARED,
        "mwmsHostPath": checkpoints.HOSTPATH_PER_NODE,
        "mwmsEmptyDir": checkpoints.EMPTYDIR_PER_POD,
        "releaseName": RELEASE_NAME_PROBLEM,
        "namespaceMismatch": NAMESPACE_MISMATCH,
        "codeNeedsArchive": CODE_NEEDS_ARCHIVE,
        "metricsOnGrpcPort": spec.METRICS_ON_GRPC_PORT,
        "podMonitorWithoutPort": spec.POD_MONITOR_WITHOUT_PORT,
        "podMonitorWithoutCrd": spec.POD_MONITOR_WITHOUT_CRD,
        "prometheusRuleWithoutCrd": PROMETHEUS_RULE_WITHOUT_CRD,
        "fatalCodesNeedCommand": spec.FATAL_CODES_NEED_COMMAND,
        "fatalCodesNeedNever": spec.FATAL_CODES_NEED_NEVER,
        "fatalCodeReserved": spec.FATAL_CODE_RESERVED,
        "fatalCodeTwice": spec.FATAL_CODE_TWICE,
        "exceptionsNeedCommand": spec.EXCEPTIONS_NEED_COMMAND,
        "exceptionsNeedNever": spec.EXCEPTIONS_NEED_NEVER,
        "exceptionInBoth": spec.EXCEPTION_IN_BOTH,
        "dataServiceFlagWithoutService": spec.DATA_SERVICE_FLAG_WITHOUT_SERVICE,
        # a role's pod fields (pod_fields.role_problems); the homes of the keys a podTemplate may
        # not set are the contract's podPolicy (gen_chart.pod_policy)
        "podSpecKey": pod_fields.POD_SPEC_KEY,
        "templateMetadata": pod_fields.TEMPLATE_METADATA,
        "podSecurityKey": pod_fields.POD_SECURITY_KEY,
        "containerWithoutName": pod_fields.CONTAINER_WITHOUT_NAME,
        "watcherChanged": pod_fields.WATCHER_CHANGED,
        "taskContainerKey": pod_fields.TASK_CONTAINER_KEY,
        "taskContainerOther": pod_fields.TASK_CONTAINER_OTHER,
        "taskEnvPlain": pod_fields.TASK_ENV_PLAIN,
        "taskEnvReserved": pod_fields.TASK_ENV_RESERVED,
        "taskSecurityKey": pod_fields.TASK_SECURITY_KEY,
        "reservedContainer": pod_fields.RESERVED_CONTAINER,
        "envSetTwice": pod_fields.ENV_SET_TWICE,
        "volumeWithoutName": pod_fields.VOLUME_WITHOUT_NAME,
        "reservedVolume": pod_fields.RESERVED_VOLUME,
        "volumeNamedTwice": pod_fields.VOLUME_NAMED_TWICE,
        "volumeType": pod_fields.VOLUME_TYPE,
        "mountWithoutVolume": pod_fields.MOUNT_WITHOUT_VOLUME,
        "mountWithoutPath": pod_fields.MOUNT_WITHOUT_PATH,
        "reservedMountPath": pod_fields.RESERVED_MOUNT_PATH,
        "reservedLabel": pod_fields.RESERVED_LABEL,
        # the values Pod Security restricted allows (pod_fields.profile_problems, host_problems,
        # security_value_problems); the allowed lists are podPolicy's
        "seLinuxType": pod_fields.SELINUX_TYPE,
        "seLinuxSet": pod_fields.SELINUX_SET,
        "appArmorType": pod_fields.APPARMOR_TYPE,
        "unsafeSysctl": pod_fields.UNSAFE_SYSCTL,
        "hostSet": pod_fields.HOST_SET,
        "addedSecurity": pod_fields.ADDED_SECURITY,
        "addedCapability": pod_fields.ADDED_CAPABILITY,
        "seccompType": pod_fields.SECCOMP_TYPE,
    }
    for key, text in table.items():
        plain_fields(key, text)
    return table


def plain_fields(key: str, text: str) -> None:
    """The chart fills `{name}` and nothing more: no format spec, conversion or literal brace."""
    for literal, field, fmt, conversion in string.Formatter().parse(text):
        if "{" in literal or "}" in literal or fmt or conversion or (field is not None and not field.isidentifier()):
            raise ValueError(f"message {key}: the chart can fill only plain {{name}} fields: {text!r}")


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


def _no_role_account(roles) -> dict:
    """No roles.<role>.serviceAccountName of its own for these roles."""
    return {
        "properties": {
            "roles": {
                "properties": {role.value: {"properties": {"serviceAccountName": {"type": "null"}}} for role in roles}
            }
        }
    }


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
    common = [role for role in contract.COUNTED_ROLES if len({contract.ROLE_COUNTS[s][role] for s in Strategy}) == 1]
    rules = []
    for strategy in Strategy:
        then = [
            _count_rule(role, contract.ROLE_COUNTS[strategy][role])
            for role in contract.COUNTED_ROLES
            if role not in common
        ]
        rules.append(
            {
                "if": {"required": ["strategy"], "properties": {"strategy": {"const": strategy.value}}},
                "then": _merge(*(rule for rule in then if rule)),
            }
        )
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
    reserved = ", ".join(k8s_contract.RESERVED_ENV)
    env = {
        "anyOf": [
            {
                "type": "object",
                "patternProperties": {env_name: {"type": "string"}},
                "additionalProperties": False,
            },
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "pattern": env_name},
                        "value": {"type": "string"},
                        "valueFrom": {
                            "type": "object",
                            "minProperties": 1,
                            "maxProperties": 1,
                            "propertyNames": {"enum": list(role_spec.ENV_SOURCES)},
                        },
                    },
                    "required": ["name"],
                    "oneOf": [{"required": ["value"]}, {"required": ["valueFrom"]}],
                    "additionalProperties": False,
                },
            },
        ],
        "description": f"environment variables (names: `{env_name}`): a map, which Helm emits in name order, or "
        "a list of `{name, value}` / `{name, valueFrom}` entries, emitted in its order after the launcher's "
        f"(`render --helm-values` writes the list); {reserved} are set by the launcher",
    }

    # name / namespace: DNS labels, or empty for the release's own name / namespace.
    props["name"].update(
        {
            "maxLength": k8s_contract.MAX_LABEL,
            "pattern": f"^$|{_anchored(k8s_contract.DNS1035_PATTERN)}",
            "description": "cluster name (DNS-1035 label); empty: the Helm release name",
        }
    )
    props["namespace"].update(
        {
            "default": "",
            "maxLength": k8s_contract.MAX_LABEL,
            "pattern": f"^$|{_anchored(k8s_contract.DNS1123_LABEL_PATTERN)}",
            "description": "must equal the release namespace (helm --namespace); empty: that one",
        }
    )
    schema["required"] = [r for r in schema["required"] if r != "name"]
    # The chart cannot read a local dir: it ships the archive given in codeArchive.
    props["codeArchive"] = {
        "type": "string",
        "contentEncoding": "base64",
        "description": "code: the archive of `python -m launcher code-archive DIR` (base64), e.g. "
        "--set-file codeArchive=code.b64; `render --helm-values` includes it",
    }
    # Chart only: added to every pod as given, for what the spec does not cover (the launcher
    # renders none of them; Kubernetes checks them when the objects are created).
    props.update(copy.deepcopy(CHART_ONLY))
    # Helm hands a subchart its parent's `global` values: a chart that depends on this one (to
    # override a define of templates/_job.tpl, say) passes them, and none of ours reads them.
    props["global"] = {"type": "object", "description": "Helm's values shared with a parent chart; tfk8s reads none"}
    props["code"]["anyOf"].insert(0, {"type": "string"})  # code: ./src, the short form
    props["code"]["description"] = "the launcher's local code dir; the chart needs codeArchive instead"
    props["env"] = env
    props["checkpoint"]["description"] = (
        "dir: an absolute path (under volume.mountPath when a volume is set) or a gs:// URL; "
        "unset: `<mountPath>/<namespace>/<name>`, the cluster's own dir"
    )

    role_def["properties"]["env"] = env
    pod_fields_def = _def(schema, _def(schema, props["dataService"])["properties"]["dispatcher"])
    pod_fields_def["properties"]["env"] = env
    del schema["$defs"]["EnvVar"]  # env's entries are spelled out above, for Helm's messages
    # What a role's volumes and podTemplate may not set (pod_fields.py) templates/_validate.tpl
    # refuses, with the launcher's path and message ($c.podPolicy); the schema only shapes them.
    role_def["properties"]["volumes"] = {
        "type": "array",
        "items": {"type": "object"},
        "description": role_def["properties"]["volumes"]["description"],
    }
    role_def["properties"]["podTemplate"] = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}},
                "additionalProperties": False,
            },
            {"type": "null"},
        ],
        "description": role_def["properties"]["podTemplate"]["description"],
    }
    quantity = {
        "anyOf": [
            {"type": "string", "pattern": _anchored(role_spec.QUANTITY.pattern)},
            {"type": "integer", "minimum": 0},
            {"type": "number", "minimum": 0},
        ]
    }
    for key in ("requests", "limits"):
        resources_def["properties"][key] = {
            "type": "object",
            "properties": {name: quantity for name in role_spec.KNOWN_RESOURCES},
            "additionalProperties": False,
        }
    resources_def["if"] = {
        "required": ["requests"],
        "properties": {"requests": {"required": [GPU]}},
    }
    resources_def["then"] = {
        "required": ["limits"],
        "properties": {"limits": {"required": [GPU]}},
    }
    resources_def["description"] = f"{GPU} must be set under limits (requests == limits)"

    program_def["properties"]["module"]["pattern"] = _anchored(k8s_contract.MODULE_NAME_PATTERN)
    volume_def["oneOf"] = [
        {"required": [source], "properties": {source: {"type": "object"}}}
        for source in ("persistentVolumeClaim", "hostPath")
    ]
    volume_def["description"] += " Set exactly one of persistentVolumeClaim or hostPath."
    checkpoint_def["allOf"] = [
        {  # only gs:// as remote storage, otherwise an absolute path
            "if": {"required": ["dir"], "properties": {"dir": {"type": "string", "pattern": "://"}}},
            "then": {"properties": {"dir": {"pattern": "^gs://"}}},
            "else": {"properties": {"dir": {"pattern": "^/"}}},
        },
        {  # a gs:// dir needs no volume
            "if": {"required": ["dir"], "properties": {"dir": {"type": "string", "pattern": "^gs://"}}},
            "then": {"properties": {"volume": {"type": "null"}}},
        },
    ]

    evaluator = Role.EVALUATOR.value
    schema["allOf"] = [
        *_role_count_rules(),
        # args without command: set command too, or use program.args
        {"if": _is_set("args", "array"), "then": _is_set("command", "array")},
        # a supervised role's pods take the spec's account (pod_fields.role_problems): under jobs
        # a strategy's servers, and any evaluator
        *(
            {
                "if": {
                    "required": ["strategy"],
                    "properties": {"strategy": {"const": strategy.value}, "workload": {"const": Workload.JOBS.value}},
                },
                "then": _no_role_account(contract.traits(strategy).servers),
            }
            for strategy in Strategy
            if contract.traits(strategy).servers
        ),
        {"if": _replicas(evaluator, {"minimum": 1}, need=True), "then": _no_role_account((Role.EVALUATOR,))},
        # a role's own command or args need the spec's command (pod_fields.role_problems)
        {
            "if": {"not": _is_set("command", "array")},
            "then": {
                "properties": {
                    "roles": {
                        "properties": {
                            role.value: {"properties": {"command": {"type": "null"}, "args": {"type": "null"}}}
                            for role in contract.COUNTED_ROLES
                        }
                    }
                }
            },
        },
        # spec.QUEUE_NEEDS_JOBSET: Kueue admits a cluster as one unit only as a JobSet
        {
            "if": _is_set("queue", "string"),
            "then": {"required": ["workload"], "properties": {"workload": {"const": Workload.JOBSET.value}}},
        },
        # the chart runs a command of your own behind its supervisor: it needs the command itself
        # (`command: []`, the image's ENTRYPOINT, is the launcher's alone for now)
        {"if": _is_set("command", "array"), "then": {"properties": {"command": {"minItems": 1}}}},
        # command (bring-your-own) and program (built-in worker) exclude each other
        {"if": _is_set("command", "array"), "then": {"properties": {"program": {"type": "null"}}}},
        {  # the built-in evaluator reads the chief's checkpoints: shared volume or gs:// (a command
            # of your own keeps its checkpoints where it chooses)
            "if": {
                "allOf": [
                    _replicas(evaluator, {"minimum": 1}, need=True),
                    {"not": _is_set("command", "array")},
                ]
            },
            "then": {
                "required": ["checkpoint"],
                "properties": {
                    "checkpoint": {
                        "anyOf": [
                            {"required": ["volume"], "properties": {"volume": {"type": "object"}}},
                            {"required": ["dir"], "properties": {"dir": {"pattern": "^gs://"}}},
                        ]
                    }
                },
            },
        },
    ]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "tfk8s cluster spec (Helm values)",
        "description": f"Generated from launcher.cluster_spec.spec.ClusterSpec and worker/contract.py by "
        f"`{COMMAND}`; do not edit by hand.",
        # not the model's own description: its docstring is for developers
        **{key: value for key, value in schema.items() if key != "description"},
    }


def schema_text() -> str:
    return json.dumps(generate_schema(), indent=2) + "\n"
