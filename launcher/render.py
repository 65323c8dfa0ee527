"""Render a spec into Kubernetes objects with the jinja2 templates in manifests/. Pure: no cluster.

Objects, in apply order: the root ConfigMap, the headless Service, the supervisor's RBAC (only
when some role must be ended by it), and one Indexed Job per role with replicas.
"""
from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from importlib import resources

import jinja2
import yaml

from launcher import names, podenv, tfconfig
from launcher.spec import ClusterSpec, success_role, supervised_roles, Strategy
from worker.errors import EXIT_CONFIG, EXIT_PREEMPTED

MANAGED_BY = "tfk8s"
SUPERVISOR_DIR = "/var/run/tfk8s"
CONTAINER = "tensorflow"
INDEX_FIELD_PATH = f"metadata.annotations['{names.INDEX_ANNOTATION}']"
SPEC_HASH_ANNOTATION = "tfk8s.io/spec-hash"
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_STRATEGY = "tfk8s.io/strategy"
try:
    _YamlLoader = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml: slower, same result
    _YamlLoader = yaml.SafeLoader


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: resources.files("manifests").joinpath(name).read_text()
        ),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["j"] = yaml_json
    return env


# A JSON surrogate pair escape not preceded by an escaped backslash.
_SURROGATE_PAIR = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def yaml_json(value) -> str:
    """JSON text that YAML reads back as the same value (JSON is YAML, nearly).

    Every value enters the templates this way, so nothing depends on YAML quoting rules. The one
    gap: JSON writes characters beyond U+FFFF as surrogate pairs, which YAML refuses; YAML's own
    \\UXXXXXXXX escape says the same thing.
    """
    text = json.dumps(value, separators=(",", ":"))

    def join(match: re.Match) -> str:
        high, low = int(match.group(2), 16), int(match.group(3), 16)
        code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
        return f"{match.group(1)}\\U{code:08x}"

    return _SURROGATE_PAIR.sub(join, text)


def supervisor_source() -> str:
    return resources.files("launcher").joinpath("supervise.py").read_text()


def spec_hash(spec: ClusterSpec) -> str:
    canonical = json.dumps(spec.model_dump(by_alias=True, mode="json"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def selector_labels(name: str) -> dict[str, str]:
    return {LABEL_NAME: MANAGED_BY, LABEL_INSTANCE: name}


def render(spec: ClusterSpec) -> list[dict]:
    """The cluster's objects as plain dicts, ready for server-side apply."""
    context = _context(spec)
    out: list[dict] = []
    for template, extra in _documents(spec, context):
        text = _environment().get_template(template).render(**context, **extra)
        out.extend(doc for doc in yaml.load_all(text, Loader=_YamlLoader) if doc)
    return out


def _documents(spec: ClusterSpec, context: dict):
    yield "root.yaml.j2", {}
    yield "service.yaml.j2", {}
    if context["watched_jobs"]:
        yield "rbac.yaml.j2", {}
    for role in spec.active_roles():
        yield "job.yaml.j2", {"job": _job(spec, role, context)}


def _context(spec: ClusterSpec) -> dict:
    labels = {
        **spec.labels, **selector_labels(spec.name),
        LABEL_MANAGED_BY: MANAGED_BY, LABEL_STRATEGY: spec.strategy.value,
    }
    supervised = supervised_roles(spec)
    watched = [names.job(spec.name, success_role(spec))] if supervised else []
    root_data = {}
    if supervised:
        root_data["supervise.py"] = supervisor_source()
    return {
        "names": {
            "root": names.root(spec.name),
            "service": names.service(spec.name),
            "supervisor": names.supervisor_account(spec.name),
        },
        "ns": spec.namespace,
        "labels": labels,
        "annotations": dict(spec.annotations),
        "root_data": root_data,
        "selector": selector_labels(spec.name),
        "port": spec.port,
        "watched_jobs": watched,
        "supervised": supervised,
        "create_service_account": bool(supervised) and spec.service_account_name is None,
        "service_account": spec.service_account_name or names.supervisor_account(spec.name),
        "image": spec.image,
        "image_pull_policy": spec.image_pull_policy,
        "restart_policy": spec.restart_policy,
        "pod_failure_policy": pod_failure_policy(spec),
        "termination_grace_period_seconds": spec.termination_grace_period_seconds,
        "backoff_limit": spec.backoff_limit,
        "active_deadline_seconds": spec.active_deadline_seconds,
        "ttl_seconds_after_finished": spec.ttl_seconds_after_finished,
        "security": spec.security_context,
        "index_field_path": INDEX_FIELD_PATH,
        "address": tfconfig.kubernetes_address(spec),
    }


def pod_failure_policy(spec: ClusterSpec) -> dict | None:
    """Which pod failures count against backoffLimit (restartPolicy Never only: Kubernetes
    refuses a podFailurePolicy with OnFailure). First matching rule wins.

    - exit EXIT_PREEMPTED (143): SIGTERM; the built-in worker saved a checkpoint of the current
      step first, and a server (or the supervisor around it) that died of SIGTERM reports the
      same code. The replacement pod resumes; not a failure.
    - condition DisruptionTarget: eviction, node drain, preemption; not the task's fault.
    - built-in worker only, exit EXIT_CONFIG (2): bad arguments or program; a retry fails the
      same way, so the Job fails at once.
    """
    if spec.restart_policy != "Never":
        return None
    rules = [
        {"action": "Ignore", "onExitCodes": {
            "containerName": CONTAINER, "operator": "In", "values": [EXIT_PREEMPTED]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]
    if spec.builtin:
        rules.append({"action": "FailJob", "onExitCodes": {
            "containerName": CONTAINER, "operator": "In", "values": [EXIT_CONFIG]}})
    return {"rules": rules}


def _job(spec: ClusterSpec, role: str, context: dict) -> dict:
    cfg = spec.roles.get(role)
    supervised = role in context["supervised"]
    command = podenv.command(spec)
    env = {**podenv.launcher_env(spec, role), "HOME": "/tmp"}
    if supervised:
        command = ["python3", f"{SUPERVISOR_DIR}/supervise.py", "--", *command]
        env.update({
            "TFK8S_WATCH_JOB": names.job(spec.name, success_role(spec)),
            "TFK8S_NAMESPACE": spec.namespace,
            "TFK8S_GRACE_SECONDS": str(spec.evaluator_grace_seconds if role == "evaluator" else 0),
            "TFK8S_POD_GRACE_SECONDS": str(spec.termination_grace_period_seconds),
        })
    mounts = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict] = [{"name": "tmp", "emptyDir": {}}]
    volume = spec.checkpoint.volume
    if volume is not None:
        mounts.append({"name": "checkpoint", "mountPath": volume.mount_path})
        if volume.persistent_volume_claim is not None:
            source = {"persistentVolumeClaim": {"claimName": volume.persistent_volume_claim.claim_name}}
        else:
            source = {"hostPath": {"path": volume.host_path.path, "type": "DirectoryOrCreate"}}
        volumes.append({"name": "checkpoint", **source})
    elif not spec.checkpoint.is_remote:
        # No volume: an emptyDir at the checkpoint dir. The image's filesystem is not writable
        # by the non-root user, and an emptyDir outlives container restarts in place (a crashed
        # chief resumes from it); it goes with the pod.
        mounts.append({"name": "checkpoint", "mountPath": spec.checkpoint.dir})
        volumes.append({"name": "checkpoint", "emptyDir": {}})
    if supervised:
        mounts.append({"name": "supervisor", "mountPath": SUPERVISOR_DIR, "readOnly": True})
        volumes.append({"name": "supervisor", "configMap": {
            "name": names.root(spec.name), "items": [{"key": "supervise.py", "path": "supervise.py"}],
        }})
    resources_ = {k: v for k, v in (("requests", cfg.resources.requests),
                                     ("limits", cfg.resources.limits)) if v}
    success_policy = None
    if spec.strategy is Strategy.multi_worker_mirrored and role == "worker":
        # Worker 0 is the chief under MWMS: its success is the Job's success.
        success_policy = {"rules": [{"succeededIndexes": "0"}]}
    service_account = spec.service_account_name or (
        names.supervisor_account(spec.name) if supervised else None
    )
    return {
        "name": names.job(spec.name, role),
        "replicas": cfg.replicas,
        "labels": {**context["labels"], LABEL_COMPONENT: role},
        "command": command,
        "env": env,
        "tf_config": tfconfig.tf_config_template(spec, role, context["address"]),
        "in_training_cluster": role != "evaluator",
        "resources": resources_,
        "node_selector": cfg.node_selector,
        "tolerations": [t.model_dump(by_alias=True, exclude_none=True) for t in cfg.tolerations],
        "volume_mounts": mounts,
        "volumes": volumes,
        "supervised": supervised,
        "service_account": service_account,
        "success_policy": success_policy,
    }


def pod_tf_configs(spec: ClusterSpec, objects: list[dict]) -> dict[str, dict]:
    """Every pod's TF_CONFIG as Kubernetes will resolve it, read back from the rendered Jobs."""
    out = {}
    for obj in objects:
        if obj["kind"] != "Job":
            continue
        container = obj["spec"]["template"]["spec"]["containers"][0]
        template = next(e["value"] for e in container["env"] if e["name"] == "TF_CONFIG")
        for index in range(obj["spec"]["completions"]):
            out[f"{obj['metadata']['name']}-{index}"] = tfconfig.expand_template(template, index)
    return out


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """Multi-line strings (the supervisor script) as readable literal blocks."""


def _represent_str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def to_yaml(objects: list[dict]) -> str:
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                         explicit_start=True, width=1 << 20)


def to_json(objects: list[dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2)


def helm_values(spec: ClusterSpec) -> dict:
    """values.yaml for charts/tfk8s: the spec itself, every default spelled out."""
    return spec.model_dump(by_alias=True, mode="json")


class _QuotedDumper(yaml.SafeDumper):
    """Every string double-quoted: Helm's YAML 1.1 reader would take a plain y, N, 1e-3 or 0o17
    for a boolean or a number."""


_QuotedDumper.add_representer(
    str, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"'))


def helm_values_yaml(spec: ClusterSpec) -> str:
    return yaml.dump(helm_values(spec), Dumper=_QuotedDumper, sort_keys=False,
                     allow_unicode=True, width=1 << 20)
