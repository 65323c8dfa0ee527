"""The contract (worker/contract.py) and the plan (launcher/plan/plan.py): every rule written once."""

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

from launcher import k8s_contract
from launcher.cluster_spec.loader import load_text
from launcher.plan.plan import env_list, plan
from launcher.pod import job_watch
from worker import contract
from worker.contract import Role, Strategy

REPO = Path(__file__).resolve().parents[3]
# Where rules could be copied by hand: the runtime code. The chart's templates write the objects
# out as a Helm user reads them; tests/charts/test_helm_parity.py keeps them equal to `render`.
SOURCES = [
    *(REPO / "launcher").rglob("*.py"),
    *(REPO / "worker").rglob("*.py"),
    *(REPO / "manifests").glob("*.j2"),
]
DEFINED_IN = {
    REPO / "worker" / "contract.py",
    REPO / "launcher" / "k8s_contract.py",
    REPO / "launcher" / "pod" / "job_watch.py",  # a Job's terminal conditions (shipped alone)
    # imported at every Python start, so it imports no contract: tests/worker/test_keras_check.py
    # keeps its names equal to worker/contract.py's
    REPO / "worker" / "keras_check.py",
}


def spec(text: str):
    return load_text("name: t\n" + text)


PS = "strategy: parameter_server\nroles: {chief: {replicas: 1}, worker: {replicas: 2}, ps: {replicas: 1}}\n"
MWMS = "strategy: multi_worker_mirrored\nroles: {worker: {replicas: 1}}\n"
EVALUATOR = "roles: {evaluator: {replicas: 1}}\ncheckpoint: {dir: gs://b/m}\n"


@pytest.mark.parametrize(
    "literal",
    [
        contract.STRATEGY,
        contract.MODEL_DIR,
        contract.PROGRAM,
        contract.PEER_TIMEOUT,
        contract.CLUSTER_NAME,
        contract.TASK_INDEX,
        contract.BUILTIN_PROGRAM,
        k8s_contract.LABEL_COMPONENT,
        k8s_contract.LABEL_STRATEGY,
        k8s_contract.LABEL_INSTANCE,
        k8s_contract.INDEX_ANNOTATION,
        k8s_contract.SPEC_HASH_ANNOTATION,
        k8s_contract.SUPERVISOR_DIR,
        k8s_contract.DNS1035_PATTERN,
        k8s_contract.QUEUE_LABEL,
        k8s_contract.JOBSET_API_VERSION,
        contract.SERVER_LINGER,
        # A Job's terminal conditions; Complete and Failed are also words of status and pod phases.
        *sorted(job_watch.TERMINAL - {"Complete", "Failed"}),
    ],
)
def test_each_constant_is_written_once(literal):
    quoted = re.compile(re.escape(f'"{literal}"') + "|" + re.escape(f"'{literal}'"))
    copies = [
        str(p.relative_to(REPO))
        for p in SOURCES
        if p not in DEFINED_IN and p.is_file() and quoted.search(p.read_text())
    ]
    assert not copies, f"{literal!r} is repeated in {copies}: use worker/contract.py or launcher/k8s_contract.py"


def _defaults(path: Path):
    """(name, default) of every parameter and class field with a default in the module: a
    number, or the name of the module's constant that holds one."""
    tree = ast.parse(path.read_text())
    constants = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, ast.Constant)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    }
    for node in ast.walk(tree):
        pairs = []
        if isinstance(node, ast.FunctionDef):
            args = node.args.posonlyargs + node.args.args
            pairs = [
                *zip(args[len(args) - len(node.args.defaults) :], node.args.defaults),
                *zip(node.args.kwonlyargs, node.args.kw_defaults),
            ]
            pairs = [(arg.arg, value) for arg, value in pairs if value is not None]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            pairs = [(node.target.id, node.value)]
        for name, value in pairs:
            if isinstance(value, ast.Constant) and type(value.value) in (int, float):
                yield name, value.value, "a literal"
            elif isinstance(value, ast.Name) and type(constants.get(value.id)) in (int, float):
                yield name, constants[value.id], value.id


def test_each_default_is_written_once():
    """A setting (a parameter or field of one name) gets its default from one constant: a number
    written as the default in two places (the 120 s stuck timeout was in three) drifts apart."""
    seen = defaultdict(set)
    for path in [*(REPO / "launcher").rglob("*.py"), *(REPO / "worker").rglob("*.py")]:
        for name, value, source in _defaults(path):
            seen[name, value].add((str(path.relative_to(REPO)), source))
    repeated = {
        f"{name}={value}": sorted(where)
        for (name, value), where in seen.items()
        if len(where) > 1 and any(source == "a literal" for _, source in where)
    }
    assert not repeated, f"defaults written twice: {repeated}; name one constant and use it"


def test_role_lists_are_not_repeated():
    listed = re.compile(r'"chief",\s*"worker",\s*"ps"|"chief" "worker" "ps"')
    copies = [
        str(p.relative_to(REPO))
        for p in SOURCES
        if p not in DEFINED_IN and p.is_file() and listed.search(p.read_text())
    ]
    assert not copies, f"role lists repeated in {copies}: use contract.ROLES / TRAINING_ROLES"


def test_allowed_roles_follow_the_counts():
    assert contract.allowed_roles(Strategy.PARAMETER_SERVER) == tuple(Role)
    data = contract.DATA_SERVICE_ROLES
    assert contract.allowed_roles(Strategy.MULTI_WORKER_MIRRORED) == (Role.WORKER, Role.EVALUATOR, *data)
    assert contract.allowed_roles(Strategy.MIRRORED) == (Role.CHIEF, Role.EVALUATOR, *data)
    assert k8s_contract.role_count_problems(Strategy.MIRRORED, {"chief": 2}) == [
        ("roles.chief.replicas", "mirrored runs in one pod: set 1, got 2")
    ]


def test_ps_plan():
    cluster = plan(
        spec(
            "strategy: parameter_server\nroles: {chief: {replicas: 1}, worker: "
            "{replicas: 2}, ps: {replicas: 1}, evaluator: {replicas: 1}}\n"
            "checkpoint: {dir: gs://b/m}\n"
        )
    )
    assert cluster.success_role is Role.CHIEF
    assert cluster.supervised == (Role.WORKER, Role.PS, Role.EVALUATOR)
    assert [r.role for r in cluster.training_roles] == [Role.CHIEF, Role.WORKER, Role.PS]
    assert cluster.role(Role.EVALUATOR).supervision.grace_seconds == 600
    assert cluster.role(Role.PS).supervision.grace_seconds == 0
    assert cluster.role(Role.PS).service_account == "t-supervisor"
    assert cluster.role(Role.CHIEF).supervision is None
    assert cluster.role(Role.CHIEF).service_account is None
    assert cluster.failure.ignored_exit_codes == (contract.EXIT_PREEMPTED, contract.EXIT_PEER_LOST)
    assert cluster.failure.fatal_exit_codes == (contract.EXIT_CONFIG,)
    assert cluster.failure.counted_exit_codes == (contract.EXIT_NODE_FAULT, 137)
    assert cluster.failure.per_index_roles == ()  # a PS worker's crash costs no peer anything
    address = lambda role, i: f"{role}-{i}:1"  # noqa: E731
    assert cluster.tf_config("evaluator", 0, address) == {"cluster": {}, "task": {"type": "evaluator", "index": 0}}
    assert cluster.tf_config("worker", 1, address)["cluster"] == {
        "chief": ["chief-0:1"],
        "worker": ["worker-0:1", "worker-1:1"],
        "ps": ["ps-0:1"],
    }


def test_mwms_plan_and_user_env_comes_last_in_the_order_written():
    """Ours first, then the spec's env as written (not sorted), then the role's; a role's name
    that the spec has too takes the spec's place with the role's value."""
    cluster = plan(
        spec(
            MWMS.replace(
                "worker: {replicas: 1}", "worker: {replicas: 1, env: [{name: C, value: c}, {name: B, value: w}]}"
            )
            + "env: {B: b, A: $(B)-a}\n"
        )
    )
    assert cluster.success_role is Role.WORKER
    assert cluster.supervised == ()
    role = cluster.role(Role.WORKER)
    entries = [(e.name, e.value) for e in env_list(role.env, role.user_env)]
    assert [name for name, _ in entries][:2] == [contract.GRPC_FAIL_FAST, contract.STRATEGY]
    assert entries[-3:] == [("B", "w"), ("A", "$(B)-a"), ("C", "c")]
    assert role.env[contract.STRATEGY] == "multi_worker_mirrored"


def test_bring_your_own_command_is_fatal_only_on_the_keras_check_and_on_failure_no_policy():
    byo = plan(spec(PS + "command: [python, train.py]\n"))
    assert byo.failure.fatal_exit_codes == contract.COMMAND_CHECK_EXIT_CODES
    assert byo.role(Role.CHIEF).command == ("python", "train.py")
    assert contract.PROGRAM not in byo.role(Role.CHIEF).env
    on_failure = plan(spec(PS + "restartPolicy: OnFailure\n"))
    assert on_failure.failure.ignored_exit_codes == ()
    assert not on_failure.failure.ignores_disruptions


def test_mwms_workers_have_a_retry_budget_per_index():
    cluster = plan(
        spec("strategy: multi_worker_mirrored\nroles: {worker: {replicas: 8}}\ncheckpoint: {dir: gs://b/m}\n")
    )
    failure = cluster.failure
    assert failure.per_index_roles == (Role.WORKER,)
    assert failure.budget(Role.WORKER, 3) == "worker-3"
    # a peer that lost worker 3 after saving exits EXIT_PEER_LOST: not counted at all
    assert contract.EXIT_PEER_LOST in failure.ignored_exit_codes


def test_a_users_command_gets_no_trusted_worker_codes():
    failure = plan(
        spec(
            "strategy: multi_worker_mirrored\nroles: {worker: {replicas: 2}}\n"
            "command: [python, train.py]\ncheckpoint: {dir: gs://b/m}\n"
        )
    ).failure
    # its SIGTERM may be its own: only a pod's DisruptionTarget is a preemption
    assert failure.ignored_exit_codes == ()
    # its own checks' (Keras, a deterministic exception), not the worker's 2
    assert failure.fatal_exit_codes == (contract.EXIT_KERAS_REFUSED, contract.EXIT_DETERMINISTIC_EXCEPTION)
    assert failure.per_index_roles == (Role.WORKER,)


def test_on_failure_has_no_exit_code_rules_and_no_per_index_budget():
    failure = plan(
        spec(
            "strategy: multi_worker_mirrored\nroles: {worker: {replicas: 2}}\n"
            "restartPolicy: OnFailure\ncheckpoint: {dir: gs://b/m}\n"
        )
    ).failure
    assert (failure.ignored_exit_codes, failure.counted_exit_codes, failure.per_index_roles) == ((), (), ())
    assert failure.budget(Role.WORKER, 1) == "worker"


@pytest.mark.parametrize("grace, linger", [(120, "115"), (30, "25"), (6, "3"), (1, "1")])
def test_servers_linger_as_long_as_the_chief_may_save(grace, linger):
    """ps and PS workers serve on after SIGTERM while the chief's port answers: at most the
    pod's grace (the chief's save gets as long), less a margin to exit before SIGKILL."""
    cluster = plan(spec(PS + f"terminationGracePeriodSeconds: {grace}\n"))
    for role in (Role.PS, Role.WORKER):
        assert cluster.role(role).env[contract.SERVER_LINGER] == linger
    assert contract.SERVER_LINGER not in cluster.role(Role.CHIEF).env
    assert contract.server_linger_seconds(grace) == int(linger)


def test_no_linger_outside_parameter_server_and_a_users_value_wins():
    cluster = plan(spec(MWMS))
    assert contract.SERVER_LINGER not in cluster.role(Role.WORKER).env
    mine = plan(spec(PS + "env: {TFK8S_SERVER_LINGER_SECONDS: '300'}\n")).role(Role.PS)
    entries = [(e.name, e.value) for e in env_list(mine.env, mine.user_env)]
    assert (contract.SERVER_LINGER, "300") in entries  # in ours's place: names appear once
    assert [name for name, _ in entries].count(contract.SERVER_LINGER) == 1


def test_the_plan_decides_the_success_index_and_who_watches_what():
    mwms = plan(
        spec(
            "strategy: multi_worker_mirrored\nroles: {worker: {replicas: 3}, "
            "evaluator: {replicas: 1}}\ncheckpoint: {dir: gs://b/m}\n"
        )
    )
    assert mwms.role(Role.WORKER).success_index == contract.SUCCESS_INDEX  # worker 0 is the chief
    assert mwms.role(Role.EVALUATOR).success_index is None
    assert mwms.watched_jobs == ("t-worker",)
    assert mwms.role(Role.EVALUATOR).supervision.per_attempt is False
    assert mwms.jobset is None and mwms.job_ttl_seconds_after_finished == 3600
    ps = plan(spec(PS))
    assert ps.role(Role.CHIEF).success_index is None  # one chief: the Job's own success will do
    assert ps.watched_jobs == ("t-chief",)  # every supervised server watches the chief's Job


def test_a_jobset_plan_holds_the_sets_policies_and_its_jobs_get_no_ttl():
    cluster = plan(
        spec(
            "strategy: multi_worker_mirrored\nworkload: jobset\nqueue: q\n"
            "roles: {worker: {replicas: 2}, evaluator: {replicas: 1}}\n"
            "checkpoint: {dir: gs://b/m}\nttlSecondsAfterFinished: 60\n"
        )
    )
    jobset = cluster.jobset
    assert jobset.success_roles == (Role.WORKER, Role.EVALUATOR)  # the final checkpoint evaluated
    assert jobset.max_restarts == 1  # MWMS: the whole set restarts once
    assert jobset.restart_strategy == k8s_contract.JOBSET_RESTART_STRATEGY
    assert jobset.fatal_job_failure_reasons == k8s_contract.FATAL_JOB_FAILURE_REASONS
    assert (jobset.queue, jobset.ttl_seconds_after_finished) == ("q", 60)
    assert cluster.job_ttl_seconds_after_finished is None  # the set's TTL governs
    assert cluster.role(Role.EVALUATOR).supervision.per_attempt  # Jobs recreated per attempt
    assert cluster.watched_jobs == ("t-worker-0",)
    ps = plan(spec(PS + "workload: jobset\n"))
    assert ps.jobset.success_roles == (Role.CHIEF,) and ps.jobset.max_restarts == 0
    assert ps.jobset.queue is None and ps.supervised == ()  # the set's success ends the servers


def test_lost_node_tolerations_are_added_unless_the_role_tolerates_the_taint_itself():
    cluster = plan(
        spec(
            "strategy: multi_worker_mirrored\nnodeLossTolerationSeconds: 30\n"
            "roles: {worker: {replicas: 1, tolerations: "
            "[{key: node.kubernetes.io/unreachable, operator: Exists}]}}\n"
        )
    )
    assert cluster.role(Role.WORKER).tolerations == (
        {"key": k8s_contract.UNREACHABLE_TAINT, "operator": "Exists"},
        {"key": k8s_contract.NOT_READY_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    )
