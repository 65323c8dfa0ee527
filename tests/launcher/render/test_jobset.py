"""The JobSet projection: the same pods as the Jobs projection, one JobSet, Kueue's label."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, example_specs

from launcher import k8s_contract
from launcher.cluster_spec.loader import load_file, load_text
from launcher.errors import SpecError
from launcher.plan.plan import plan
from launcher.render import render
from worker import contract

QUEUED = REPO / "examples" / "ps-queued.yaml"


def _as(example: Path, **changes):
    data = load_file(example).model_dump(by_alias=True, mode="json")
    data.update(changes)
    return load_text(json.dumps(data), filename=str(example))


def _children(jobset: dict) -> dict[str, dict]:
    return {rj["name"]: rj["template"] for rj in jobset["spec"]["replicatedJobs"]}


def test_queued_example_is_one_jobset_with_the_queue_label():
    objects = render.render(plan(load_file(QUEUED)))
    kinds = [o["kind"] for o in objects]
    assert kinds.count("JobSet") == 1 and kinds[0] == "JobSet"
    # No Service (JobSet's own), no Job objects; ConfigMap + RBAC only for the evaluator's
    # supervisor; the gRPC and the evaluator's NetworkPolicy.
    assert sorted(kinds[1:]) == [
        "ConfigMap",
        "NetworkPolicy",
        "NetworkPolicy",
        "NetworkPolicy",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ]
    [jobset] = objects[:1]
    assert jobset["metadata"]["labels"][k8s_contract.QUEUE_LABEL] == "tfk8s-queue"
    assert jobset["spec"]["suspend"] is True  # Kueue resumes it once admitted
    assert jobset["spec"]["network"] == {
        "enableDNSHostnames": True,
        "subdomain": "mnist-ps-queued",
        "publishNotReadyAddresses": True,
    }


def test_without_evaluator_nothing_but_the_jobset_and_its_policies():
    spec = load_text(
        "name: p\nstrategy: parameter_server\nworkload: jobset\n"
        "roles: {chief: {replicas: 1}, worker: {replicas: 2}, ps: {replicas: 1}}\n"
    )
    jobset, policy, metrics_policy = render.render(plan(spec))
    assert jobset["kind"] == "JobSet"
    assert (policy["kind"], policy["metadata"]["name"]) == ("NetworkPolicy", "p-grpc")
    assert (metrics_policy["kind"], metrics_policy["metadata"]["name"]) == ("NetworkPolicy", "p-metrics")
    assert "suspend" not in jobset["spec"]  # not queued: starts at once
    # Servers are ended by the success policy: no supervisor, no token, no RBAC.
    for name, template in _children(jobset).items():
        pod = template["spec"]["template"]["spec"]
        assert pod["containers"][0]["command"][:3] == ["python", "-m", "worker"], name
        assert pod["automountServiceAccountToken"] is False, name


@pytest.mark.parametrize("example", example_specs(), ids=lambda p: p.stem)
def test_same_pods_as_the_jobs_projection(example):
    """Every role's Job in the JobSet is the Job the jobs projection creates, but for the names
    JobSet gives (`<set>-<role>-0-<i>`) and what the success policy replaces (supervision of
    PS servers, the Jobs' own TTL)."""
    jobs_spec = _as(example, workload="jobs", queue=None)
    set_spec = _as(example, workload="jobset")
    jobs = {
        o["metadata"]["labels"][k8s_contract.LABEL_COMPONENT]: o
        for o in render.render(plan(jobs_spec))
        if o["kind"] == "Job"
    }
    [jobset] = [o for o in render.render(plan(set_spec)) if o["kind"] == "JobSet"]
    children = _children(jobset)
    assert list(children) == list(jobs)
    supervised = k8s_contract.supervised_roles(set_spec.strategy, "evaluator" in jobs, "jobset")
    for role, job in jobs.items():
        child = children[role]
        assert child["metadata"]["labels"] == job["metadata"]["labels"]
        want = copy.deepcopy(job["spec"])
        want.pop("ttlSecondsAfterFinished", None)
        got = copy.deepcopy(child["spec"])
        want_c = want["template"]["spec"]["containers"][0]
        got_c = got["template"]["spec"]["containers"][0]

        def tf_config(c):
            value = next(e["value"] for e in c["env"] if e["name"] == contract.TF_CONFIG)
            return json.loads(value.replace("$(TFK8S_TASK_INDEX)", "0"))

        want_cfg, got_cfg = tf_config(want_c), tf_config(got_c)
        # the same cluster, addressed by the JobSet's pod names
        name, ns = set_spec.name, set_spec.namespace
        assert got_cfg["task"] == want_cfg["task"]
        for r, addresses in want_cfg["cluster"].items():
            assert got_cfg["cluster"][r] == [
                f"{name}-{r}-0-{i}.{name}.{ns}.svc:{set_spec.port}" for i in range(len(addresses))
            ]
        # the data service's dispatcher too (the trainers' and data workers' TFK8S_DATA_SERVICE)
        dispatcher = [e["value"] for e in got_c["env"] if e["name"] == contract.DATA_SERVICE]
        assert dispatcher in ([], [f"grpc://{name}-dispatcher-0-0.{name}.{ns}.svc:{set_spec.port}"])
        supervised_as_job = len(want["template"]["spec"]["containers"]) == 2
        if contract.Role(role) in supervised or not supervised_as_job:
            for c in (want_c, got_c):
                c["env"] = [e for e in c["env"] if e["name"] not in (contract.TF_CONFIG, contract.DATA_SERVICE)]
            for pod in (want, got):  # the JobSet's names, its restart attempt (none under jobs)
                for c in pod["template"]["spec"]["containers"][1:]:
                    c["env"] = [e for e in c["env"] if e["name"] not in ("TFK8S_WATCH_JOB", "TFK8S_RESTART_ATTEMPT")]
            assert got == want, role
        else:
            # a PS server, supervised as a Job, ended by the success policy in a JobSet
            assert want_c["command"][:4] == ["python3", "/var/run/tfk8s/supervise.py", "run", "--"]
            assert got_c["command"] == want_c["command"][4:]
            assert len(got["template"]["spec"]["containers"]) == 1


def test_success_and_failure_policies_follow_the_contract():
    ps = render.render(plan(load_file(QUEUED)))[0]
    assert ps["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["chief", "evaluator"]}
    assert ps["spec"]["failurePolicy"]["maxRestarts"] == 0
    mwms = _as(REPO / "examples" / "mwms.yaml", workload="jobset")
    [mw] = [o for o in render.render(plan(mwms)) if o["kind"] == "JobSet"]
    targets = ["worker"] + (["evaluator"] if mwms.replicas("evaluator") else [])
    assert mw["spec"]["successPolicy"]["targetReplicatedJobs"] == targets
    assert mw["spec"]["failurePolicy"]["maxRestarts"] == 1  # a failed worker restarts the set
    rule = mw["spec"]["failurePolicy"]["rules"][0]
    assert rule["action"] == "FailJobSet" and "PodFailurePolicy" in rule["onJobFailureReasons"]
    # worker 0 decides the worker Job's success, as in the Jobs projection
    assert _children(mw)["worker"]["spec"]["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}


def test_evaluator_supervisor_watches_the_jobset_child_and_may_read_only_it():
    objects = render.render(plan(load_file(QUEUED)))
    [role] = [o for o in objects if o["kind"] == "Role"]
    assert role["rules"][0]["resourceNames"] == ["mnist-ps-queued-chief-0"]
    evaluator = _children(objects[0])["evaluator"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in evaluator["containers"][1]["env"]}
    assert env["TFK8S_WATCH_JOB"] == "mnist-ps-queued-chief-0"


def test_priority_class_reaches_every_pod():
    spec = _as(QUEUED, priorityClassName="high")
    for template in _children(render.render(plan(spec))[0]).values():
        assert template["spec"]["template"]["spec"]["priorityClassName"] == "high"


def test_queue_needs_jobset():
    with pytest.raises(SpecError) as err:
        _as(REPO / "examples" / "ps.yaml", queue="q")
    assert "queue: a queue needs workload: jobset" in str(err.value)


def test_cli_refuses_queue_without_jobset(tmp_path):
    path = tmp_path / "queued-jobs.yaml"
    path.write_text((REPO / "examples" / "ps.yaml").read_text() + "queue: q\n")
    result = subprocess.run(
        [sys.executable, "-m", "launcher", "render", str(path)], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert result.returncode == 2
    line = result.stderr.strip()
    assert line.startswith(f"error: {path}:") and ": queue: a queue needs workload: jobset" in line
    assert "Set workload: jobset" in line


def test_jobset_names_must_fit():
    long = "n" * 55  # the pod hostname <name>-chief-0-0 is 65 characters
    with pytest.raises(SpecError, match="shorten name"):
        load_text(f"name: {long}\nstrategy: mirrored\nworkload: jobset\nroles: {{chief: {{replicas: 1}}}}\n")


def test_install_hints_name_the_versions_the_kind_tier_tests():
    from launcher.backends.kubernetes import submit

    toolchain = (REPO / "tests" / "kind" / "toolchain.sh").read_text()
    assert f"JOBSET_VERSION=${{TFK8S_JOBSET_VERSION:-{submit.JOBSET_VERSION}}}" in toolchain
    assert f"KUEUE_VERSION=${{TFK8S_KUEUE_VERSION:-{submit.KUEUE_VERSION}}}" in toolchain
    assert submit.JOBSET_VERSION in submit.JOBSET_INSTALL and submit.KUEUE_VERSION in submit.KUEUE_INSTALL


def test_a_restart_recreates_no_job_before_every_old_one_is_gone():
    """BlockingRecreate: a new evaluator never starts beside the old attempt's failed Jobs."""
    for example in (QUEUED, REPO / "examples" / "mwms.yaml"):
        [jobset] = [o for o in render.render(plan(_as(example, workload="jobset"))) if o["kind"] == "JobSet"]
        assert jobset["spec"]["failurePolicy"]["restartStrategy"] == "BlockingRecreate"


def test_a_supervised_evaluator_knows_its_restart_attempt():
    objects = render.render(plan(load_file(QUEUED)))
    evaluator = _children(objects[0])["evaluator"]["spec"]["template"]["spec"]["containers"][1]
    [attempt] = [e for e in evaluator["env"] if e["name"] == "TFK8S_RESTART_ATTEMPT"]
    assert attempt["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['jobset.sigs.k8s.io/restart-attempt']"}
    }
    # not under workload jobs: there is no attempt there
    jobs = render.render(plan(_as(QUEUED, workload="jobs", queue=None)))
    for job_name, spec in render.job_specs(jobs):
        names_ = [e["name"] for c in spec["template"]["spec"]["containers"] for e in c["env"]]
        assert "TFK8S_RESTART_ATTEMPT" not in names_, job_name
