"""What the templates (manifests/*.j2) lay out, typed: the plan itself, and the few values render
derives from it for Kubernetes (pure). A template reads the plan's own fields (`cluster`, `spec`,
a Job's `role`); the labels and a task's pod env are assembled here, once; no object is built
here (tests/launcher/render/test_one_form.py)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from importlib import resources

from launcher import k8s_contract
from launcher.cluster_spec import names
from launcher.cluster_spec.spec import ClusterSpec
from launcher.plan import storage
from launcher.plan.plan import ClusterPlan, RolePlan, env_list
from launcher.render import tfconfig
from launcher.render.code_render import BYTES_ANNOTATION, SHA256_ANNOTATION
from launcher.render.job_failure import backoff, pod_failure_policy
from launcher.render.network_policy import NetworkPolicies, network_policies
from worker import contract

SUPERVISOR_SCRIPTS = ("supervise.py", "job_watch.py")  # both in the root ConfigMap, side by side


@dataclass(frozen=True)
class ObjectNames:
    root: str  # the ConfigMap (or the JobSet) that owns every other object
    service: str  # the headless Service, the pods' subdomain
    supervisor: str  # the supervisor's ServiceAccount, Role and RoleBinding


@dataclass(frozen=True)
class ClusterContext:
    """What every template of the cluster sees."""

    cluster: ClusterPlan
    spec: ClusterSpec
    names: ObjectNames
    labels: dict[str, str]  # every object's (labels())
    selector: dict[str, str]  # what every pod of the cluster carries and is selected by
    annotations: dict[str, str]  # every object's: the spec's
    pod_annotations: dict[str, str]  # the spec's and the scrape annotations
    root_data: dict[str, str]  # the supervisor's scripts, when some role is supervised
    supervisor_scripts: tuple[str, ...]
    storage_volume: str  # the model dir's volume's name (launcher/plan/storage.py)
    network_policies: NetworkPolicies | None
    code_annotations: dict[str, str]  # the code ConfigMap's: the digest and size besides the spec's
    code_archive: str | None  # the code's archive in base64, for its ConfigMap


@dataclass(frozen=True)
class JobContext:
    """One role's Job (manifests/job.yaml.j2)."""

    role: RolePlan
    labels: dict[str, str]
    env: list[dict]  # the task container's after its index, TF_CONFIG and node name (pod_env)
    tf_config: str  # TF_CONFIG with the index left to Kubernetes (launcher/render/tfconfig.py)
    resources: dict
    node_selector: dict[str, str]
    backoff: dict[str, int]
    pod_failure_policy: dict | None  # the role's (launcher/render/job_failure.py)
    # The role's pod fields (roles.<role>: launcher/cluster_spec/role_spec.py; a data service
    # role has none of them, ClusterSpec.pods); its podTemplate is merged into the rendered pod
    # (render.py).
    image: str  # the task container's: the role's, else the spec's
    pod_labels: dict[str, str]  # the role's labels under the Job's
    pod_annotations: dict[str, str]  # the pods' (the cluster's) with the role's over them
    affinity: dict | None
    topology_spread_constraints: list[dict]
    image_pull_secrets: list[dict]  # the spec's, every pod's
    volumes: list[dict]  # the role's, after the launcher's
    volume_mounts: list[dict]  # the role's, in the task's container after the launcher's


def selector_labels(name: str) -> dict[str, str]:
    return {k8s_contract.LABEL_NAME: k8s_contract.MANAGED_BY, k8s_contract.LABEL_INSTANCE: name}


def labels(spec: ClusterSpec, component: str | None = None) -> dict[str, str]:
    """The labels of every object of the cluster; a pod's and its Job's name its role too."""
    out = {
        **spec.labels,
        **selector_labels(spec.name),
        k8s_contract.LABEL_MANAGED_BY: k8s_contract.MANAGED_BY,
        k8s_contract.LABEL_STRATEGY: spec.strategy.value,
    }
    return out if component is None else {**out, k8s_contract.LABEL_COMPONENT: component}


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


def supervisor_sources() -> dict[str, str]:
    """The supervisor's scripts by file name, as the root ConfigMap carries them."""
    return {name: resources.files("launcher.pod").joinpath(name).read_text() for name in SUPERVISOR_SCRIPTS}


def cluster_context(cluster: ClusterPlan) -> ClusterContext:
    spec, code = cluster.spec, cluster.code
    return ClusterContext(
        cluster=cluster,
        spec=spec,
        names=ObjectNames(
            root=names.root(spec.name),
            service=names.service(spec.name),
            supervisor=names.supervisor_account(spec.name),
        ),
        labels=labels(spec),
        selector=selector_labels(spec.name),
        annotations=dict(spec.annotations),
        pod_annotations={**spec.annotations, **scrape_annotations(spec)},
        root_data=supervisor_sources() if cluster.supervised else {},
        supervisor_scripts=SUPERVISOR_SCRIPTS,
        storage_volume=storage.VOLUME_NAME,
        network_policies=network_policies(cluster),
        code_annotations={}
        if code is None
        else {**spec.annotations, SHA256_ANNOTATION: code.digest, BYTES_ANNOTATION: str(code.size)},
        code_archive=None if code is None else base64.b64encode(code.bundle.archive).decode(),
    )


def job_context(cluster: ClusterPlan, role: RolePlan, platform: str | None, run: str | None = None) -> JobContext:
    spec = cluster.spec
    cfg = spec.pods(role.role)
    job_labels = labels(spec, role.role.value)
    return JobContext(
        role=role,
        labels=job_labels,
        env=pod_env(cluster, role, platform, run),
        tf_config=tfconfig.tf_config_template(cluster, role.role, tfconfig.kubernetes_address(cluster)),
        resources={k: v for k, v in (("requests", cfg.resources.requests), ("limits", cfg.resources.limits)) if v},
        node_selector=cfg.node_selector,
        backoff=backoff(cluster.failure_of(role.role), role.role),
        pod_failure_policy=pod_failure_policy(cluster.failure_of(role.role)),
        image=cfg.image or spec.image,
        pod_labels={**cfg.labels, **job_labels},
        pod_annotations={**spec.annotations, **scrape_annotations(spec), **cfg.annotations},
        affinity=cfg.affinity,
        topology_spread_constraints=cfg.topology_spread_constraints,
        image_pull_secrets=[secret.model_dump() for secret in spec.image_pull_secrets],
        volumes=cfg.volumes,
        volume_mounts=cfg.volume_mounts,
    )


def pod_env(cluster: ClusterPlan, role: RolePlan, platform: str | None, run: str | None = None) -> list[dict]:
    """A task's env in its pod after its index, TF_CONFIG and node name, as Kubernetes entries:
    the plan's (what every task gets, on Kubernetes and locally), what only a pod needs, then the
    user's in the user's order (plan.env_list). `platform`: the Kubernetes cluster's name for the
    model dir's OWNER.json (submit reads it from the cluster; a render for review has none).
    `run`: the submission's id (worker/contract.py RUN; submit makes one, a review has none)."""
    spec = cluster.spec
    env = {**role.env, **cluster.data_service_env(role.role, tfconfig.kubernetes_address(cluster))}
    if spec.metrics.port is not None:  # the named port, on every interface
        env[contract.METRICS_PORT] = str(spec.metrics.port)
    env["HOME"] = "/tmp"  # the root filesystem is the image's, not the task user's
    if role.supervision is not None:
        env[k8s_contract.GRACE_ENV] = str(role.supervision.grace_seconds)
        env[k8s_contract.POD_GRACE_ENV] = str(role.supervision.stop_grace_seconds)
    if platform is not None:
        env[contract.PLATFORM] = platform
    if run is not None:
        env[contract.RUN] = run
    return [entry.model_dump() for entry in env_list(env, role.user_env)]
