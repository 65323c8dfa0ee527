"""charts/tfk8s launches the same objects as the launcher's renderer, and refuses the same specs.

For every example spec (and tests/charts/specs/*.yaml), and for random valid specs (hypothesis):
`helm template` with the values that `chart_values.helm_values(spec)` produces yields exactly the
objects of `render.render(plan(spec))`, parsed (only Helm's own release labels/annotations would be
ignored; the chart adds none). Env order and TF_CONFIG text are compared as they are. The
values the CLI prints (`render --helm-values`) reach Helm unchanged. `helm lint --strict` passes,
and invalid values are refused by values.schema.json (or the chart's _validate.tpl) with a
clear message, each of them refused by the launcher's model too.

Cases that once differed and are pinned here: user env in unsorted order (both sides sort it),
strings that YAML 1.1 reads as bool/number (the CLI double-quotes every string), characters
beyond U+FFFF.

helm: env HELM, else PATH, else ${TFK8S_CACHE:-~/.cache/tfk8s}/bin/helm (tests/kind/toolchain.sh
builds it). Without helm these tests skip, except under CI, where they fail.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from support import REPO, example_specs, find_helm, in_ci

from launcher import k8s_contract
from launcher.chart import chart_values
from launcher.cluster_spec import names
from launcher.cluster_spec import spec as spec_module
from launcher.cluster_spec.loader import load_data, load_file, pack_code
from launcher.cluster_spec.role_spec import PodFields
from launcher.cluster_spec.spec import ClusterSpec
from launcher.errors import SpecError
from launcher.monitoring import alerts, dashboard
from launcher.plan.plan import plan
from launcher.render import render
from scripts import chart_schema, gen_chart
from worker import contract

CHART = REPO / "charts" / "tfk8s"
EXAMPLES = example_specs()
SPECS_DIR = Path(__file__).parent / "specs"
SPECS = EXAMPLES + sorted(SPECS_DIR.glob("*.yaml"))
# Labels/annotations Helm charts conventionally add; ignored if present (this chart adds none).
HELM_LABELS = {"helm.sh/chart", "app.kubernetes.io/version"}
HELM_ANNOTATION_PREFIXES = ("meta.helm.sh/", "helm.sh/")


@pytest.fixture(scope="session")
def helm(tmp_path_factory) -> "Helm":
    path = find_helm()
    if path is None:
        why = "no helm binary (env HELM, PATH, or $TFK8S_CACHE/bin/helm from tests/kind/toolchain.sh)"
        if in_ci():
            pytest.fail(f"{why}, and CI is set", pytrace=False)
        pytest.skip(f"{why}; set CI=1 to make this an error")
    return Helm(path, tmp_path_factory.mktemp("helm-home"))


class Helm:
    def __init__(self, path: str, home: Path):
        self.path = path
        # Keep helm's cache/config/data out of the user's home.
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        self.home = home

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.path, *args], capture_output=True, text=True, env=self.env, timeout=120)

    def values_file(self, values: dict | str, name: str = "values.yaml") -> Path:
        """Values as YAML with every string double-quoted (see _QuotedDumper), or text as given."""
        path = self.home / name
        path.write_text(values if isinstance(values, str) else quoted_yaml(values))
        return path

    def template(
        self, release: str, namespace: str, values: dict | str, pod_monitor_crd: bool = True
    ) -> subprocess.CompletedProcess:
        """`helm template`, as for a cluster that serves the PodMonitor CRD unless told not to."""
        crd = (
            [
                f"--api-versions={k8s_contract.POD_MONITOR_API_VERSION}/{kind}"
                for kind in ("PodMonitor", "PrometheusRule")
            ]
            if pod_monitor_crd
            else []
        )
        values_file = str(self.values_file(values))
        return self.run("template", release, str(CHART), "--namespace", namespace, "-f", values_file, *crd)

    def objects(self, release: str, namespace: str, values: dict | str) -> list[dict]:
        r = self.template(release, namespace, values)
        assert r.returncode == 0, f"helm template failed:\n{r.stderr}"
        return [doc for doc in yaml.load_all(r.stdout, Loader=_GoYamlLoader) if doc]


class _GoYamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a plain `=` is the string "=" as go-yaml (kubectl,
    the API server) reads it, not YAML 1.1's `value` tag, which PyYAML cannot construct."""


_GoYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:value"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _QuotedDumper(yaml.SafeDumper):
    """Every string double-quoted: Helm's YAML 1.1 reader (go-yaml) then reads each one back as
    the same string; plain y/n/1e-3/0o17 it would take for booleans or numbers, and JSON's
    surrogate-pair escapes of non-BMP characters it refuses."""


_QuotedDumper.add_representer(
    str, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
)


def quoted_yaml(values: dict) -> str:
    return yaml.dump(values, Dumper=_QuotedDumper, sort_keys=False, width=1 << 20)


def _without_helm_metadata(obj: dict) -> dict:
    obj = copy.deepcopy(obj)
    for meta in _metadatas(obj):
        labels = meta.get("labels") or {}
        for key in HELM_LABELS & set(labels):
            del labels[key]
        if labels.get("app.kubernetes.io/managed-by") == "Helm":
            del labels["app.kubernetes.io/managed-by"]
        annotations = meta.get("annotations") or {}
        for key in [k for k in annotations if k.startswith(HELM_ANNOTATION_PREFIXES)]:
            del annotations[key]
    return obj


def _metadatas(obj: dict):
    yield obj.setdefault("metadata", {})
    template = (obj.get("spec") or {}).get("template")
    if isinstance(template, dict):
        yield template.setdefault("metadata", {})


def _by_key(objects: list[dict]) -> dict[tuple, dict]:
    out = {}
    for obj in objects:
        key = (obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
        assert key not in out, f"duplicate object {key}"
        out[key] = obj
    return out


def _diff(a: dict, b: dict) -> str:
    dump = lambda o: yaml.safe_dump(o, sort_keys=True, width=1 << 20).splitlines()  # noqa: E731
    return "\n".join(difflib.unified_diff(dump(a), dump(b), "render()", "helm template", lineterm=""))


def _spec_params():
    return [pytest.param(path, id=f"{path.parent.name}/{path.stem}") for path in SPECS]


def assert_same_objects(expected: list[dict], actual: list[dict]) -> None:
    want = _by_key(expected)
    got = _by_key([_without_helm_metadata(o) for o in actual])
    assert sorted(got, key=str) == sorted(want, key=str), "different sets of objects"
    for key, obj in want.items():
        assert got[key] == obj, f"{key[1]}/{key[3]} differs:\n{_diff(obj, got[key])}"


# ------------------------------------------------------------------------------ parity
@pytest.mark.helm
@pytest.mark.parametrize("spec_file", _spec_params())
def test_helm_template_equals_render(helm, spec_file):
    spec = load_file(spec_file)
    code = pack_code(spec)  # a spec with `code:` (tests/charts/specs/code-*) ships it as codeArchive
    expected = render.render(plan(spec, code))
    actual = helm.objects(spec.name, spec.namespace, chart_values.helm_values(spec, code))
    assert_same_objects(expected, actual)
    # Spelled out, though equality above covers them: TF_CONFIG text and env order per Job.
    env_of = lambda objs: {  # noqa: E731
        o["metadata"]["name"]: o["spec"]["template"]["spec"]["containers"][0]["env"] for o in objs if o["kind"] == "Job"
    }
    assert env_of(actual) == env_of(expected)
    assert render.pod_tf_configs(spec, actual) == render.pod_tf_configs(spec, expected)


@pytest.mark.helm
@pytest.mark.parametrize("spec_file", _spec_params())
def test_cli_helm_values_reach_helm_unchanged(helm, spec_file):
    """What users run: python -m launcher render cluster.yaml --helm-values > values.yaml."""
    r = subprocess.run(
        [sys.executable, "-m", "launcher", "render", str(spec_file), "--helm-values"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    spec = load_file(spec_file)
    code = pack_code(spec)
    assert yaml.safe_load(r.stdout) == chart_values.helm_values(spec, code)
    assert_same_objects(render.render(plan(spec, code)), helm.objects(spec.name, spec.namespace, r.stdout))


@pytest.mark.helm
def test_env_written_as_a_map_in_values_comes_in_name_order_and_a_list_as_written(helm):
    """docs/helm.md: Helm ranges over a map in name order, so a map written straight into the
    values loses the spec's order; the list (what --helm-values writes) keeps it."""
    spec = load_file(SPECS_DIR / "env-unsorted.yaml")
    as_list = chart_values.helm_values(spec)
    assert as_list["env"] == [{"name": "ZETA", "value": "1"}, {"name": "ALPHA", "value": "2"}]
    as_map = {**as_list, "env": {"ZETA": "1", "ALPHA": "2"}}

    def user_env(values):
        [job] = [o for o in helm.objects(spec.name, spec.namespace, values) if o["kind"] == "Job"]
        return [e["name"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]][-2:]

    assert user_env(as_list) == ["ZETA", "ALPHA"]
    assert user_env(as_map) == ["ALPHA", "ZETA"]


@pytest.mark.helm
def test_non_bmp_characters(helm):
    spec = ClusterSpec.model_validate(
        {
            "name": "emoji",
            "strategy": "mirrored",
            "roles": {"chief": {"replicas": 1}},
            "annotations": {"note": "\U0001f680 launch"},
            "env": {"GREETING": "\U0001f600"},
        }
    )
    actual = helm.objects(spec.name, spec.namespace, chart_values.helm_values(spec))
    assert_same_objects(render.render(plan(spec)), actual)


@pytest.mark.helm
def test_release_name_and_namespace_stand_in_when_empty(helm):
    spec = load_file(SPECS_DIR / "ps-evaluator-pvc.yaml")
    values = {**chart_values.helm_values(spec), "name": "", "namespace": ""}
    actual = helm.objects(spec.name, spec.namespace, values)
    assert_same_objects(render.render(plan(spec)), actual)


@pytest.mark.helm
def test_values_name_wins_over_release_name(helm):
    spec = load_file(SPECS_DIR / "mwms.yaml")
    actual = helm.objects("some-release", spec.namespace, chart_values.helm_values(spec))
    assert_same_objects(render.render(plan(spec)), actual)


@pytest.mark.helm
def test_chart_without_values_is_one_mirrored_pod(helm):
    spec = ClusterSpec.model_validate(
        {"name": "demo", "namespace": "ns1", "strategy": "mirrored", "roles": {"chief": {"replicas": 1}}}
    )
    r = helm.run("template", "demo", str(CHART), "-n", "ns1")
    assert r.returncode == 0, r.stderr
    assert_same_objects(render.render(plan(spec)), [d for d in yaml.safe_load_all(r.stdout) if d])
    lint = helm.run("lint", "--strict", str(CHART))
    assert lint.returncode == 0, f"helm lint --strict failed:\n{lint.stdout}\n{lint.stderr}"


@pytest.mark.helm
def test_chart_defaults_plus_minimal_values(helm):
    """A hand-written values file with only what differs: the chart's defaults fill the rest."""
    values = {
        "strategy": "parameter_server",
        "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}, "ps": {"replicas": 1}},
    }
    spec = ClusterSpec.model_validate({**values, "name": "mini", "namespace": "ns1"})
    assert_same_objects(render.render(plan(spec)), helm.objects("mini", "ns1", values))


# ------------------------------------------------------------------------------ random specs
def _random_specs():
    """Valid specs over every strategy and optional part (user env kept sorted, see above)."""
    from hypothesis import strategies as st

    # BMP only: render() cannot carry characters beyond U+FFFF yet (see test_non_bmp_characters).
    text = st.text(
        st.characters(exclude_categories=("Cs", "Cc", "Cn"), include_characters="\n\t", max_codepoint=0xFFFF),
        max_size=12,
    )
    env_name = st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,8}\Z")
    env = st.dictionaries(
        env_name.filter(lambda k: k not in ("TF_CONFIG", "TFK8S_TASK_INDEX", "GRPC_FAIL_FAST")), text, max_size=3
    ).map(lambda d: dict(sorted(d.items())))
    label_key = st.from_regex(r"\A[a-z]([a-z0-9.-]{0,10}/)?[a-z0-9]{1,8}\Z")
    quantity = st.sampled_from(["100m", "1", "2Gi", "512Mi", 2, 0.5])
    toleration = st.fixed_dictionaries(
        {},
        optional={
            "key": st.sampled_from(["dedicated", "gpu"]),
            "operator": st.sampled_from(["Exists", "Equal"]),
            "value": st.sampled_from(["", "x"]),
            "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
            "tolerationSeconds": st.integers(0, 10**6),
        },
    )

    def role(replicas):
        return st.fixed_dictionaries(
            {"replicas": replicas},
            optional={
                "env": env,
                "nodeSelector": st.dictionaries(label_key, text, max_size=2),
                "tolerations": st.lists(toleration, max_size=2),
                # a role's pod fields (docs/spec.md#pod-template); its volumes are added in spec()
                "image": st.sampled_from(["team/trainer:1", "registry.example/x/y:2.16"]),
                "labels": st.dictionaries(st.sampled_from(["team", "example.com/tier"]), text, max_size=2),
                "annotations": st.dictionaries(label_key, text, max_size=2),
                "affinity": st.just({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}),
                "podTemplate": st.sampled_from(
                    [
                        {"spec": {"dnsPolicy": "ClusterFirst", "runtimeClassName": "gvisor"}},
                        {
                            "spec": {
                                "containers": [
                                    {"name": "tensorflow", "readinessProbe": {"exec": {"command": ["true"]}}}
                                ]
                            }
                        },
                    ]
                ),
                "resources": st.fixed_dictionaries(
                    {},
                    optional={
                        "requests": st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity, max_size=2),
                        "limits": st.dictionaries(
                            st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), quantity, max_size=2
                        ),
                    },
                ),
            },
        )

    service_fields = {field.alias for field in PodFields.model_fields.values()}
    evaluator = st.sampled_from([0, 1])
    roles = st.one_of(
        st.fixed_dictionaries(
            {
                "chief": role(st.just(1)),
                "worker": role(st.integers(1, 12)),
                "ps": role(st.integers(1, 3)),
                "evaluator": role(evaluator),
            }
        ),
        st.fixed_dictionaries({"worker": role(st.integers(1, 12)), "evaluator": role(evaluator)}),
        st.fixed_dictionaries({"chief": role(st.just(1)), "evaluator": role(evaluator)}),
    )

    def strategy_of(r):
        return "parameter_server" if "ps" in r else "multi_worker_mirrored" if "worker" in r else "mirrored"

    checkpoint = st.one_of(
        st.just({"dir": "gs://bucket/run"}),
        st.fixed_dictionaries(
            {
                "dir": st.just("/ckpt/run"),
                "volume": st.one_of(
                    st.just({"persistentVolumeClaim": {"claimName": "c"}}),
                    st.just({"hostPath": {"path": "/data"}, "mountPath": "/ckpt/"}),
                ),
            }
        ),
        # No dir: the cluster's own, <mountPath>/<namespace>/<name> (an emptyDir there, or on
        # the volume).
        st.fixed_dictionaries(
            {},
            optional={
                "volume": st.one_of(
                    st.just({"persistentVolumeClaim": {"claimName": "c"}, "mountPath": "/data//"}),
                    st.just({"hostPath": {"path": "/data"}}),
                )
            },
        ),
    )
    program = st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {},
            optional={
                "module": st.sampled_from(["worker.examples.fashion_mnist", "my.program"]),
                "args": st.lists(text, max_size=3),
            },
        ),
    )
    byo = st.fixed_dictionaries(
        {"image": st.just("me/img:1"), "command": st.lists(text, min_size=1, max_size=3)},
        optional={"args": st.lists(text, max_size=2)},
    )
    optional = {
        "env": env,
        "labels": st.dictionaries(label_key, text, max_size=2),
        "annotations": st.dictionaries(label_key, text, max_size=2),
        "serviceAccountName": st.sampled_from(["trainer", None]),
        "port": st.integers(1024, 65535),
        "networkPolicy": st.booleans(),
        "restartPolicy": st.sampled_from(["OnFailure", "Never"]),
        "backoffLimit": st.integers(0, 1000),
        "activeDeadlineSeconds": st.one_of(st.none(), st.integers(1, 10**9)),
        "ttlSecondsAfterFinished": st.one_of(st.none(), st.integers(0, 10**6)),
        "evaluatorGraceSeconds": st.integers(0, 10**6),
        "peerTimeoutSeconds": st.integers(1, 10**6),
        "terminationGracePeriodSeconds": st.integers(1, 10**6),
        "metrics": st.fixed_dictionaries(
            {},
            optional={
                "port": st.one_of(st.none(), st.integers(1024, 65535)),
                "scrapeAnnotations": st.booleans(),
                "podMonitor": st.booleans(),
                "scrapers": st.lists(
                    st.fixed_dictionaries(
                        {"namespaceSelector": st.just({"matchLabels": {"team": "ops"}})},
                        optional={"podSelector": st.just({"matchLabels": {"app": "prometheus"}})},
                    ),
                    max_size=2,
                ),
            },
        ),
    }

    @st.composite
    def spec(draw):
        r = draw(roles)
        data = {
            "name": "r" + draw(st.from_regex(r"\A[a-z0-9]{0,8}\Z")),
            "namespace": "ns",
            "strategy": strategy_of(r),
            "roles": r,
            "checkpoint": draw(checkpoint),
            **draw(st.fixed_dictionaries({}, optional=optional)),
        }
        volume = data["checkpoint"].get("volume") or {}
        remote = data["checkpoint"].get("dir", "").startswith("gs://")
        mwms_workers = r["worker"]["replicas"] if data["strategy"] == "multi_worker_mirrored" else 0
        if mwms_workers > 1 and not remote and "persistentVolumeClaim" not in volume:
            # Several MWMS workers need a shared checkpoint dir: a PVC (or gs://), no hostPath or emptyDir.
            data["checkpoint"]["volume"] = {"persistentVolumeClaim": {"claimName": "c"}}
        if r["evaluator"]["replicas"] and not data["checkpoint"].get("dir", "").startswith("gs://") and not volume:
            # The evaluator reads the chief's checkpoints: a shared volume, not an emptyDir.
            data["checkpoint"]["volume"] = {"persistentVolumeClaim": {"claimName": "c"}}
        # the JobSet projection, queued through Kueue or not, with a PriorityClass or not
        workload = draw(st.sampled_from(["jobs", "jobset", None]))
        if workload is not None:
            data["workload"] = workload
        if workload == "jobset" and draw(st.booleans()):
            data["queue"] = draw(st.sampled_from(["q", "team-a"]))
        if draw(st.booleans()):
            data["priorityClassName"] = "high"
        if draw(st.booleans()):  # a tf.data service, its roles' pods with what a role's take of PodFields
            pods = role(st.just(0)).map(lambda fields: {k: v for k, v in fields.items() if k in service_fields})
            data["dataService"] = {"workers": draw(st.integers(1, 3)), "dispatcher": draw(pods), "worker": draw(pods)}
        if draw(st.booleans()):
            data.update(draw(byo))
        elif (p := draw(program)) is not None:
            data["program"] = p
        metrics = data.setdefault("metrics", {})
        metrics_port = metrics.get("port", spec_module.DEFAULT_METRICS_PORT)
        if metrics_port is None:
            metrics.pop("podMonitor", None)  # a PodMonitor needs a metrics port
        elif metrics_port == data.get("port", 2222):  # not the gRPC port
            metrics["port"] = metrics_port + 1 if metrics_port < 65535 else metrics_port - 1
        for cfg in r.values():  # a role's own data claim, mounted in its task's container
            if draw(st.booleans()):
                cfg["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "d", "readOnly": True}}]
                cfg["volumeMounts"] = [{"name": "data", "mountPath": "/mnt/team-data", "readOnly": True}]
        service = data.get("dataService") or {}
        for cfg in [*r.values(), *(service.get(k, {}) for k in ("dispatcher", "worker"))]:  # GPU requests == limits
            resources = cfg.get("resources", {})
            if "nvidia.com/gpu" in resources.get("limits", {}) and draw(st.booleans()):
                resources["requests"] = {
                    **resources.get("requests", {}),
                    "nvidia.com/gpu": resources["limits"]["nvidia.com/gpu"],
                }
        return ClusterSpec.model_validate(data)

    return spec()


@pytest.mark.helm
def test_random_specs_render_the_same(helm):
    hypothesis = pytest.importorskip("hypothesis")

    # Derandomized (the same examples every run) and no shrinking: each example runs helm.
    @hypothesis.settings(
        max_examples=int(os.environ.get("TFK8S_HELM_EXAMPLES", "40")),
        deadline=None,
        derandomize=True,
        database=None,
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(_random_specs())
    def check(spec):
        assert_same_objects(
            render.render(plan(spec)), helm.objects("rel", spec.namespace, chart_values.helm_values(spec))
        )

    check()


@pytest.mark.helm
@pytest.mark.parametrize("workload", ["jobs", "jobset"])
def test_values_add_an_affinity_a_sidecar_and_a_volume_to_every_pod(helm, workload):
    """A Helm user places pods and adds a sidecar through values, without forking the chart;
    everything else stays the launcher's objects (with shipped code, the sidecar follows the
    code's init container)."""
    spec = load_file(SPECS_DIR / "code-ps-jobset.yaml").model_copy(update={"workload": k8s_contract.Workload(workload)})
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["train"]}]}]
            }
        }
    }
    sidecar = {
        "name": "log-shipper",
        "image": "fluent/fluent-bit:3.0",
        "volumeMounts": [{"name": "logs", "mountPath": "/logs"}],
    }
    volume, mount = {"name": "logs", "emptyDir": {}}, {"name": "logs", "mountPath": "/logs"}
    code = pack_code(spec)
    values = chart_values.helm_values(spec, code) | {
        "affinity": affinity,
        "sidecars": [sidecar],
        "extraVolumes": [volume],
        "extraVolumeMounts": [mount],
    }
    objects = helm.objects(spec.name, spec.namespace, values)
    pods = {name: job["template"]["spec"] for name, job in render.job_specs(objects)}
    assert len(pods) == 4
    for name, pod in pods.items():
        assert pod["affinity"] == affinity, name
        # A native sidecar: it never keeps the Job from completing.
        assert pod["initContainers"][-1] == {**sidecar, "restartPolicy": "Always"}, name
        assert pod["volumes"][-1] == volume, name
        assert pod["containers"][0]["volumeMounts"][-1] == mount, name
    # Without the extras, the very same objects as the launcher's.
    for pod in pods.values():
        del pod["affinity"]
        pod["initContainers"].pop()
        if not pod["initContainers"]:
            del pod["initContainers"]
        pod["volumes"].pop()
        pod["containers"][0]["volumeMounts"].pop()
    assert_same_objects(render.render(plan(spec, code)), objects)


@pytest.mark.helm
@pytest.mark.parametrize("workload", ["jobs", "jobset"])
def test_the_platform_value_reaches_every_task_as_submit_sets_it(helm, workload):
    """`platform` (what `helm install` reads itself, and `helm template` cannot) gives every task
    container the TFK8S_PLATFORM that submit renders into the launcher's objects, in the same place."""
    spec = load_file(SPECS_DIR / "ps-evaluator-pvc.yaml").model_copy(
        update={"workload": k8s_contract.Workload(workload)}
    )
    named = k8s_contract.kubernetes_platform("-----BEGIN CERTIFICATE-----\nMIIabc\n-----END CERTIFICATE-----\n")
    objects = helm.objects(spec.name, spec.namespace, chart_values.helm_values(spec) | {"platform": named})
    assert_same_objects(render.render(plan(spec), named), objects)


# ------------------------------------------------------------------------------ lint
@pytest.mark.helm
@pytest.mark.parametrize("spec_file", SPECS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_helm_lint_strict(helm, spec_file):
    spec = load_file(spec_file)
    values = helm.values_file(chart_values.helm_values(spec, pack_code(spec)))
    r = helm.run("lint", "--strict", str(CHART), "-f", str(values), "--namespace", spec.namespace)
    assert r.returncode == 0, f"helm lint --strict failed:\n{r.stdout}\n{r.stderr}"
    assert "0 chart(s) failed" in r.stdout, r.stdout


# ------------------------------------------------------------------------------ refusals
def _base_values() -> dict:
    return chart_values.helm_values(load_file(SPECS_DIR / "ps-evaluator-pvc.yaml"))


def _set(values: dict, dotted: str, value) -> dict:
    values = copy.deepcopy(values)
    *parents, last = dotted.split(".")
    node = values
    for part in parents:
        node = node[part]
    node[last] = value
    return values


# (id, changes, a fragment of helm's error). Every case is refused by the launcher's model too.
REFUSED = [
    ("unknown-key", {"replica": 3}, "additional properties 'replica' not allowed"),
    ("unknown-role-key", {"roles.worker.replica": 3}, "additional properties 'replica' not allowed"),
    (
        "wrong-enum",
        {"strategy": "data_parallel"},
        "value must be one of 'parameter_server', 'multi_worker_mirrored', 'mirrored'",
    ),
    ("wrong-pull-policy", {"imagePullPolicy": "Sometimes"}, "at '/imagePullPolicy'"),
    ("env-entry-without-value", {"env": [{"name": "A"}]}, "at '/env'"),
    (
        "env-value-from-unknown-source",
        {"roles.chief.env": [{"name": "A", "valueFrom": {"secretRef": {"name": "s"}}}]},
        "at '/roles/chief/env'",
    ),
    (
        "supervised-role-account",
        {"roles.ps.serviceAccountName": "reader"},
        "at '/roles/ps/serviceAccountName': got string, want null",
    ),
    (
        "role-command-without-command",
        {"roles.ps.command": ["python", "ps.py"]},
        "at '/roles/ps/command': got array, want null",
    ),
    (
        "pod-template-unknown-key",
        {"roles.worker.podTemplate": {"spec": {}, "status": {}}},
        "additional properties 'status' not allowed",
    ),
    ("name-70-chars", {"name": "a" * 70}, "maxLength: got 70, want 63"),
    ("name-not-dns", {"name": "Bad_Name"}, "at '/name'"),
    ("wrong-type", {"port": "grpc"}, "at '/port': got string, want integer"),
    ("network-policy-string", {"networkPolicy": "false"}, "at '/networkPolicy': got string, want boolean"),
    ("port-range", {"port": 80}, "at '/port': minimum: got 80, want 1,024"),
    ("missing-strategy", {"strategy": None}, "missing property 'strategy'"),
    ("ps-two-chiefs", {"roles.chief.replicas": 2}, "at '/roles/chief/replicas': value must be 1"),
    ("ps-no-ps", {"roles.ps.replicas": 0}, "at '/roles/ps/replicas': minimum: got 0, want 1"),
    (
        "mwms-with-chief",
        {"strategy": "multi_worker_mirrored", "roles.ps.replicas": 0},
        "at '/roles/chief/replicas': value must be 0",
    ),
    (
        "mirrored-with-workers",
        {"strategy": "mirrored", "roles.ps.replicas": 0},
        "at '/roles/worker/replicas': value must be 0",
    ),
    ("two-evaluators", {"roles.evaluator.replicas": 2}, "maximum: got 2, want 1"),
    ("args-without-command", {"program": None, "args": ["--x"]}, "missing property 'command'"),
    ("command-and-program", {"command": ["python", "t.py"]}, "at '/program': got object, want null"),
    ("evaluator-without-storage", {"checkpoint.volume": None}, "at '/checkpoint'"),
    ("two-volume-sources", {"checkpoint.volume.hostPath": {"path": "/x"}}, "at '/checkpoint/volume'"),
    (
        "relative-dir",
        {"checkpoint.dir": "ckpt", "checkpoint.volume": None, "roles.evaluator.replicas": 0},
        "does not match pattern '^/'",
    ),
    ("s3-dir", {"checkpoint.dir": "s3://b/x", "checkpoint.volume": None}, "'^gs://'"),
    ("gs-dir-with-volume", {"checkpoint.dir": "gs://b/x"}, "at '/checkpoint/volume': got object, want null"),
    (
        "unknown-resource",
        {"roles.chief.resources.requests": {"gpu": "1"}},
        "at '/roles/chief/resources/requests': additional properties 'gpu' not allowed",
    ),
    ("bad-quantity", {"roles.chief.resources.limits": {"memory": "lots"}}, "at '/roles/chief/resources/limits/memory'"),
    (
        "gpu-only-in-requests",
        {"roles.chief.resources.requests": {"nvidia.com/gpu": "1"}},
        "missing property 'nvidia.com/gpu'",
    ),
    ("bad-env-name", {"roles.ps.env": {"1BAD": "x"}}, "at '/roles/ps/env': additional properties '1BAD' not allowed"),
    ("env-not-string", {"env": {"N": 1}}, "at '/env/N': got number, want string"),
    ("bad-module", {"program.module": "not-a-module"}, "at '/program/module'"),
    (
        "bad-toleration",
        {"roles.worker.tolerations": [{"operator": "Maybe"}]},
        "at '/roles/worker/tolerations/0/operator'",
    ),
    ("queue-without-jobset", {"queue": "q"}, "at '/workload'"),
    (
        "fatal-code-above-255",
        {"program": None, "command": ["python", "t.py"], "fatalExitCodes": [256]},
        "at '/fatalExitCodes/0'",
    ),
    ("unknown-workload", {"workload": "pods"}, "at '/workload'"),
]


# (id, changes, a fragment of the message): rules of templates/_validate.tpl. The chart's
# message is exactly the launcher's for the same values ("PATH: MESSAGE", one of load_data's
# problems); the fragment pins the rule that refused them.
REFUSED_LIKE_THE_LAUNCHER = [
    # a role's pod fields: every rule of pod_fields.py in tests/charts/test_helm_pod_policy.py
    (
        "role-volume-named-like-ours",
        {"roles.worker.volumes": [{"name": "checkpoint", "emptyDir": {}}]},
        "roles.worker.volumes.0.name: 'checkpoint' is one of the launcher's volumes",
    ),
    (
        "pod-template-host-network",
        {"roles.worker.podTemplate": {"spec": {"hostNetwork": True}}},
        "roles.worker.podTemplate.spec.hostNetwork: hostNetwork: refused: tasks on the node's network",
    ),
    (
        "pod-template-metadata",
        {"roles.worker.podTemplate": {"metadata": {"labels": {"a": "b"}}}},
        "roles.worker.podTemplate.metadata: set roles.worker.labels and roles.worker.annotations instead",
    ),
    ("metrics-on-grpc-port", {"port": 2300, "metrics.port": 2300}, "metrics.port: 2300 is the gRPC port (port)"),
    (
        "pod-monitor-without-port",
        {"metrics.port": None, "metrics.podMonitor": True},
        "metrics.podMonitor: a PodMonitor needs metrics.port",
    ),
    (
        "reserved-env",
        {"roles.worker.env": {"TF_CONFIG": "{}"}},
        "roles.worker.env: TF_CONFIG is set by the launcher for every pod; remove it",
    ),
    ("reserved-env-all-pods", {"env": {"GRPC_FAIL_FAST": "x"}}, "env: GRPC_FAIL_FAST is set"),
    (
        "reserved-env-in-a-list",
        {"roles.worker.env": [{"name": "A", "value": "1"}, {"name": "TF_CONFIG", "value": "{}"}]},
        "roles.worker.env: TF_CONFIG is set by the launcher for every pod; remove it",
    ),
    (
        "env-named-twice",
        {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "A", "value": "3"}]},
        "env: A is named twice: give each name once",
    ),
    (
        "data-service-flag-without-service",
        {"program": {"args": ["--data-service"]}},
        "program.args: --data-service reads the training input through the cluster's tf.data service",
    ),
    (
        "reserved-env-data-worker",
        {"dataService": {"workers": 1, "worker": {"env": {"TF_CONFIG": "{}"}}}},
        "dataService.worker.env: TF_CONFIG is set by the launcher for every pod; remove it",
    ),
    ("fatal-codes-built-in", {"fatalExitCodes": [1]}, "fatalExitCodes: the built-in worker's exit codes"),
    (
        "fatal-codes-on-failure",
        {"program": None, "command": ["python", "t.py"], "restartPolicy": "OnFailure", "fatalExitCodes": [1]},
        "fatalExitCodes: needs restartPolicy: Never",
    ),
    (
        "fatal-code-reserved",
        {"program": None, "command": ["python", "t.py"], "fatalExitCodes": [1, 143]},
        "fatalExitCodes: 143 is SIGTERM's (a preemption, never counted), not your program's",
    ),
    (
        "fatal-code-twice",
        {"program": None, "command": ["python", "t.py"], "fatalExitCodes": [3, 1, 3]},
        "fatalExitCodes: 3 is listed twice",
    ),
    (
        "dir-not-under-mount",
        {"checkpoint.dir": "/data/x"},
        "checkpoint: dir '/data/x' is not under the volume's mountPath '/ckpt'",
    ),
    # quotes and a token's text in a value are the value's own (one substitution pass)
    (
        "dir-with-quote-and-token",
        {"checkpoint.dir": "/data/it's@mount_path@"},
        "checkpoint: dir '/data/it's@mount_path@' is not under",
    ),
    (
        "gpu-requests-ne-limits",
        {
            "roles.chief.resources.requests": {"nvidia.com/gpu": "1"},
            "roles.chief.resources.limits": {"nvidia.com/gpu": "2"},
        },
        "roles.chief.resources: nvidia.com/gpu must be set under limits",
    ),
    (
        "mwms-workers-hostpath",
        {
            "strategy": "multi_worker_mirrored",
            "roles.chief.replicas": 0,
            "roles.ps.replicas": 0,
            "roles.evaluator.replicas": 0,
            "checkpoint.volume": {"hostPath": {"path": "/data"}},
        },
        "checkpoint.volume: multi_worker_mirrored with 3 workers needs checkpoint storage that "
        "every worker shares (a hostPath is a different directory on each node): after a restart "
        "each worker would restore a different checkpoint and all-reduce gradients into different "
        "weights. Set checkpoint.volume.persistentVolumeClaim.claimName to a ReadWriteMany claim, "
        "or use a gs:// checkpoint.dir",
    ),
    (
        "mwms-workers-no-volume",
        {
            "strategy": "multi_worker_mirrored",
            "roles.chief.replicas": 0,
            "roles.ps.replicas": 0,
            "roles.evaluator.replicas": 0,
            "checkpoint.volume": None,
        },
        "(without a volume each pod gets its own emptyDir)",
    ),
    (
        "generated-name-too-long",
        {"name": "n" * 52},
        "name: generated pod hostname name '" + "n" * 52 + "-evaluator-0' for role evaluator: "
        "64 characters; a DNS-1035 label has at most 63; shorten name",
    ),
    (
        "generated-jobset-name-too-long",
        {"name": "n" * 50, "workload": "jobset"},
        "name: generated pod hostname name '" + "n" * 50 + "-evaluator-0-0' for role evaluator",
    ),
    (
        "generated-account-name-too-long",
        {"name": "n" * 53, "roles.evaluator.replicas": 0},
        "name: generated ServiceAccount/Role name '" + "n" * 53 + "-supervisor' for role -: 64",
    ),
]


def _changed(changes: dict) -> dict:
    values = _base_values()
    for dotted, value in changes.items():
        values = _set(values, dotted, value)
    return values


def chart_refusal(r: subprocess.CompletedProcess) -> str:
    """The message a template failed with (helm: "Error: execution error at (...): MESSAGE")."""
    assert r.returncode != 0, f"helm accepted invalid values:\n{r.stdout[:2000]}"
    found = re.search(r"^Error: execution error at \([^)]*\): (.*)$", r.stderr, re.MULTILINE)
    assert found, r.stderr
    return found.group(1)


@pytest.mark.helm
@pytest.mark.parametrize("changes,message", [pytest.param(c, m, id=i) for i, c, m in REFUSED])
def test_invalid_values_are_refused(helm, changes, message):
    values = _changed(changes)
    with pytest.raises(ValidationError):  # the launcher refuses it too
        ClusterSpec.model_validate(values)
    r = helm.template("rel", values.get("namespace") or "team-a", values)
    assert r.returncode != 0, f"helm accepted invalid values:\n{r.stdout[:2000]}"
    assert message in r.stderr, r.stderr
    assert "Error:" in r.stderr


@pytest.mark.helm
@pytest.mark.parametrize("changes,fragment", [pytest.param(c, m, id=i) for i, c, m in REFUSED_LIKE_THE_LAUNCHER])
def test_validate_refuses_with_the_launchers_message(helm, changes, fragment):
    values = _changed(changes)
    with pytest.raises(SpecError) as refused:
        load_data(values)
    launcher = [f"{p.path}: {p.message}" for p in refused.value.problems]
    message = chart_refusal(helm.template("rel", values.get("namespace") or "team-a", values))
    assert fragment in message
    assert message in launcher, f"the chart's message differs from the launcher's {launcher}"


@pytest.mark.helm
def test_pod_monitor_is_refused_where_its_crd_is_not_served(helm):
    """Like `submit` (launcher/backends/kubernetes/submit.py preflight), with the same line."""
    values = _changed({"metrics.podMonitor": True})
    served = helm.objects("rel", "team-a", values)
    monitors = [o for o in served if o["kind"] == "PodMonitor"]
    assert [m["spec"]["podMetricsEndpoints"] for m in monitors] == [[{"port": "metrics", "path": "/metrics"}]]
    refused = chart_refusal(helm.template("rel", "team-a", values, pod_monitor_crd=False))
    assert refused == f"metrics.podMonitor: {spec_module.POD_MONITOR_WITHOUT_CRD}"


@pytest.mark.helm
def test_the_dashboard_and_the_alert_rules_ship_as_objects_when_enabled(helm):
    values = {
        **_base_values(),
        "grafanaDashboard": {"enabled": True, "labels": {"grafana_dashboard": "1"}},
        "prometheusRule": {"enabled": True, "labels": {"release": "kps"}},
    }
    objects = {
        o["kind"]: o
        for o in helm.objects("rel", "team-a", values)
        if o["metadata"]["name"].endswith(("-dashboard", "-alerts"))
    }
    board, rule = objects["ConfigMap"], objects["PrometheusRule"]
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"]["tfk8s-dashboard.json"]) == dashboard.dashboard()
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert rule["spec"] == alerts.rules()
    refused = chart_refusal(
        helm.run("template", "rel", str(CHART), "-n", "team-a", "-f", str(helm.values_file(values)))
    )
    assert refused == f"prometheusRule.enabled: {chart_schema.PROMETHEUS_RULE_WITHOUT_CRD}"
    # Off by default: neither object.
    names = [o["metadata"]["name"] for o in helm.objects("rel", "team-a", _base_values())]
    assert not [n for n in names if n.endswith(("-dashboard", "-alerts"))]


@pytest.mark.helm
def test_schema_errors_name_the_schema(helm):
    values = _set(_base_values(), "name", "x" * 70)
    r = helm.template("rel", "team-a", values)
    assert "values don't meet the specifications of the schema" in r.stderr, r.stderr
    assert "at '/name': maxLength: got 70, want 63" in r.stderr, r.stderr


@pytest.mark.helm
def test_namespace_mismatch_is_refused(helm):
    message = chart_refusal(helm.template("rel", "elsewhere", _base_values()))
    assert message.startswith('namespace: the values say "team-a" but the release namespace is "elsewhere"')
    assert message == "namespace: " + chart_schema.NAMESPACE_MISMATCH.format(namespace="team-a", release="elsewhere")


@pytest.mark.helm
def test_release_name_that_is_no_dns1035_label_is_refused(helm):
    values = {**_base_values(), "name": ""}
    message = chart_refusal(helm.template("1st-run", "team-a", values))
    assert 'the release name "1st-run" is the cluster name' in message
    assert message == "name: " + chart_schema.RELEASE_NAME_PROBLEM.format(
        release="1st-run", problem=names.dns1035_problem("1st-run")
    )


def _notes(helm, tmp_path, spec) -> str:
    """NOTES.txt is only rendered by install; render it here through tpl in a copy of the chart."""
    chart = tmp_path / "tfk8s"
    if not chart.exists():
        shutil.copytree(CHART, chart)
        (chart / "files" / "NOTES.txt").write_text((CHART / "templates" / "NOTES.txt").read_text())
        (chart / "templates" / "notes-check.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
            'data: {notes: {{ tpl (.Files.Get "files/NOTES.txt") . | toJson }}}\n'
        )
    r = helm.run(
        "template",
        "rel",
        str(chart),
        "-n",
        spec.namespace,
        "--show-only",
        "templates/notes-check.yaml",
        "-f",
        str(helm.values_file(chart_values.helm_values(spec))),
    )
    assert r.returncode == 0, r.stderr
    return yaml.safe_load(r.stdout)["data"]["notes"]


@pytest.mark.helm
def test_notes_warn_about_an_emptydir_model_dir(helm, tmp_path):
    """The chart's counterpart of `render`'s warning (launcher/cluster_spec/checkpoints.py)."""
    durable = load_file(SPECS_DIR / "ps-evaluator-pvc.yaml")
    assert "emptyDir" not in _notes(helm, tmp_path, durable)
    bare = load_file(SPECS_DIR / "mirrored.yaml")
    assert bare.checkpoint.volume is None and not bare.checkpoint.is_remote
    assert "Warning: checkpoint.volume is not set, so the model dir is an emptyDir" in _notes(helm, tmp_path, bare)


@pytest.mark.helm
def test_notes_tell_how_to_watch_and_read_logs(helm, tmp_path):
    notes = _notes(helm, tmp_path, load_file(SPECS_DIR / "ps-evaluator-pvc.yaml"))
    for line in (
        "python -m launcher status ps-eval -n team-a",
        "python -m launcher logs ps-eval --role chief --index 0 -n team-a",
        "python -m launcher logs ps-eval --role evaluator --index 0 -n team-a",
        "kubectl get jobs,pods -n team-a -l app.kubernetes.io/instance=ps-eval",
        "helm uninstall rel -n team-a",
    ):
        assert line in notes, notes


# ------------------------------------------------------------------------------ generated files
def test_the_generated_chart_files_are_these_three():
    # values.yaml: only its replica-count comment table is generated (tests/test_generated.py: current)
    assert set(gen_chart.expected_files()) == {
        CHART / "values.schema.json",
        CHART / "templates" / "_contract.tpl",
        CHART / "values.yaml",
    }


def _template_code(path: Path) -> str:
    """A template's text without its {{/* comments */}}."""
    return re.sub(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", "", path.read_text(), flags=re.DOTALL)


def test_templates_spell_out_no_message():
    """A refusal's text is the launcher's ($c.messages: scripts/chart_schema.messages, from the
    str.format strings its validators use) and the generated names' kinds come from
    names.generated_names ($c.generatedKinds): no template writes a part of one, and no template
    action holds prose of its own (a string literal of three words or more)."""
    kinds = [kind for _, kind, _ in names.generated_names("x", k8s_contract.Workload.JOBS, {contract.Role.CHIEF: 1})]
    texts = list(chart_schema.messages().values()) + kinds
    pieces = {p.strip(" '\"") for t in texts for p in re.split(r"\{\w+\}", t)}
    pieces = {p for p in pieces if " " in p or "/" in p}  # not one word: "name", "Job"
    assert len(pieces) > 20 and "is set by the launcher for every pod; remove it" in pieces
    templates = [p for p in (CHART / "templates").iterdir() if p not in gen_chart.expected_files()]
    found = [(p.name, piece) for p in templates for piece in pieces if piece in _template_code(p)]
    assert not found, f"messages written out in templates (use $c.messages): {found}"
    prose = [
        (p.name, literal)
        for p in templates
        for action in re.findall(r"\{\{.*?\}\}", _template_code(p), re.DOTALL)
        for literal in re.findall(r'"((?:[^"\\]|\\.)*)"', action)
        if re.search(r"[A-Za-z']+ [A-Za-z']+ [A-Za-z']+", literal)
    ]
    assert not prose, f"prose in template actions (a message: put it in $c.messages): {prose}"


def test_templates_are_readable_helm():
    """Ordinary Helm a user can read and patch (issue 37): no line over 120 characters, no JSON
    document written into a template, one template per kind of object."""
    templates = sorted((CHART / "templates").iterdir())
    long_lines = [
        (p.name, n) for p in templates for n, line in enumerate(p.read_text().splitlines(), 1) if len(line) > 120
    ]
    assert not long_lines, f"template lines over 120 characters: {long_lines}"
    blobs = [
        (p.name, line[:60]) for p in templates for line in p.read_text().splitlines() if re.match(r'\s*[\[{]"', line)
    ]
    assert not blobs, f"JSON written into templates: {blobs}"
    objects = {p.name for p in templates if p.suffix == ".yaml"}
    assert objects == {
        "monitoring.yaml",
        "podmonitor.yaml",
        "configmap.yaml",
        "code-configmap.yaml",
        "service.yaml",
        "rbac.yaml",
        "networkpolicy.yaml",
        "jobs.yaml",
        "jobset.yaml",
        "validate.yaml",
    }


def test_contract_holds_only_what_templates_read():
    """Every key of the generated _contract.tpl is read by a template: the rules the chart
    shares with the launcher, not a second copy of the launcher."""
    contract_keys = set(gen_chart.generate_contract())
    code = "".join(_template_code(p) for p in (CHART / "templates").iterdir() if p.name != "_contract.tpl")
    unread = sorted(k for k in contract_keys if f"$c.{k}" not in code)
    assert not unread, f"_contract.tpl keys no template reads (drop them from gen_chart): {unread}"


def test_schema_role_counts_are_the_contracts():
    """values.schema.json refuses exactly the replica counts contract.ROLE_COUNTS refuses."""
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads((CHART / "values.schema.json").read_text()))
    base = yaml.safe_load((CHART / "values.yaml").read_text())
    base["checkpoint"] = {"dir": "gs://bucket/run"}  # an evaluator needs shared storage
    roles = [r.value for r in contract.COUNTED_ROLES]  # the data service's come from dataService
    for strategy in contract.Strategy:
        for counts in itertools.product(range(3), repeat=len(roles)):
            values = copy.deepcopy(base)
            values["strategy"] = strategy.value
            for role, n in zip(roles, counts):
                values["roles"][role]["replicas"] = n
            problems = k8s_contract.role_count_problems(strategy, dict(zip(roles, counts)))
            errors = [e.message for e in validator.iter_errors(values)]
            assert bool(errors) == bool(problems), (strategy.value, counts, problems, errors)


@pytest.mark.parametrize("script", ["supervise.py", "job_watch.py"])
def test_chart_supervisor_is_the_launchers(script):
    link = CHART / "files" / script
    assert link.is_symlink() and link.resolve() == (REPO / "launcher" / "pod" / script).resolve()


def test_values_yaml_has_the_models_defaults():
    chart = yaml.safe_load((CHART / "values.yaml").read_text())
    minimal = ClusterSpec.model_validate({"name": "x", "strategy": "mirrored", "roles": {"chief": {"replicas": 1}}})
    # strategy (required by the model) and the chief's replicas are those of `minimal`: the
    # chart defaults to the smallest valid cluster so that it installs and lints as it is.
    defaults = minimal.model_dump(by_alias=True, mode="json")
    # Documented differences: empty means the release's name / namespace.
    defaults["name"] = ""
    defaults["namespace"] = ""
    # Chart-only pod extras come last, empty: they add nothing unless set.
    extras = {key: chart.pop(key) for key in chart_schema.CHART_ONLY}
    assert extras == {
        "affinity": {},
        "sidecars": [],
        "extraVolumes": [],
        "extraVolumeMounts": [],
        "platform": "",
        "grafanaDashboard": {"enabled": False, "labels": {"grafana_dashboard": "1"}},
        "prometheusRule": {"enabled": False, "labels": {}},
    }
    assert chart == defaults
    assert list(chart) == list(defaults), "keep values.yaml in the model's field order"


def test_schema_is_valid_and_accepts_every_spec():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((CHART / "values.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    for path in SPECS:
        spec = load_file(path)
        values = chart_values.helm_values(spec, pack_code(spec))
        errors = [e.message for e in validator.iter_errors(values)]
        assert not errors, f"{path}: {errors}"
    chart_defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    errors = [e.message for e in validator.iter_errors(chart_defaults)]
    assert errors == [], errors
