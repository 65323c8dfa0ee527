"""`env` in the order written (docs/spec.md#env): Kubernetes expands a value's `$(NAME)` only from
earlier entries of the container's env list, so the launcher's variables come first, then the
spec's env as written, then the role's; valueFrom entries stay where they were written."""

import pytest

from launcher.cluster_spec.loader import load_text
from launcher.errors import SpecError
from launcher.plan.plan import plan
from launcher.render import render
from worker import contract

SPEC = """\
name: envs
strategy: parameter_server
workload: {workload}
command: [python, train.py]
roles:
  chief:
    replicas: 1
    env:
    - {{name: POD_NAME, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
    - {{name: LOG_DIR, value: /logs/$(POD_NAME)}}
    - {{name: B, value: chief-b}}
  worker: {{replicas: 1}}
  ps: {{replicas: 1}}
env:
  ZETA: "1"
  B: $(ZETA)-x
  ALPHA: $(B)/$(TFK8S_MODEL_DIR)
"""


def _task_env(objects, role: str) -> list[dict]:
    pods = []
    for obj in objects:
        if obj["kind"] == "Job" and obj["metadata"]["labels"]["app.kubernetes.io/component"] == role:
            pods.append(obj["spec"]["template"])
        if obj["kind"] == "JobSet":
            pods += [rj["template"]["spec"]["template"] for rj in obj["spec"]["replicatedJobs"] if rj["name"] == role]
    [pod] = pods
    [container] = [c for c in pod["spec"]["containers"] if c["name"] == "tensorflow"]
    return container["env"]


@pytest.mark.parametrize("workload", ["jobs", "jobset"])
def test_user_env_keeps_its_written_order_after_the_launchers(workload):
    objects = render.render(plan(load_text(SPEC.format(workload=workload))))
    chief = _task_env(objects, "chief")
    names = [e["name"] for e in chief]
    # ours first (index, TF_CONFIG, node, the plan's and the pod's), then the user's as written:
    # the spec's (not sorted), the role's after it, a role's B in the spec's place.
    assert names[:3] == [contract.TASK_INDEX, contract.TF_CONFIG, contract.NODE_NAME]
    assert names[-5:] == ["ZETA", "B", "ALPHA", "POD_NAME", "LOG_DIR"]
    assert names.index("HOME") < names.index("ZETA")
    assert names.index(contract.MODEL_DIR) < names.index("ALPHA")
    by_name = {e["name"]: e for e in chief}
    assert by_name["B"] == {"name": "B", "value": "chief-b"}
    assert by_name["POD_NAME"] == {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    assert by_name["LOG_DIR"] == {"name": "LOG_DIR", "value": "/logs/$(POD_NAME)"}
    assert len(names) == len(set(names))
    worker = _task_env(objects, "worker")
    assert [(e["name"], e["value"]) for e in worker[-3:]] == [
        ("ZETA", "1"),
        ("B", "$(ZETA)-x"),
        ("ALPHA", "$(B)/$(TFK8S_MODEL_DIR)"),
    ]


def test_a_user_value_of_a_launcher_name_takes_its_place():
    text = (
        "name: a\nstrategy: mirrored\nroles: {chief: {replicas: 1}}\n"
        "env: [{name: X, value: x}, {name: HOME, value: /home/me}]\n"
    )
    env = _task_env(render.render(plan(load_text(text))), "chief")
    names = [e["name"] for e in env]
    assert names.count("HOME") == 1 and names.index("HOME") < names.index("X")
    assert {e["name"]: e.get("value") for e in env}["HOME"] == "/home/me"


@pytest.mark.parametrize(
    "env, fragment",
    [
        ("[{name: A}]", "give either value or valueFrom"),
        ("[{name: A, value: x, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]", "give either value or valueFrom"),
        ("[{name: A, value: x}, {name: A, value: y}]", "env: A is named twice: give each name once"),
        ("[{name: A, valueFrom: {secretRef: {name: s}}}]", "valueFrom takes one of secretKeyRef"),
        ("[{name: A, valueFrom: {secretKeyRef: {nam: s, key: k}}}]", "unknown key 'nam'"),
        ("[{name: TF_CONFIG, value: x}]", "TF_CONFIG is set by the launcher"),
        ("{A: 1}", 'quote it (A: "1")'),
    ],
)
def test_bad_env_entries_are_refused_with_what_to_do(env, fragment):
    with pytest.raises(SpecError) as refused:
        load_text(f"name: a\nstrategy: mirrored\nroles: {{chief: {{replicas: 1}}}}\nenv: {env}\n")
    assert fragment in str(refused.value)
    assert "env" in str(refused.value)


def test_a_pod_template_env_name_set_in_env_too_is_refused():
    text = (
        "name: a\nstrategy: mirrored\nenv: {A: x}\nroles:\n  chief:\n    replicas: 1\n    podTemplate:\n"
        "      spec: {containers: [{name: tensorflow,\n"
        "        env: [{name: A, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]}]}\n"
    )
    with pytest.raises(SpecError) as refused:
        load_text(text)
    assert "roles.chief.podTemplate.spec.containers.0.env.0.name" in str(refused.value)
    assert "A is set in env too" in str(refused.value)
