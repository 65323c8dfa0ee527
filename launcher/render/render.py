"""Render a spec into Kubernetes objects with the jinja2 templates in manifests/. Pure: no cluster.

Objects, in apply order (the first is the root, which owns the rest):
- workload jobs: the root ConfigMap, the headless Service, the supervisor's RBAC (only when some
  role must be ended by it), the NetworkPolicies (unless networkPolicy: false), and one Indexed
  Job per role with replicas.
- workload jobset: one JobSet (one replicatedJob per role, each the same Indexed Job; JobSet's
  own headless Service), then the ConfigMap and RBAC only when the evaluator is supervised, and
  the NetworkPolicies.
Every rule comes from the plan (launcher/plan/plan.py); here the objects are only laid out.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources

import yaml

from launcher import k8s_contract
from launcher.cluster_spec import names
from launcher.cluster_spec.spec import ClusterSpec
from launcher.code_shipping.code_bundle import Bundle
from launcher.k8s_contract import (
    GRACE_ENV,
    NAMESPACE_ENV,
    POD_GRACE_ENV,
    POD_RESTART_POLICY_ENV,
    RESTART_ATTEMPT_ENV,
    RESTART_ATTEMPT_KEY,
    WATCH_JOB_ENV,
)
from launcher.plan.job_failure import backoff, pod_failure_policy
from launcher.plan.plan import ClusterPlan, RolePlan, Supervision, plan
from launcher.render import code_render, supervised_pod, templating, tfconfig
from launcher.render.network_policy import network_policies
from worker import contract

INDEX_FIELD_PATH = f"metadata.annotations['{k8s_contract.INDEX_ANNOTATION}']"


def supervisor_sources() -> dict[str, str]:
    """The supervisor's scripts by file name, as the root ConfigMap carries them."""
    return {name: resources.files("launcher.pod").joinpath(name).read_text() for name in supervised_pod.SCRIPTS}


def spec_hash(spec: ClusterSpec, code: Bundle | None = None) -> str:
    """What a resubmit compares: the spec and its packed code's digest (`code`, as for render)."""
    data = code_render.hashed(spec, code, spec.model_dump(by_alias=True, mode="json"))
    canonical = json.dumps(data, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def scrape_annotations(spec: ClusterSpec) -> dict[str, str]:
    """The conventional annotations a Prometheus scrape config keys on (every pod), or none."""
    metrics = spec.metrics
    if metrics.port is None or not metrics.scrape_annotations:
        return {}
    return {
        k8s_contract.SCRAPE_ANNOTATION: "true",
        k8s_contract.SCRAPE_PORT_ANNOTATION: str(metrics.port),
        k8s_contract.SCRAPE_PATH_ANNOTATION: k8s_contract.METRICS_PATH,
    }


def metrics_env(spec: ClusterSpec) -> dict[str, str]:
    """Where the task serves its metrics in a pod: the named port, on every interface."""
    return {} if spec.metrics.port is None else {contract.METRICS_PORT: str(spec.metrics.port)}


def selector_labels(name: str) -> dict[str, str]:
    return {k8s_contract.LABEL_NAME: k8s_contract.MANAGED_BY, k8s_contract.LABEL_INSTANCE: name}


def render(spec: ClusterSpec, code: Bundle | None = None) -> list[dict]:
    """The cluster's objects as plain dicts, ready for server-side apply; the root first.
    `code`: the spec's code packed (loader.pack_code), required with `code:`."""
    cluster = plan(spec, code)
    context = _context(cluster)
    rbac = [("rbac.yaml.j2", {})] if cluster.watched_jobs else []
    policies = [("networkpolicy.yaml.j2", {})] if context["network_policies"] else []
    policies += [("podmonitor.yaml.j2", {})] if cluster.spec.metrics.pod_monitor else []
    jobs = [("job.yaml.j2", {"job": _job(cluster, role, context)}) for role in cluster.roles]
    if cluster.jobset is not None:
        replicated = zip((role.role.value for role in cluster.roles), templating.render_all(context, jobs))
        documents = [("jobset.yaml.j2", {"jobset": cluster.jobset, "jobs": list(replicated)})]
        if rbac:  # the supervised evaluator's script and RBAC
            documents += [("root.yaml.j2", {}), *rbac]
        return code_render.after_root(cluster, context, templating.render_all(context, documents + policies))
    # The policies before the Jobs: no pod of the cluster starts without them.
    documents = [("root.yaml.j2", {}), ("service.yaml.j2", {}), *rbac, *policies, *jobs]
    return code_render.after_root(cluster, context, templating.render_all(context, documents))


def _context(cluster: ClusterPlan) -> dict:
    spec = cluster.spec
    labels = {
        **spec.labels,
        **selector_labels(spec.name),
        k8s_contract.LABEL_MANAGED_BY: k8s_contract.MANAGED_BY,
        k8s_contract.LABEL_STRATEGY: spec.strategy.value,
    }
    selector = selector_labels(spec.name)
    return {
        "names": {
            "root": names.root(spec.name),
            "service": names.service(spec.name),
            "supervisor": names.supervisor_account(spec.name),
        },
        "ns": spec.namespace,
        "labels": labels,
        "queue_label": k8s_contract.QUEUE_LABEL,
        "annotations": dict(spec.annotations),
        "pod_annotations": {**spec.annotations, **scrape_annotations(spec)},
        "metrics_port": spec.metrics.port,
        "root_data": supervisor_sources() if cluster.supervised else {},
        "selector": selector,
        "network_policies": network_policies(cluster, selector),
        "port": spec.port,
        "watched_jobs": list(cluster.watched_jobs),
        "create_service_account": cluster.create_service_account,
        "service_account": cluster.supervisor_account,
        "jobset_api_version": k8s_contract.JOBSET_API_VERSION,
        "pod_monitor_api_version": k8s_contract.POD_MONITOR_API_VERSION,
        "metrics_port_name": k8s_contract.METRICS_PORT_NAME,
        "metrics_path": k8s_contract.METRICS_PATH,
        "priority_class_name": spec.priority_class_name,
        "image": spec.image,
        "image_pull_policy": spec.image_pull_policy,
        "restart_policy": cluster.failure.restart_policy,
        "pod_failure_policy": pod_failure_policy(cluster.failure),
        "termination_grace_period_seconds": spec.termination_grace_period_seconds,
        "active_deadline_seconds": spec.active_deadline_seconds,
        "ttl_seconds_after_finished": cluster.job_ttl_seconds_after_finished,
        "security": spec.security_context,
        "container": k8s_contract.CONTAINER,
        "index_env": contract.TASK_INDEX,
        "tf_config_env": contract.TF_CONFIG,
        "index_field_path": INDEX_FIELD_PATH,
        "node_name_env": contract.NODE_NAME,  # the node a node fault names (worker/errors.py)
        "node_name_field_path": contract.NODE_NAME_FIELD_PATH,
        "address": tfconfig.kubernetes_address(cluster),
    }


def _job(cluster: ClusterPlan, role: RolePlan, context: dict) -> dict:
    spec = cluster.spec
    cfg = spec.roles.get(role.role)
    command = list(role.command)
    env = {**role.env, **metrics_env(spec), "HOME": "/tmp"}
    supervision = role.supervision
    watcher = None
    if supervision is not None:
        command = supervised_pod.task_command(command)
        env.update({GRACE_ENV: str(supervision.grace_seconds), POD_GRACE_ENV: str(supervision.stop_grace_seconds)})
        watcher = _watcher(cluster, supervision)
    mounts, volumes = _volumes(cluster, supervised=supervision is not None)
    resources_ = {k: v for k, v in (("requests", cfg.resources.requests), ("limits", cfg.resources.limits)) if v}
    return {
        "name": role.job_name,
        "replicas": role.replicas,
        "labels": {**context["labels"], k8s_contract.LABEL_COMPONENT: role.role.value},
        "command": command,
        "env": env,
        "tf_config": tfconfig.tf_config_template(cluster, role.role, context["address"]),
        "in_training_cluster": role.in_training_cluster,
        "resources": resources_,
        "node_selector": cfg.node_selector,
        "tolerations": list(role.tolerations),
        "volume_mounts": mounts,
        "volumes": volumes,
        "code": code_render.pod_code(cluster),  # init container, mounts, volumes (code:)
        "workdir": role.workdir,
        "watcher": watcher,
        "service_account": role.service_account,
        "success_index": role.success_index,
        "backoff": backoff(cluster.failure, role.role),
    }


def _volumes(cluster: ClusterPlan, supervised: bool) -> tuple[list[dict], list[dict]]:
    """(volumeMounts, volumes): /tmp, the model dir's volume (the plan's storage), the
    supervisor's scripts and shared state."""
    mounts = [{"name": "tmp", "mountPath": "/tmp"}, *cluster.storage.mounts()]
    volumes: list[dict] = [{"name": "tmp", "emptyDir": {}}, *cluster.storage.volumes()]
    if supervised:
        mounts += supervised_pod.task_mounts()
        volumes += [supervised_pod.scripts_volume(names.root(cluster.name)), *supervised_pod.shared_volumes()]
    return mounts, volumes


def _watcher(cluster: ClusterPlan, supervision: Supervision) -> dict:
    """The job-watch container of a supervised pod (launcher/render/supervised_pod.py)."""
    spec = cluster.spec
    env = [
        {"name": name, "value": value}
        for name, value in (
            (WATCH_JOB_ENV, supervision.watch_job),
            (NAMESPACE_ENV, spec.namespace),
            (POD_RESTART_POLICY_ENV, cluster.failure.restart_policy),
        )
    ]
    if supervision.per_attempt:  # which JobSet attempt this pod belongs to
        env.append(
            {
                "name": RESTART_ATTEMPT_ENV,
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{RESTART_ATTEMPT_KEY}']"}},
            }
        )
    watcher = supervised_pod.watcher()
    return {
        "name": watcher.pop("name"),
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        **watcher,
        "env": env,
    }


def job_specs(objects: list[dict]) -> list[tuple[str, dict]]:
    """(Job name, Job spec) of every Job the objects make: our Jobs, or a JobSet's children."""
    out = []
    for obj in objects:
        if obj["kind"] == "Job":
            out.append((obj["metadata"]["name"], obj["spec"]))
        elif obj["kind"] == "JobSet":
            out += [
                (names.job(obj["metadata"]["name"], rj["name"], k8s_contract.Workload.JOBSET), rj["template"]["spec"])
                for rj in obj["spec"]["replicatedJobs"]
            ]
    return out


def pod_tf_configs(spec: ClusterSpec, objects: list[dict]) -> dict[str, dict]:
    """Every pod's TF_CONFIG as Kubernetes will resolve it, read back from the rendered Jobs."""
    out = {}
    for job_name, job_spec in job_specs(objects):
        container = job_spec["template"]["spec"]["containers"][0]
        template = next(e["value"] for e in container["env"] if e["name"] == contract.TF_CONFIG)
        for index in range(job_spec["completions"]):
            out[f"{job_name}-{index}"] = tfconfig.expand_template(template, index)
    return out


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """Multi-line strings (the supervisor script) as readable literal blocks."""


def _represent_str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def to_yaml(objects: list[dict]) -> str:
    return yaml.dump_all(
        objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False, explicit_start=True, width=1 << 20
    )


def to_json(objects: list[dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2)
