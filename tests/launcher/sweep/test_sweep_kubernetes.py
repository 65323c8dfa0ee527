"""A sweep on Kubernetes, against the fake API of tests/launcher/backends/kubernetes: each trial
one JobSet queued through Kueue, `parallelTrials` at a time; a trial waiting in the queue is not
failed; a failed JobSet is its trial's cause, and too many failures end the running trials."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import yaml
from backends.kubernetes.fake_api import FakeApi
from support import wait_until

from launcher import k8s_contract
from launcher.api import KubernetesBackendConfig, TFK8sClient
from launcher.backends.kubernetes.api import JOBSET
from launcher.backends.kubernetes.backend import KubernetesBackend

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_queued_trials_wait_and_a_failed_one_ends_the_sweep_at_max_failed_trials(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the sweep's files: .tfk8s/.sweeps/sw here
    api = FakeApi()
    api.unserved.clear()  # JobSet and Kueue served
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "tfk8s-queue"}}
    api.add({**queue, "metadata": {**queue["metadata"], "namespace": "default"}})
    client = TFK8sClient(KubernetesBackendConfig())
    backend = KubernetesBackend(KubernetesBackendConfig(), out=io.StringIO(), api=api)
    client._backends.update({None: backend, "default": backend})  # the fake, where the trials go
    sweep = {
        "name": "sw",
        "cluster": str(EXAMPLES / "ps-queued.yaml"),
        "parameters": [{"name": "batch", "flag": "--global-batch-size", "values": [16, 64, 128]}],
        "objective": {"metric": "accuracy", "direction": "maximize"},
        "algorithm": "grid",
        "parallelTrials": 2,
        "maxFailedTrials": 0,
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    events, result = [], {}
    runner = threading.Thread(
        target=lambda: result.update(status=client.sweep(path, on_event=events.append, poll_seconds=0.05))
    )
    runner.start()
    try:
        wait_until(lambda: len(jobsets(api)) == 2, 30, "two trials submitted")
        for number, jobset in enumerate(jobsets(api)):
            labels = jobset["metadata"]["labels"]
            assert jobset["metadata"]["name"] == f"sw-t{number}" and jobset["spec"]["suspend"] is True
            assert labels[k8s_contract.QUEUE_LABEL] == "tfk8s-queue"
            assert labels[k8s_contract.LABEL_SWEEP] == "sw" and labels[k8s_contract.LABEL_SWEEP_TRIAL] == str(number)
        wait_until(lambda: all(t.phase == "Queued" for t in client.sweep_status("sw").trials), 30, "both queued")
        assert len(jobsets(api)) == 2 and runner.is_alive()  # waiting in the queue is no failure

        failed = api.objects[(*JOBSET, "default", "sw-t0")]
        failed["spec"]["suspend"] = False
        failed["status"] = {
            "conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "chief failed"}]
        }
        runner.join(timeout=30)
    finally:
        if runner.is_alive():
            (client.sweep_dir("sw") / "stop").touch()
            runner.join(timeout=30)
    status = result["status"]
    assert status.phase == "Failed"
    assert status.message == (
        "1 trials failed, more than maxFailedTrials 0; the last, sw-t0: JobSet failed: FailedJobs: chief failed"
    )
    assert [(t.cluster, t.phase, t.message) for t in status.trials] == [
        ("sw-t0", "Failed", "JobSet failed: FailedJobs: chief failed"),
        ("sw-t1", "Stopped", "ended: the sweep failed"),
    ]
    assert [j["metadata"]["name"] for j in jobsets(api)] == ["sw-t0"]  # the running trial was deleted
    assert events[-1] == "sweep sw: Failed - " + status.message

    # A later launcher (`sweep delete sw` with a kubeconfig of another default namespace) finds
    # the trials in the namespace they were submitted to, and ends them.
    later = TFK8sClient(KubernetesBackendConfig())
    later._backends["default"] = backend  # the fake serves only that namespace
    assert later.delete_sweep("sw") == ["sw-t0"] and not jobsets(api)


def jobsets(api: FakeApi) -> list[dict]:
    return sorted(
        (o for (version, kind, _, _), o in api.objects.items() if (version, kind) == JOBSET),
        key=lambda o: o["metadata"]["name"],
    )


def test_a_trial_the_api_server_refuses_counts_as_failed_and_ends_the_sweep_in_time(tmp_path, monkeypatch):
    """No LocalQueue: each submit is refused; with maxFailedTrials 0 the first refusal ends the
    sweep, and no other trial is submitted after it."""
    monkeypatch.chdir(tmp_path)
    api = FakeApi()
    api.unserved.clear()
    client = TFK8sClient(KubernetesBackendConfig())
    backend = KubernetesBackend(KubernetesBackendConfig(), out=io.StringIO(), api=api)
    client._backends.update({None: backend, "default": backend})
    status = client.sweep(
        {
            "name": "sw",
            "cluster": str(EXAMPLES / "ps-queued.yaml"),
            "parameters": [{"name": "batch", "flag": "--global-batch-size", "values": [16, 64, 128]}],
            "objective": {"metric": "accuracy", "direction": "maximize"},
            "algorithm": "grid",
            "parallelTrials": 2,
            "maxFailedTrials": 0,
        },
        poll_seconds=0.05,
    )
    assert status.phase == "Failed" and [t.cluster for t in status.trials] == ["sw-t0"]
    assert status.trials[0].message.startswith("not submitted: queue: there is no LocalQueue 'tfk8s-queue'")
