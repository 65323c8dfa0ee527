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
        "note: --local ignores roles.worker.volumes: the tasks see this machine's files",
        "note: --local ignores roles.worker.volumeMounts: the tasks see this machine's files",
        "note: --local ignores roles.worker.affinity: every task runs on this machine",
        "note: --local ignores roles.worker.topologySpreadConstraints: every task runs on this machine",
        "note: --local ignores roles.worker.annotations: no pods here",
        "note: --local ignores roles.worker.podTemplate: no pods here",
        "note: --local ignores roles.ps.image: the tasks run in this machine's Python (--python)",
        "note: --local ignores imagePullSecrets: the tasks run in this machine's Python",
    ]
