"""Rendered manifests validate against the Kubernetes 1.34 OpenAPI v3 schema, strictly.

The schema comes from the k8s.io/kubernetes Go module (api/openapi-spec/v3), which the kind
toolchain downloads anyway; unknown fields are errors here (additionalProperties: false), which
the API server would otherwise drop silently or reject.
"""
import glob
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from launcher import render
from launcher.loader import load_file

jsonschema = pytest.importorskip("jsonschema")
K8S_MODULE = "k8s.io/kubernetes@v1.34.4"
GROUP_FILES = {
    "v1": "api__v1_openapi.json",
    "batch/v1": "apis__batch__v1_openapi.json",
    "rbac.authorization.k8s.io/v1": "apis__rbac.authorization.k8s.io__v1_openapi.json",
}
GVK_PREFIX = {"v1": "io.k8s.api.core.v1", "batch/v1": "io.k8s.api.batch.v1",
              "rbac.authorization.k8s.io/v1": "io.k8s.api.rbac.v1"}
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.yaml"))
if not EXAMPLES:  # an empty parametrize would pass by testing nothing
    raise FileNotFoundError(f"no example specs in {EXAMPLES_DIR}")


def openapi_dir() -> Path | None:
    if os.environ.get("TFK8S_OPENAPI_DIR"):
        return Path(os.environ["TFK8S_OPENAPI_DIR"])
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.path.exists(go):
        return None
    cache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
    found = sorted(glob.glob(f"{cache}/k8s.io/kubernetes@v1.34.*/api/openapi-spec/v3"))
    if found:
        return Path(found[-1])
    result = subprocess.run([go, "mod", "download", "-json", K8S_MODULE],
                            capture_output=True, text=True, timeout=900)
    if result.returncode == 0:
        return Path(json.loads(result.stdout)["Dir"]) / "api/openapi-spec/v3"
    return None


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
    return out


def validate(obj: dict, schemas: dict) -> None:
    document = schemas[obj["apiVersion"]]
    name = f"{GVK_PREFIX[obj['apiVersion']]}.{obj['kind']}"
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    jsonschema.Draft7Validator(schema).validate(obj)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_validate_against_kubernetes_openapi(example, schemas):
    for obj in render.render(load_file(example)):
        validate(obj, schemas)


def test_validator_catches_a_misspelled_field(schemas):
    [job] = [o for o in render.render(load_file(EXAMPLES_DIR / "mirrored.yaml")) if o["kind"] == "Job"]
    job["spec"]["template"]["spec"]["restartPolcy"] = "Never"
    with pytest.raises(jsonschema.ValidationError, match="restartPolcy"):
        validate(job, schemas)
