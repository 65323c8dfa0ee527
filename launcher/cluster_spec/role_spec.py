"""A role's part of cluster.yaml (roles.<role>): replicas, resources, env, scheduling, its own
image, command, volumes and a partial pod template; launcher/cluster_spec/spec.py holds the rest
of the spec. The Kubernetes-shaped values are checked in launcher/cluster_spec/pod_fields.py."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator
from pydantic.alias_generators import to_camel

from launcher import k8s_contract
from worker.contract import Role

# Resource names a TF pod may ask for; anything else is most likely a typo.
GPU = "nvidia.com/gpu"
KNOWN_RESOURCES = ("cpu", "memory", "ephemeral-storage", GPU)
QUANTITY = re.compile(r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i?|m|k)?$")
_ENV_NAME = re.compile(k8s_contract.ENV_NAME_PATTERN)
# The messages, str.format strings (the chart fills the same ones: scripts/chart_schema.py).
GPU_NOT_IN_LIMITS = (
    f"{GPU} must be set under limits (Kubernetes requires requests == limits "
    "for extended resources); move it to resources.limits"
)
RESERVED_ENV_SET = "{key} is set by the launcher for every pod; remove it"
ENV_NAMED_TWICE = "{key} is named twice: give each name once"
# Where a value may come from besides `value` (Kubernetes' EnvVarSource): what a pod's env can
# read without a volume of the user's.
ENV_SOURCES = ("secretKeyRef", "configMapKeyRef", "fieldRef", "resourceFieldRef")
ENV_DESCRIPTION = (
    "a map `{NAME: value}`, or Kubernetes' list `[{name, value}]` / `[{name, valueFrom}]` (valueFrom: "
    + ", ".join(ENV_SOURCES)
    + "); kept in the order written, after the launcher's variables, so a value's `$(NAME)` reads an "
    "earlier one (docs/spec.md#env)"
)


class SpecModel(BaseModel):
    """Every part of the spec: camelCase keys like Kubernetes objects, unknown keys refused."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)


class Resources(SpecModel):
    requests: dict[str, str | int | float] = Field(default_factory=dict)
    limits: dict[str, str | int | float] = Field(default_factory=dict)

    @field_validator("requests", "limits")
    @classmethod
    def _known_quantities(cls, value: dict) -> dict[str, str]:
        out = {}
        for key, qty in value.items():
            if key not in KNOWN_RESOURCES:
                raise ValueError(f"unknown resource {key!r}; use one of {', '.join(KNOWN_RESOURCES)}")
            text = str(qty)
            if not QUANTITY.match(text):
                raise ValueError(f"{key}: {text!r} is not a Kubernetes quantity (e.g. 500m, 2, 4Gi)")
            out[key] = text
        return out

    @model_validator(mode="after")
    def _gpu_in_limits(self) -> "Resources":
        if GPU in self.requests and self.requests[GPU] != self.limits.get(GPU):
            raise ValueError(GPU_NOT_IN_LIMITS)
        return self

    @property
    def gpus(self) -> bool:
        """Whether the pod gets GPUs (a GPU is set under limits, requests == limits)."""
        return str(self.limits.get(GPU, "0")) != "0"


class Toleration(SpecModel):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class EnvVar(SpecModel):
    """One entry of an `env`, as Kubernetes writes a container's: a value, or a valueFrom."""

    name: str
    value: str | None = None
    value_from: dict | None = None

    @model_serializer
    def _as_kubernetes(self) -> dict:
        """The entry as a pod spec writes it: no null key (the chart's values and the spec hash)."""
        if self.value_from is not None:
            return {"name": self.name, "valueFrom": self.value_from}
        return {"name": self.name, "value": self.value}


EnvList = list[EnvVar]


class PodFields(SpecModel):
    """What a role's pods get: a training role's (RoleSpec) and each data service role's."""

    resources: Resources = Field(
        default_factory=Resources,
        description="`requests`/`limits` of cpu, memory, ephemeral-storage, `nvidia.com/gpu` (GPUs under limits)",
    )
    env: EnvList = Field(
        default_factory=list,
        description="this role's environment, after the spec's `env` (a name of both: this value, in the spec's "
        "place); " + ENV_DESCRIPTION,
    )
    node_selector: dict[str, str] = Field(default_factory=dict, description="this role's pods' nodeSelector")
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Kubernetes tolerations of this role's pods"
    )

    @field_validator("env", mode="before", json_schema_input_type=dict[str, str] | EnvList)
    @classmethod
    def _env_as_list(cls, value: object) -> object:
        return env_entries(value)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: EnvList) -> EnvList:
        return check_env(value)


class RolePodFields(PodFields):
    """A training role's pods besides PodFields: its own image, command, volumes, scheduling,
    metadata and podTemplate. The data service's roles take none of these: they run the spec's
    image and the built-in worker (ClusterSpec.pods)."""

    image: str | None = Field(None, min_length=1, description="this role's task image, over the spec's `image`")
    command: list[str] | None = Field(
        None,
        description="this role's own command (with only its own `args`), over the spec's `command`, which it needs",
    )
    args: list[str] | None = Field(
        None, description="the arguments of this role's command, or of the spec's `command` over its `args`"
    )
    volumes: list[dict] = Field(
        default_factory=list,
        description=(
            "Kubernetes volumes added to this role's pods (data PVCs, ConfigMaps, Secrets): the kinds "
            "Pod Security `restricted` admits, no `hostPath`"
        ),
    )
    volume_mounts: list[dict] = Field(
        default_factory=list, description="Kubernetes volumeMounts of `volumes` in the task's container"
    )
    affinity: dict | None = Field(None, description="this role's pods' Kubernetes affinity")
    topology_spread_constraints: list[dict] = Field(
        default_factory=list, description="this role's pods' Kubernetes topologySpreadConstraints"
    )
    service_account_name: str | None = Field(
        None,
        min_length=1,
        description="this role's pods' service account, over the spec's (not for a supervised role: docs/security.md)",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="added to this role's pods")
    annotations: dict[str, str] = Field(default_factory=dict, description="added to this role's pods")
    pod_template: dict | None = Field(
        None,
        description="a partial pod template (its `spec`) merged into this role's pods for any other field: "
        "maps key by key, named lists by `name`; what it may not set: docs/spec.md#pod-template",
    )


class _Replicas(SpecModel):
    replicas: int = Field(
        default=0, ge=0, le=10000, description="how many tasks of this role (each strategy's counts: docs/spec.md)"
    )


class RoleSpec(RolePodFields, _Replicas):  # replicas first, in the spec reference too
    pass


# One value: Linux refuses to start a process with an environment string over 128 KiB
# (MAX_ARG_STRLEN: `submit --local` failed with "Argument list too long"), and every pod of
# every role repeats it in its Job. Data belongs in a file (code:, a volume), not in env.
MAX_ENV_VALUE_BYTES = 32 * 1024


def env_entries(value: object) -> object:
    """`env` as its list of entries: a map `{NAME: value}` becomes `[{name, value}]` in the
    map's order (YAML's, as written); a list is Kubernetes' form already."""
    if not isinstance(value, dict):
        return value
    for name, item in value.items():
        if not isinstance(item, str):  # as a string field refuses it, with the name to quote
            raise ValueError(f'{name}: {item!r} is not a string: quote it ({name}: "{item}")')
    return [{"name": name, "value": item} for name, item in value.items()]


def check_env(entries: EnvList) -> EnvList:
    """What Kubernetes and the launcher refuse in an env list, entry by entry."""
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        key = entry.name
        at = f"entry {i} ({key})" if key else f"entry {i}"
        if not _ENV_NAME.match(key):
            raise ValueError(f"{key!r} is not a valid environment variable name")
        if key in k8s_contract.RESERVED_ENV:
            raise ValueError(RESERVED_ENV_SET.format(key=key))
        if key in seen:
            raise ValueError(ENV_NAMED_TWICE.format(key=key))  # the chart's text too
        seen.add(key)
        if (entry.value is None) == (entry.value_from is None):
            raise ValueError(f"{at}: give either value or valueFrom ({', '.join(ENV_SOURCES)})")
        if entry.value_from is not None:
            _check_value_from(at, entry.value_from)
            continue
        size = len(entry.value.encode())
        if size > MAX_ENV_VALUE_BYTES:
            raise ValueError(
                f"{key} is {size // 1024} KiB, over the {MAX_ENV_VALUE_BYTES // 1024}"
                " KiB an env value may have: put the data in a file (code:, a "
                "volume) and pass its path"
            )
    return entries


def _check_value_from(at: str, source: dict) -> None:
    """One source of ENV_SOURCES, in Kubernetes' shape (k8s_shapes: the API's own models)."""
    from launcher.cluster_spec import k8s_shapes  # the kubernetes client, only for a valueFrom

    kinds = list(source)
    if len(kinds) != 1 or kinds[0] not in ENV_SOURCES:
        raise ValueError(
            f"{at}: valueFrom takes one of {', '.join(ENV_SOURCES)}, not {', '.join(map(str, kinds)) or 'none'}"
        )
    problems = k8s_shapes.problems(source, "V1EnvVarSource", "valueFrom")
    if problems:
        raise ValueError(f"{at}: " + "; ".join(f"{path}: {message}" for path, message in problems))


class Roles(SpecModel):
    chief: RoleSpec = Field(default_factory=RoleSpec)
    worker: RoleSpec = Field(default_factory=RoleSpec)
    ps: RoleSpec = Field(default_factory=RoleSpec)
    evaluator: RoleSpec = Field(default_factory=RoleSpec)

    def get(self, role: str) -> RoleSpec:
        """A training role's (or the evaluator's) part; the data service's roles are not here
        (ClusterSpec.pods)."""
        return getattr(self, Role(role).value)


class DataService(SpecModel):
    """The tf.data service (docs/data-service.md): one dispatcher and `workers` data workers
    that run the trainers' input pipelines, started, fenced and ended with the training."""

    workers: int = Field(ge=1, le=1000, description="how many data workers run the input pipelines")
    dispatcher: PodFields = Field(
        default_factory=PodFields, description="the dispatcher's pods: resources, env, nodeSelector, tolerations"
    )
    worker: PodFields = Field(
        default_factory=PodFields, description="the data workers' pods: resources, env, nodeSelector, tolerations"
    )
