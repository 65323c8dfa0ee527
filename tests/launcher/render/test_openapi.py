"""Rendered manifests validate against the Kubernetes 1.34 OpenAPI v3 schema, strictly.

The schema comes from the k8s.io/kubernetes Go module (api/openapi-spec/v3), which the kind
toolchain downloads anyway; unknown fields are errors here (additionalProperties: false), which
the API server would otherwise drop silently or reject.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from launcher.backends.kubernetes import submit
from launcher.cluster_spec.loader import load_file
from launcher.plan.plan import plan
from launcher.render import render

jsonschema = pytest.importorskip("jsonschema")
K8S_MODULE = "k8s.io/kubernetes@v1.34.4"
# The JobSet the kind tier installs (tests/kind/toolchain.sh TFK8S_JOBSET_VERSION); its CRD's
# schema comes from the same module download.
JOBSET_MODULE = f"sigs.k8s.io/jobset@{os.environ.get('TFK8S_JOBSET_VERSION', submit.JOBSET_VERSION)}"
JOBSET_CRD = "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
GROUP_FILES = {
    "v1": "api__v1_openapi.json",
    "batch/v1": "apis__batch__v1_openapi.json",
    "rbac.authorization.k8s.io/v1": "apis__rbac.authorization.k8s.io__v1_openapi.json",
    "networking.k8s.io/v1": "apis__networking.k8s.io__v1_openapi.json",
}
GVK_PREFIX = {
    "v1": "io.k8s.api.core.v1",
    "batch/v1": "io.k8s.api.batch.v1",
    "rbac.authorization.k8s.io/v1": "io.k8s.api.rbac.v1",
    "networking.k8s.io/v1": "io.k8s.api.networking.v1",
}
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.yaml"))
if not EXAMPLES:  # an empty parametrize would pass by testing nothing
    raise FileNotFoundError(f"no example specs in {EXAMPLES_DIR}")


def module_dir(module: str) -> Path | None:
    """The Go module's directory in the module cache (downloading it), or None without Go."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.path.exists(go):
        return None
    cache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
    if (Path(cache) / module).is_dir():
        return Path(cache) / module
    result = subprocess.run([go, "mod", "download", "-json", module], capture_output=True, text=True, timeout=900)
    if result.returncode == 0:
        return Path(json.loads(result.stdout)["Dir"])
    return None


def openapi_dir() -> Path | None:
    if os.environ.get("TFK8S_OPENAPI_DIR"):
        return Path(os.environ["TFK8S_OPENAPI_DIR"])
    directory = module_dir(K8S_MODULE)
    return directory / "api/openapi-spec/v3" if directory else None


def _strict(node):
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            _strict(value)
    elif isinstance(node, list):
        for value in node:
            _strict(value)
    return node


@pytest.fixture(scope="module")
def schemas():
    directory = openapi_dir()
    if directory is None or not directory.exists():
        if os.environ.get("CI"):
            pytest.fail("Kubernetes 1.34 OpenAPI spec not found (Go module download failed)")
        pytest.skip("Kubernetes OpenAPI spec not available (needs Go and the module proxy)")
    out = {}
    for group, filename in GROUP_FILES.items():
        out[group] = _strict(json.loads((directory / filename).read_text()))
    jobset = module_dir(JOBSET_MODULE)
    if jobset is None:
        pytest.fail(f"{JOBSET_MODULE} not downloadable: its CRD schema validates the JobSet projection")
    crd = yaml.safe_load((jobset / JOBSET_CRD).read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2"]
    out[JOBSET_API] = _strict(version["schema"]["openAPIV3Schema"])
    return out


JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def validate(obj: dict, schemas: dict) -> None:
    if obj["apiVersion"] == JOBSET_API:
        jsonschema.Draft7Validator(schemas[JOBSET_API]).validate(obj)
        # each replicatedJob's template is a batch/v1 Job: the strict Kubernetes schema too
        for rj in obj["spec"]["replicatedJobs"]:
            validate({"apiVersion": "batch/v1", "kind": "Job", **rj["template"]}, schemas)
        return
    document = schemas[obj["apiVersion"]]
    name = f"{GVK_PREFIX[obj['apiVersion']]}.{obj['kind']}"
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    jsonschema.Draft7Validator(schema).validate(obj)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_validate_against_kubernetes_openapi(example, schemas):
    for obj in render.render(plan(load_file(example))):
        validate(obj, schemas)


def test_jobset_validator_catches_a_misspelled_field(schemas):
    [jobset] = [o for o in render.render(plan(load_file(EXAMPLES_DIR / "ps-queued.yaml"))) if o["kind"] == "JobSet"]
    bad = json.loads(json.dumps(jobset))
    bad["spec"]["successPolicy"]["targetReplicatedJob"] = ["chief"]
    with pytest.raises(jsonschema.ValidationError, match="targetReplicatedJob"):
        validate(bad, schemas)
    bad = json.loads(json.dumps(jobset))
    bad["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolcy"] = "Never"
    with pytest.raises(jsonschema.ValidationError, match="restartPolcy"):
        validate(bad, schemas)


def test_validator_catches_a_misspelled_field(schemas):
    [job] = [o for o in render.render(plan(load_file(EXAMPLES_DIR / "mirrored.yaml"))) if o["kind"] == "Job"]
    job["spec"]["template"]["spec"]["restartPolcy"] = "Never"
    with pytest.raises(jsonschema.ValidationError, match="restartPolcy"):
        validate(job, schemas)


def test_validator_catches_a_misspelled_network_policy_field(schemas):
    policies = [o for o in render.render(plan(load_file(EXAMPLES_DIR / "ps.yaml"))) if o["kind"] == "NetworkPolicy"]
    assert [p["metadata"]["name"] for p in policies] == ["mnist-ps-grpc", "mnist-ps-no-ingress", "mnist-ps-metrics"]
    for policy in policies:
        validate(policy, schemas)
    policies[0]["spec"]["ingress"][0]["form"] = policies[0]["spec"]["ingress"][0].pop("from")
    with pytest.raises(jsonschema.ValidationError, match="form"):
        validate(policies[0], schemas)
