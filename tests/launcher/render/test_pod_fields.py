"""A role's pod fields (image, command, volumes, affinity, service account, labels, podTemplate)
and the spec's imagePullSecrets: rendered into the role's pods, merged by the podTemplate rule,
refused at file:line where they would break a task, and passing Pod Security `restricted`.
The chart renders the same (tests/charts/specs/pod-fields*.yaml in tests/charts)."""

from pathlib import Path

import pytest
from support import assert_pod_security_restricted

from launcher.cluster_spec import pod_fields
from launcher.cluster_spec.loader import load_file, load_text, pack_code
from launcher.errors import SpecError
from launcher.plan.plan import plan
from launcher.render import render

SPECS = Path(__file__).resolve().parents[2] / "charts" / "specs"
POD_FIELDS = SPECS / "pod-fields.yaml"


def _pods(spec_file: Path) -> dict[str, dict]:
    """Each role's pod template, by role."""
    spec = load_file(spec_file)
    return {
        job["template"]["metadata"]["labels"]["app.kubernetes.io/component"]: job["template"]
        for _, job in render.job_specs(render.render(plan(spec, pack_code(spec))))
    }


def test_each_role_gets_its_own_image_command_volumes_and_placement():
    pods = _pods(POD_FIELDS)
    chief, worker, ps = pods["chief"]["spec"], pods["worker"]["spec"], pods["ps"]["spec"]
    task = {role: pod["spec"]["containers"][0] for role, pod in pods.items()}
    assert {role: c["image"] for role, c in task.items()} == {
        "chief": "registry.example/team/trainer:1.4",
        "worker": "registry.example/team/trainer:1.4",
        "ps": "registry.example/team/ps:1.4",
        "dispatcher": "registry.example/team/trainer:1.4",
        "data-worker": "registry.example/team/trainer:1.4",
    }
    assert task["chief"]["command"] == ["python", "/app/train.py", "--epochs", "3", "--export"]
    assert task["worker"]["command"][-4:] == ["python", "/app/train.py", "--epochs", "3"]  # after the supervisor
    assert task["ps"]["command"][-2:] == ["python", "/app/ps.py"]  # its own command: none of the spec's args
    # The job-watch container keeps the spec's image: its python3 runs the supervisor.
    assert worker["containers"][1]["image"] == "registry.example/team/trainer:1.4"
    assert ps["containers"][1]["image"] == "registry.example/team/trainer:1.4"
    assert [v["name"] for v in worker["volumes"]][-3:] == ["data", "settings", "creds"]
    assert worker["volumes"][-3] == {
        "name": "data",
        "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True},
    }
    assert task["worker"]["volumeMounts"][-3:] == [
        {"name": "data", "mountPath": "/data", "readOnly": True},
        {"name": "settings", "mountPath": "/etc/train"},
        {"name": "creds", "mountPath": "/var/secrets/gcs", "readOnly": True},
    ]
    assert "data" not in [v["name"] for v in chief["volumes"]]
    assert worker["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert worker["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert "affinity" not in chief and "topologySpreadConstraints" not in chief
    assert {role: pod["spec"]["imagePullSecrets"] for role, pod in pods.items()} == dict.fromkeys(
        pods, [{"name": "registry-cred"}]
    )
    assert chief["serviceAccountName"] == "gcs-reader"
    assert worker["serviceAccountName"] == ps["serviceAccountName"] == "pod-fields-supervisor"
    assert pods["chief"]["metadata"]["labels"]["team"] == "vision"
    assert pods["chief"]["metadata"]["labels"]["app.kubernetes.io/component"] == "chief"
    assert pods["chief"]["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    assert "team" not in pods["worker"]["metadata"]["labels"]
    assert pods["worker"]["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


def test_the_data_service_pods_take_the_specs_image_and_pull_secrets_and_no_roles_fields():
    """A data role has no pod fields of its own (ClusterSpec.pods): the spec's image, account and
    imagePullSecrets, the built-in worker, none of a training role's volumes, labels or podTemplate."""
    pods = _pods(POD_FIELDS)
    for role in ("dispatcher", "data-worker"):
        pod = pods[role]["spec"]
        task = pod["containers"][0]
        assert task["image"] == "registry.example/team/trainer:1.4"
        assert task["command"][-3:] == ["python", "-m", "worker"]  # after the supervisor
        assert pod["imagePullSecrets"] == [{"name": "registry-cred"}]
        assert pod["serviceAccountName"] == "pod-fields-supervisor"
        assert [c["name"] for c in pod["containers"]] == ["tensorflow", "job-watch"]
        assert not {"data", "settings", "creds"} & {v["name"] for v in pod["volumes"]}
        assert "affinity" not in pod and "dnsPolicy" not in pod
        assert "team" not in pods[role]["metadata"]["labels"]
    assert pods["data-worker"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m"}


@pytest.mark.parametrize("field", ["image: x", "command: [x]", "volumes: []", "podTemplate: {spec: {}}"])
@pytest.mark.parametrize("role", ["dispatcher", "worker"])
def test_a_data_service_role_takes_no_pod_field_of_a_training_roles(role, field):
    key = field.split(":")[0]
    with pytest.raises(SpecError) as err:
        load_text(BASE + f"dataService:\n  workers: 1\n  {role}: {{{field}}}\n")
    assert f"dataService.{role}.{key}" in {p.path for p in err.value.problems}, err.value.problems


def test_the_pod_template_merges_by_name_and_keeps_the_launchers_fields():
    pods = _pods(POD_FIELDS)
    worker = pods["worker"]
    assert worker["metadata"]["annotations"]["prometheus.io/scrape"] == "true"  # ours stay
    assert worker["spec"]["dnsPolicy"] == "ClusterFirst"
    assert [c["name"] for c in worker["spec"]["containers"]] == ["tensorflow", "job-watch", "stats"]
    task = worker["spec"]["containers"][0]
    assert task["readinessProbe"]["exec"]["command"] == ["test", "-d", "/data"]
    # merged into ours key by key: restricted's fields stay, readOnlyRootFilesystem is added
    assert task["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
        "readOnlyRootFilesystem": True,
    }
    assert [e["name"] for e in task["env"]][:2] == ["TFK8S_TASK_INDEX", "TF_CONFIG"]
    assert task["env"][-1] == {"name": "GCS_TOKEN", "valueFrom": {"secretKeyRef": {"name": "gcs-key", "key": "token"}}}
    [set_pod] = [p for p in _pods(SPECS / "pod-fields-jobset.yaml").values()]
    assert set_pod["spec"]["runtimeClassName"] == "gvisor"
    assert [c["name"] for c in set_pod["spec"]["initContainers"]] == ["warm-cache"]


@pytest.mark.parametrize("spec_file", sorted(SPECS.glob("pod-fields*.yaml")), ids=lambda p: p.stem)
def test_pods_with_pod_fields_pass_pod_security_restricted(spec_file):
    for pod in _pods(spec_file).values():
        assert_pod_security_restricted(pod["spec"])


def test_merge_rule():
    base = {"a": {"x": 1, "y": 2}, "items": [{"name": "one", "v": 1}], "plain": [1, 2]}
    over = {"a": {"y": 3}, "items": [{"name": "one", "w": 2}, {"name": "two"}], "plain": [3], "new": True}
    assert pod_fields.merge(base, over) == {
        "a": {"x": 1, "y": 3},
        "items": [{"name": "one", "v": 1, "w": 2}, {"name": "two"}],
        "plain": [3],
        "new": True,
    }
    assert base["a"] == {"x": 1, "y": 2}  # a copy


def test_the_launchers_volumes_are_the_reserved_ones():
    """Every volume render gives a pod is one no role may name: pod_fields.RESERVED_VOLUMES."""
    ours = set()
    for spec_file in sorted(SPECS.glob("*.yaml")):
        spec = load_file(spec_file)
        own = {v["name"] for role in spec.active_roles() for v in spec.pods(role).volumes}
        for pod in _pods(spec_file).values():
            ours |= {v["name"] for v in pod["spec"]["volumes"]} - own
    assert ours == set(pod_fields.RESERVED_VOLUMES)


BASE = """\
name: t
strategy: parameter_server
command: [python, train.py]
checkpoint: {volume: {persistentVolumeClaim: {claimName: c}}}
roles:
  chief: {replicas: 1}
  ps: {replicas: 1}
  worker:
    replicas: 1
"""


@pytest.mark.parametrize(
    "role_yaml, line, path, message",
    [
        (
            "    volumes: [{name: data, persistentVolumeClaim: {claimNam: d}}]\n",
            10,
            "roles.worker.volumes.0.persistentVolumeClaim.claimNam",
            "did you mean 'claimName'?",
        ),
        ("    volumes: [{name: checkpoint, emptyDir: {}}]\n", 10, "roles.worker.volumes.0.name", "launcher's volumes"),
        (
            "    volumes: [{name: d, emptyDir: {}}]\n    volumeMounts: [{name: data, mountPath: /data}]\n",
            11,
            "roles.worker.volumeMounts.0.name",
            "is not in roles.worker.volumes: add the volume there",
        ),
        (
            "    volumes: [{name: d, emptyDir: {}}]\n    volumeMounts: [{name: d, mountPath: /ckpt}]\n",
            11,
            "roles.worker.volumeMounts.0.mountPath",
            "the launcher's",
        ),
        (
            "    affinity: {nodeAffinity: {required: {}}}\n",
            10,
            "roles.worker.affinity.nodeAffinity.required",
            "unknown key",
        ),
        ("    serviceAccountName: reader\n", 10, "roles.worker.serviceAccountName", "supervised"),
        (
            "    labels: {app.kubernetes.io/component: x}\n",
            10,
            "roles.worker.labels.app.kubernetes.io/component",
            "the launcher's label",
        ),
        (
            "    podTemplate:\n      spec:\n        hostNetwork: true\n",
            12,
            "roles.worker.podTemplate.spec.hostNetwork",
            "NetworkPolicy",
        ),
        (
            "    podTemplate:\n      spec:\n        containers:\n        - name: tensorflow\n"
            "          env: [{name: A, value: b}]\n",
            14,
            "roles.worker.podTemplate.spec.containers.0.env.0",
            "belongs in roles.worker.env",
        ),
        (
            "    podTemplate:\n      spec:\n        containers:\n        - name: tensorflow\n"
            "          securityContext: {privileged: true}\n",
            14,
            "roles.worker.podTemplate.spec.containers.0.securityContext.privileged",
            "restricted",
        ),
        (
            "    podTemplate:\n      spec:\n        containers:\n        - name: tensorflow\n"
            "          env: [{name: TF_CONFIG, valueFrom: {configMapKeyRef: {name: a, key: b}}}]\n",
            14,
            "roles.worker.podTemplate.spec.containers.0.env.0.name",
            "set by the launcher",
        ),
        (
            "    podTemplate:\n      spec:\n        securityContext: {runAsUser: 0}\n",
            12,
            "roles.worker.podTemplate.spec.securityContext.runAsUser",
            "restricted",
        ),
        (
            "    podTemplate:\n      spec:\n        containers: [{name: job-watch, image: x}]\n",
            12,
            "roles.worker.podTemplate.spec.containers.0.name",
            "supervisor's",
        ),
        (
            "    podTemplate:\n      spec:\n        affinity: {}\n",
            12,
            "roles.worker.podTemplate.spec.affinity",
            "roles.worker.affinity",
        ),
        (
            "    podTemplate:\n      spec:\n        containers:\n        - name: tensorflow\n"
            "          imagePullPolicy: Always\n",
            14,
            "roles.worker.podTemplate.spec.containers.0.imagePullPolicy",
            "imagePullPolicy: set imagePullPolicy in the spec instead (one policy for every role's image)",
        ),
        ("    podTemplate:\n      spek: {}\n", 11, "roles.worker.podTemplate.spek", "did you mean 'spec'?"),
        (
            "    podTemplate:\n      metadata: {labels: {a: b}}\n",
            11,
            "roles.worker.podTemplate.metadata",
            "set roles.worker.labels and roles.worker.annotations instead",
        ),
    ],
)
def test_a_pod_field_that_would_break_a_task_is_refused_at_its_line(role_yaml, line, path, message):
    with pytest.raises(SpecError) as caught:
        load_text(BASE + role_yaml, filename="c.yaml")
    [problem] = caught.value.problems
    assert (problem.line, problem.path) == (line, path), problem
    assert message in problem.message


_SPEC = "    podTemplate:\n      spec:\n"
_AT = "roles.worker.podTemplate.spec"


@pytest.mark.parametrize(
    "template_yaml, path, message",
    [
        (
            "        containers: [{name: tensorflow, securityContext: {seLinuxOptions: {type: spc_t}}}]\n",
            f"{_AT}.containers.0.securityContext.seLinuxOptions.type",
            pod_fields.SELINUX_TYPE.format(value="spc_t", allowed=pod_fields.quoted(pod_fields.SELINUX_TYPES)),
        ),
        (
            "        containers: [{name: tensorflow, securityContext: {seLinuxOptions: {role: sysadm_r}}}]\n",
            f"{_AT}.containers.0.securityContext.seLinuxOptions.role",
            pod_fields.SELINUX_SET.format(key="role"),
        ),
        (
            "        containers: [{name: tensorflow, securityContext: {appArmorProfile: {type: Unconfined}}}]\n",
            f"{_AT}.containers.0.securityContext.appArmorProfile.type",
            pod_fields.APPARMOR_TYPE.format(value="Unconfined", allowed=pod_fields.quoted(pod_fields.APPARMOR_TYPES)),
        ),
        (
            "        securityContext:\n"
            "          sysctls: [{name: kernel.shm_rmid_forced, value: '1'}, {name: kernel.msgmax, value: '1'}]\n",
            f"{_AT}.securityContext.sysctls.1.name",
            pod_fields.UNSAFE_SYSCTL.format(name="kernel.msgmax", allowed=pod_fields.quoted(pod_fields.SAFE_SYSCTLS)),
        ),
        (
            "        securityContext: {seLinuxOptions: {type: spc_t}}\n",
            f"{_AT}.securityContext.seLinuxOptions.type",
            pod_fields.SELINUX_TYPE.format(value="spc_t", allowed=pod_fields.quoted(pod_fields.SELINUX_TYPES)),
        ),
        (
            "        securityContext: {appArmorProfile: {type: Unconfined}}\n",
            f"{_AT}.securityContext.appArmorProfile.type",
            pod_fields.APPARMOR_TYPE.format(value="Unconfined", allowed=pod_fields.quoted(pod_fields.APPARMOR_TYPES)),
        ),
        (
            "        containers: [{name: tensorflow, livenessProbe: {httpGet: {host: 10.0.0.1, port: 80}}}]\n",
            f"{_AT}.containers.0.livenessProbe.httpGet.host",
            pod_fields.HOST_SET,
        ),
        (
            "        containers: [{name: tensorflow, lifecycle: {preStop: {tcpSocket: {host: a.b, port: 1}}}}]\n",
            f"{_AT}.containers.0.lifecycle.preStop.tcpSocket.host",
            pod_fields.HOST_SET,
        ),
        (
            "        containers: [{name: side, image: x, securityContext: {privileged: true}}]\n",
            f"{_AT}.containers.0.securityContext.privileged",
            pod_fields.ADDED_SECURITY.format(key="privileged", allowed="false"),
        ),
        (
            "        initContainers: [{name: side, image: x, securityContext: {allowPrivilegeEscalation: true}}]\n",
            f"{_AT}.initContainers.0.securityContext.allowPrivilegeEscalation",
            pod_fields.ADDED_SECURITY.format(key="allowPrivilegeEscalation", allowed="false"),
        ),
        (
            "        containers: [{name: side, image: x, securityContext: {runAsUser: 0}}]\n",
            f"{_AT}.containers.0.securityContext.runAsUser",
            pod_fields.ADDED_SECURITY.format(key="runAsUser", allowed="a uid other than 0"),
        ),
        (
            "        containers: [{name: side, image: x, securityContext: {runAsNonRoot: false}}]\n",
            f"{_AT}.containers.0.securityContext.runAsNonRoot",
            pod_fields.ADDED_SECURITY.format(key="runAsNonRoot", allowed="true"),
        ),
        (
            "        containers: [{name: side, image: x, securityContext: {procMount: Unmasked}}]\n",
            f"{_AT}.containers.0.securityContext.procMount",
            pod_fields.ADDED_SECURITY.format(key="procMount", allowed="Default"),
        ),
        (
            "        containers: [{name: side, image: x, securityContext: {capabilities: {add: [SYS_ADMIN]}}}]\n",
            f"{_AT}.containers.0.securityContext.capabilities.add.0",
            pod_fields.ADDED_CAPABILITY.format(name="SYS_ADMIN", allowed="'NET_BIND_SERVICE'"),
        ),
        (
            "        initContainers: [{name: side, image: x, securityContext: {seccompProfile: {type: Unconfined}}}]\n",
            f"{_AT}.initContainers.0.securityContext.seccompProfile.type",
            pod_fields.SECCOMP_TYPE.format(value="Unconfined", allowed=pod_fields.quoted(pod_fields.SECCOMP_TYPES)),
        ),
        (
            "        initContainers: [{name: side, image: x, securityContext: {seLinuxOptions: {type: spc_t}}}]\n",
            f"{_AT}.initContainers.0.securityContext.seLinuxOptions.type",
            pod_fields.SELINUX_TYPE.format(value="spc_t", allowed=pod_fields.quoted(pod_fields.SELINUX_TYPES)),
        ),
        (
            "        containers: [{name: side, image: x, readinessProbe: {tcpSocket: {host: a.b, port: 1}}}]\n",
            f"{_AT}.containers.0.readinessProbe.tcpSocket.host",
            pod_fields.HOST_SET,
        ),
    ],
)
def test_what_pod_security_restricted_refuses_is_refused_at_its_line(template_yaml, path, message):
    """SELinux, AppArmor, sysctls and probe hosts beyond restricted (#61), and a container the
    podTemplate adds held to restricted as the launcher's own are."""
    with pytest.raises(SpecError) as caught:
        load_text(BASE + _SPEC + template_yaml, filename="c.yaml")
    [problem] = caught.value.problems
    last_line = (BASE + _SPEC + template_yaml).count("\n")  # each case's refusal is on its last line
    assert (problem.line, problem.path, problem.message) == (last_line, path, message)


def test_what_pod_security_restricted_allows_passes():
    allowed = (
        "        securityContext:\n"
        "          sysctls: [{name: net.ipv4.ip_unprivileged_port_start, value: '80'}]\n"
        "          seLinuxOptions: {type: container_t, level: 's0:c1,c2'}\n"
        "          appArmorProfile: {type: RuntimeDefault}\n"
        "        containers:\n"
        "        - name: tensorflow\n"
        "          securityContext:\n"
        "            seLinuxOptions: {type: ''}\n"
        "            appArmorProfile: {type: Localhost, localhostProfile: p}\n"
        "          livenessProbe: {httpGet: {path: /healthz, port: 8080, host: ''}}\n"
        "        - name: side\n"
        "          image: x\n"
        "          securityContext:\n"
        "            runAsUser: 1000\n"
        "            runAsNonRoot: true\n"
        "            privileged: false\n"
        "            allowPrivilegeEscalation: false\n"
        "            capabilities: {add: [NET_BIND_SERVICE], drop: [ALL]}\n"
        "            seccompProfile: {type: RuntimeDefault}\n"
        "            procMount: Default\n"
    )
    spec = load_text(BASE + _SPEC + allowed, filename="c.yaml")
    [worker] = [
        job["template"]["spec"]
        for _, job in render.job_specs(render.render(plan(spec, pack_code(spec))))
        if job["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "worker"
    ]
    assert [c["name"] for c in worker["containers"]] == ["tensorflow", "job-watch", "side"]
    assert worker["securityContext"]["sysctls"] == [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "80"}]
    assert_pod_security_restricted(worker)


def test_a_roles_command_needs_the_specs():
    text = BASE.replace("command: [python, train.py]\n", "") + "    command: [python, w.py]\n"
    with pytest.raises(SpecError) as caught:
        load_text(text, filename="c.yaml")
    [problem] = caught.value.problems
    assert (problem.line, problem.path) == (9, "roles.worker.command")
    assert "built-in worker runs every role" in problem.message
