"""A spec with a role's pod fields run as local processes: each role's own command and args
run as on Kubernetes; every field that only a pod has is named once, with why, and not dropped
silently."""

from __future__ import annotations

import io

from support import REPO

from launcher.backends.local.preflight import as_processes
from launcher.backends.local.tasks import plan_tasks
from launcher.cluster_spec.loader import load_file
from launcher.plan.plan import plan as make_plan


def test_local_tasks_run_each_roles_command_and_name_what_they_ignore():
    out = io.StringIO()
    spec = as_processes(load_file(REPO / "tests" / "charts" / "specs" / "pod-fields.yaml"), out)
    held, tasks = plan_tasks(make_plan(spec, model_dir="/tmp/model"), "/envs/tf/bin/python")
    held.close()
    argv = {(t.role, t.index): t.argv for t in tasks}
    assert argv["chief", 0] == ["python", "/app/train.py", "--epochs", "3", "--export"]
    assert argv["worker", 1] == ["python", "/app/train.py", "--epochs", "3"]
    assert argv["ps", 0] == ["python", "/app/ps.py"]
    assert out.getvalue().splitlines() == [
        "note: --local ignores roles.chief.serviceAccountName: no Kubernetes API here",
        "note: --local ignores roles.chief.labels: no pods here",
        "note: --local ignores roles.chief.annotations: no pods here",
        "note: --local ignores roles.worker.volumes: no Kubernetes volumes here (each mountPath is a dir of the run)",
        "note: --local ignores roles.worker.affinity: every task runs on this machine",
        "note: --local ignores roles.worker.topologySpreadConstraints: every task runs on this machine",
        "note: --local ignores roles.worker.annotations: no pods here",
        "note: --local ignores roles.worker.podTemplate: no pods here",
        "note: --local ignores roles.ps.image: the tasks run in this machine's Python (--python)",
        "note: --local ignores imagePullSecrets: the tasks run in this machine's Python",
    ]


ENV_SPEC = """\
name: envs
strategy: mirrored
command: [python, train.py]
roles:
  chief:
    replicas: 1
    env:
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: LOG_DIR, value: /logs/$(POD_NAME)}
    - {name: B, value: chief-$(ZETA)}
env:
  ZETA: "1"
  B: $(ZETA)-x
  ALPHA: $(B)/$(TFK8S_CLUSTER)
"""


def test_local_env_keeps_the_written_order_expands_earlier_entries_and_names_a_value_from():
    """As in the pod: the spec's env as written (ALPHA after B reads B), the role's B in the
    spec's place (so ALPHA reads the role's value); a valueFrom is not set here, said in one note,
    and a reference to it stays as written, as Kubernetes leaves an undefined name."""
    from launcher.cluster_spec.loader import load_text

    out = io.StringIO()
    spec = as_processes(load_text(ENV_SPEC), out)
    held, [chief] = plan_tasks(make_plan(spec, model_dir="/tmp/model"), "/envs/tf/bin/python")
    held.close()
    assert chief.env["ZETA"] == "1"
    assert chief.env["B"] == "chief-1"
    assert chief.env["ALPHA"] == "chief-1/envs"
    assert chief.env["LOG_DIR"] == "/logs/$(POD_NAME)"
    assert "POD_NAME" not in chief.env
    user = [name for name in chief.env if name in ("ZETA", "B", "ALPHA", "LOG_DIR")]
    assert user == ["ZETA", "B", "ALPHA", "LOG_DIR"]
    assert out.getvalue().splitlines() == [
        "note: --local does not set roles.chief.env POD_NAME: its valueFrom (fieldRef) is read by Kubernetes "
        "in a pod; a $(POD_NAME) of it stays as written (set a value to run it here)"
    ]


PYTHONPATH_SPEC = """\
name: paths
strategy: mirrored
command: [python, train.py]
code: code
roles:
  chief: {replicas: 1}
checkpoint:
  dir: /train/model
  volume: {persistentVolumeClaim: {claimName: shared}, mountPath: /train}
env:
  PYTHONPATH: /opt/tfk8s/code:/train/libs:/usr/share/mine
"""


def test_local_tasks_keep_the_specs_pythonpath_between_the_checks_and_the_launchers_checkout(tmp_path):
    """The spec's PYTHONPATH is the pod's: locally it stays, in its order, each entry under the
    pods' code dir or a mount path named by its dir here; the start-up checks' dir before it and
    the launcher's checkout after it (tasks.module_path). Before: the spec's entries were dropped
    (`STARTUP_DIR:<checkout>`)."""
    from launcher.backends.local import runner
    from launcher.backends.local.tasks import STARTUP_DIR, mount_dirs
    from launcher.cluster_spec.loader import load_text, pack_code

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("")
    spec = load_text(PYTHONPATH_SPEC, base_dir=tmp_path, shared_disk=True)
    here = tmp_path / "run"
    cluster = make_plan(spec, pack_code(spec), model_dir=str(here / "model"), code_dir=str(here / "code"))
    held, [chief] = plan_tasks(cluster, "/envs/tf/bin/python", mount_dirs(spec, here))
    held.close()
    assert chief.env["PYTHONPATH"].split(":") == [
        STARTUP_DIR,
        str(here / "code"),
        str(here / "mounts" / "train" / "libs"),
        "/usr/share/mine",
        *runner.pythonpath().split(":"),
    ]


def test_without_a_pythonpath_of_the_spec_the_code_dir_comes_first_after_the_checks(tmp_path):
    from launcher.backends.local import runner
    from launcher.backends.local.tasks import STARTUP_DIR
    from launcher.cluster_spec.loader import load_text, pack_code

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("")
    spec = load_text(PYTHONPATH_SPEC.replace("env:\n  PYTHONPATH", "# "), base_dir=tmp_path, shared_disk=True)
    cluster = make_plan(spec, pack_code(spec), model_dir=str(tmp_path / "model"), code_dir=str(tmp_path / "copy"))
    held, [chief] = plan_tasks(cluster, "/envs/tf/bin/python")
    held.close()
    assert chief.env["PYTHONPATH"].split(":") == [STARTUP_DIR, str(tmp_path / "copy"), *runner.pythonpath().split(":")]
