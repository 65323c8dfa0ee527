"""`status` of a cluster with a data service, on plain API-shaped dicts: its roles are listed
beside the training's, keep the cluster Finishing until their Jobs end, and a failed one says
its cause in one line like every task."""

from launcher.status.lifecycle import compute_status
from launcher.status.lines import status_line

from .test_lifecycle import job, pod


def test_data_roles_are_listed_with_the_training_roles():
    s = compute_status(
        "c",
        "ns",
        [
            job("chief", active=1),
            job("worker", 2, active=2),
            job("dispatcher", active=1),
            job("data-worker", 2, active=2),
        ],
        [
            pod("chief"),
            pod("worker", 0),
            pod("worker", 1),
            pod("dispatcher"),
            pod("data-worker", 0),
            pod("data-worker", 1),
        ],
    )
    assert s.phase == "Running"
    assert [(r.role, r.replicas, r.active) for r in s.roles] == [
        ("chief", 1, 1),
        ("worker", 2, 2),
        ("dispatcher", 1, 1),
        ("data-worker", 2, 2),
    ]
    assert "dispatcher 1/1, data-worker 2/2" in status_line(s)


def test_data_workers_still_serving_keep_the_cluster_finishing_until_their_job_ends():
    chief = job("chief", condition="Complete", succeeded=1)
    s = compute_status(
        "c", "ns", [chief, job("data-worker", 2, active=2)], [pod("chief", phase="Succeeded", exit_code=0)]
    )
    assert s.phase == "Finishing" and "data-worker" in s.message
    assert [(r.role, r.active) for r in s.roles] == [("chief", 0), ("data-worker", 2)]
    s = compute_status("c", "ns", [chief, job("data-worker", 2, condition="Complete")], [])
    assert s.phase == "Succeeded"


def test_a_failed_data_worker_gives_its_cause_in_one_line():
    crashed = pod("data-worker", 1, phase="Failed", exit_code=2, restarts=6)
    crashed["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = (
        "TFK8S_DATA_SERVICE='': not the dispatcher's grpc://host:port; the launcher sets it\n"
    )
    s = compute_status(
        "c", "ns", [job("chief", active=1), job("data-worker", 2, condition="Failed")], [pod("chief"), crashed]
    )
    [data_worker] = [r for r in s.roles if r.role == "data-worker"]
    assert (
        data_worker.reason
        == "Error: TFK8S_DATA_SERVICE='': not the dispatcher's grpc://host:port; the launcher sets it"
    )
