"""Render a plan into Kubernetes objects with the jinja2 templates in manifests/. Pure: no cluster.

Objects, in apply order (the first is the root, which owns the rest):
- workload jobs: the root ConfigMap, the code ConfigMap (with `code:`), the headless Service,
  the supervisor's RBAC (only when some role must be ended by it), the NetworkPolicies (unless
  networkPolicy: false), and one Indexed Job per role with replicas.
- workload jobset: one JobSet (one replicatedJob per role, each the same Indexed Job; JobSet's
  own headless Service), the code ConfigMap, then the root ConfigMap and RBAC only when the
  evaluator is supervised, and the NetworkPolicies.
Every rule comes from the plan (launcher/plan/plan.py); here the objects are only laid out, each
by one template from the typed context (launcher/render/context.py).
"""

from __future__ import annotations

import json

import yaml

from launcher import k8s_contract
from launcher.cluster_spec import names, pod_fields
from launcher.cluster_spec.spec import ClusterSpec
from launcher.plan.plan import ClusterPlan
from launcher.render import templating, tfconfig
from launcher.render.context import cluster_context, job_context
from worker import contract


def render(cluster: ClusterPlan, platform: str | None = None, run: str | None = None) -> list[dict]:
    """The planned cluster's objects as plain dicts, ready for server-side apply; the root first.
    `platform`: what the tasks' TFK8S_PLATFORM names, `run` their TFK8S_RUN (context.pod_env);
    None for a review."""
    context = cluster_context(cluster)
    code = [("code.yaml.j2", {})] if cluster.code is not None else []
    rbac = [("rbac.yaml.j2", {})] if cluster.watched_jobs else []
    policies = [("networkpolicy.yaml.j2", {})] if context.network_policies else []
    policies += [("podmonitor.yaml.j2", {})] if cluster.spec.metrics.pod_monitor else []
    jobs = [("job.yaml.j2", {"job": job_context(cluster, role, platform, run)}) for role in cluster.roles]
    if cluster.jobset is not None:
        rendered = [_with_pod_template(cluster.spec, job) for job in templating.render_all(context, jobs)]
        replicated = zip((role.role.value for role in cluster.roles), rendered)
        documents = [("jobset.yaml.j2", {"jobset": cluster.jobset, "jobs": list(replicated)}), *code]
        if rbac:  # the supervised evaluator's script and RBAC
            documents += [("root.yaml.j2", {}), *rbac]
        return templating.render_all(context, documents + policies)
    # The policies before the Jobs: no pod of the cluster starts without them.
    documents = [("root.yaml.j2", {}), *code, ("service.yaml.j2", {}), *rbac, *policies, *jobs]
    return [_with_pod_template(cluster.spec, obj) for obj in templating.render_all(context, documents)]


def _with_pod_template(spec: ClusterSpec, obj: dict) -> dict:
    """A Job with its role's podTemplate merged into its pod (pod_fields.merge); others as they are."""
    if obj["kind"] != "Job":
        return obj
    overlay = spec.pods(obj["metadata"]["labels"][k8s_contract.LABEL_COMPONENT]).pod_template
    if overlay:
        obj["spec"]["template"] = pod_fields.merge(obj["spec"]["template"], overlay)
    return obj


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
