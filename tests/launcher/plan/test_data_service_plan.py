"""dataService: the spec's tf.data service becomes the roles `dispatcher` (1) and `data-worker`
(N) under every strategy, with their own addresses, pods and the trainers' TFK8S_DATA_SERVICE."""

import pytest

from launcher.cluster_spec.loader import SpecError, load_text
from launcher.plan.plan import plan
from launcher.render import tfconfig
from worker import contract
from worker.contract import Role

STRATEGIES = {
    "parameter_server": "roles: {chief: {replicas: 1}, worker: {replicas: 2}, ps: {replicas: 1}}",
    "multi_worker_mirrored": "roles: {worker: {replicas: 2}}\ncheckpoint: {dir: gs://b/m}",
    "mirrored": "roles: {chief: {replicas: 1}}",
}
DATA_SERVICE = (
    "dataService:\n"
    "  workers: 2\n"
    "  dispatcher: {resources: {limits: {cpu: '1'}}}\n"
    "  worker: {resources: {requests: {cpu: '2'}}, env: {A: b}, nodeSelector: {pool: cpu},"
    " tolerations: [{key: k, operator: Exists}]}\n"
)


def spec(strategy: str, extra: str = DATA_SERVICE):
    return load_text(f"name: t\nstrategy: {strategy}\n{STRATEGIES[strategy]}\n{extra}")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_plans_one_dispatcher_and_the_data_workers_as_supervised_servers(strategy):
    cluster = plan(spec(strategy))
    assert cluster.role(Role.DISPATCHER).replicas == 1
    assert cluster.role(Role.DATA_WORKER).replicas == 2
    assert [r.role for r in cluster.data_service_roles] == [Role.DISPATCHER, Role.DATA_WORKER]
    for role in cluster.data_service_roles:
        # ended by the supervisor once the success role's Job has ended, at once after a failure
        assert role.supervision is not None and role.supervision.grace_seconds == 0
        assert role.supervision.watch_job == cluster.role(cluster.success_role).job_name
        assert role.listens and not role.in_training_cluster
    assert cluster.create_service_account


def test_without_a_data_service_no_data_role_is_planned_and_mwms_needs_no_supervisor():
    cluster = plan(spec("multi_worker_mirrored", ""))
    assert not cluster.data_service_roles
    assert not cluster.create_service_account
    assert all(contract.DATA_SERVICE not in r.env for r in cluster.roles)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_trainers_and_data_workers_get_the_dispatchers_address_and_tf_config_keeps_them_apart(strategy):
    cluster = plan(spec(strategy))
    address = tfconfig.kubernetes_address(cluster)
    dispatcher = "grpc://t-dispatcher-0.t.default.svc:2222"
    for role in cluster.roles:
        env = cluster.data_service_env(role.role, address)
        if role.role in (*contract.DATA_READERS, Role.DATA_WORKER):
            assert env == {contract.DATA_SERVICE: dispatcher}
        else:
            assert env == {}
    trainer = cluster.tf_config(cluster.success_role, 0, address)
    assert set(trainer["cluster"]) == {r.role.value for r in cluster.training_roles}
    worker = cluster.tf_config(Role.DATA_WORKER, 1, address)
    assert worker == {
        "cluster": {
            "dispatcher": ["t-dispatcher-0.t.default.svc:2222"],
            "data-worker": ["t-data-worker-0.t.default.svc:2222", "t-data-worker-1.t.default.svc:2222"],
        },
        "task": {"type": "data-worker", "index": 1},
    }


def test_each_data_role_gets_its_own_pod_fields_over_the_specs_env():
    cluster_spec = spec("parameter_server", DATA_SERVICE + "env: {A: spec, B: spec}\n")
    assert cluster_spec.pods(Role.DISPATCHER).resources.limits == {"cpu": "1"}
    assert cluster_spec.pods(Role.DATA_WORKER).node_selector == {"pool": "cpu"}
    cluster = plan(cluster_spec)
    assert {e.name: e.value for e in cluster.role(Role.DATA_WORKER).user_env}["A"] == "b"
    assert {e.name: e.value for e in cluster.role(Role.DISPATCHER).user_env}["A"] == "spec"
    assert cluster.role(Role.DATA_WORKER).tolerations == ({"key": "k", "operator": "Exists"},)


@pytest.mark.parametrize(
    "extra, path",
    [
        ("dataService: {workers: 0}\n", "dataService.workers"),
        ("dataService: {}\n", "dataService.workers"),
        ("dataService: {workers: 1, worker: {replicas: 2}}\n", "dataService.worker.replicas"),
        ("dataService: {workers: 1, dispatcher: {env: {TF_CONFIG: x}}}\n", "dataService.dispatcher.env"),
    ],
)
def test_a_wrong_data_service_is_refused_at_its_field(extra, path):
    with pytest.raises(SpecError) as err:
        spec("parameter_server", extra)
    assert path in {p.path for p in err.value.problems}, err.value.problems


def test_the_built_in_workers_data_service_flag_needs_a_data_service():
    with pytest.raises(SpecError) as err:
        spec("mirrored", "program: {args: [--steps, '10', --data-service]}\n")
    [problem] = err.value.problems
    assert problem.path == "program.args" and "add dataService" in problem.message
    # a command of your own may take any argument
    spec("mirrored", "command: [python, train.py, --data-service]\n")


def test_the_data_roles_run_the_built_in_worker_beside_a_command_of_your_own():
    cluster = plan(spec("mirrored", DATA_SERVICE + "image: me/train:1\ncommand: [python, train.py]\n"))
    assert cluster.role(Role.CHIEF).command == ("python", "train.py") and not cluster.role(Role.CHIEF).builtin
    for role in cluster.data_service_roles:
        assert role.command == ("python", "-m", "worker") and role.builtin


def test_data_worker_names_must_fit_a_dns_label():
    long_name = "n" * 50  # its chief fits, data-worker-11 does not
    with pytest.raises(SpecError, match="data-worker"):
        load_text(f"name: {long_name}\nstrategy: mirrored\n{STRATEGIES['mirrored']}\ndataService: {{workers: 12}}\n")
