"""Each object in one form: laid out by one manifests/*.j2 template from the typed plan, never
built as a dict in Python; the restricted securityContext written once per language; a task's
pod env assembled in one place, the platform included."""

import ast
from pathlib import Path

import pytest

from launcher import k8s_contract
from launcher.cluster_spec.loader import load_file
from launcher.plan.plan import plan
from launcher.render import render
from worker import contract

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
# Keys only a Kubernetes object, or a pod's part of one, has.
OBJECT_KEYS = {
    "apiVersion",
    "securityContext",
    "containers",
    "initContainers",
    "volumeMounts",
    "volumes",
    "configMap",
    "emptyDir",
    "fieldRef",
    "matchLabels",
    "ownerReferences",
}
# Where Python adds to objects what no template can know at render time: submit's apply-time
# metadata (the root's UID in ownerReferences; delete's patch taking it off the NetworkPolicies),
# and the `List` envelope of `render -o json`.
APPLY_TIME = {
    "launcher/backends/kubernetes/submit.py",
    "launcher/backends/kubernetes/api.py:release",
    "launcher/render/render.py:to_json",
}


def _object_dicts(path: Path) -> list[str]:
    """file:line of every dict literal with an object's keys, but those APPLY_TIME allows."""
    tree = ast.parse(path.read_text())
    where = str(path.relative_to(REPO))
    enclosing = {
        id(node): function.name
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef)
        for node in ast.walk(function)
    }
    return [
        f"{where}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        and {k.value for k in node.keys if isinstance(k, ast.Constant)} & OBJECT_KEYS
        and where not in APPLY_TIME
        and f"{where}:{enclosing.get(id(node))}" not in APPLY_TIME
    ]


def test_no_python_module_builds_a_kubernetes_object():
    built = [hit for path in sorted((REPO / "launcher").rglob("*.py")) for hit in _object_dicts(path)]
    assert not built, f"object dicts built in Python (lay them out in manifests/*.j2 instead): {built}"


def _count(paths, text: str) -> dict[str, int]:
    counts = {str(p.relative_to(REPO)): p.read_text().count(text) for p in paths}
    return {p: n for p, n in counts.items() if n}


def test_the_restricted_security_context_is_written_once_per_language():
    launcher = [*(REPO / "launcher").rglob("*.py"), *(REPO / "manifests").glob("*.j2")]
    chart = sorted((REPO / "charts" / "tfk8s" / "templates").iterdir())
    for paths in (launcher, chart):
        # the context as written (the podTemplate policy names the key too, to refuse `true`)
        found = _count(paths, "allowPrivilegeEscalation: false")
        assert sum(found.values()) == 1, f"the container securityContext is written {found}: write it once"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_the_platform_reaches_every_task_container_and_nothing_else(example):
    """submit renders the cluster's TFK8S_PLATFORM into the task's env (no patch of rendered
    objects afterwards); a render for review has none."""
    cluster = plan(load_file(example))
    for objects, platform in ((render.render(cluster, "k8s-0123"), "k8s-0123"), (render.render(cluster), None)):
        for _, job in render.job_specs(objects):
            pod = job["template"]["spec"]
            for container in [*pod.get("initContainers", []), *pod["containers"]]:
                names = [e["name"] for e in container.get("env", [])]
                values = {e["name"]: e.get("value") for e in container.get("env", [])}
                task = container["name"] == k8s_contract.CONTAINER
                assert names.count(contract.PLATFORM) == (1 if task and platform else 0)
                assert values.get(contract.PLATFORM) == (platform if task else None)
