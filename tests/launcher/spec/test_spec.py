"""Spec loading: defaults, cross-field rules, and error messages that name file:line:field."""

import pytest

from launcher.cluster_spec.loader import load_text
from launcher.errors import SpecError
from launcher.plan.plan import plan

PS = """\
name: demo
strategy: parameter_server
roles:
  chief: {replicas: 1}
  worker: {replicas: 2}
  ps: {replicas: 1}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_text(text, filename="cluster.yaml")
    return [str(p) for p in info.value.problems]


def test_minimal_ps_spec_gets_defaults():
    spec = load_text(PS)
    assert spec.namespace == "default"
    assert spec.port == 2222
    assert spec.restart_policy == "Never"
    assert spec.termination_grace_period_seconds == 120
    assert spec.network_policy is True  # the gRPC port is fenced off unless the spec says not
    assert spec.builtin and spec.effective_program.module == "worker.examples.fashion_mnist"
    assert [r.role for r in plan(spec).training_roles] == ["chief", "worker", "ps"]


def test_unknown_key_names_line_and_suggests():
    text = PS.replace("  ps: {replicas: 1}", "  ps: {replicas: 1}\n  evalutor: {replicas: 1}")
    [msg] = problems(text)
    assert msg == ("cluster.yaml:7: roles.evalutor: unknown key 'evalutor' (did you mean 'evaluator'?)")


def test_nested_unknown_key():
    text = PS.replace("worker: {replicas: 2}", "worker: {replicas: 2, nodeSelectr: {a: b}}")
    [msg] = problems(text)
    assert "cluster.yaml:5: roles.worker.nodeSelectr" in msg and "nodeSelector" in msg


def test_ps_strategy_needs_a_ps():
    [msg] = problems(PS.replace("ps: {replicas: 1}", "ps: {replicas: 0}"))
    assert msg.startswith("cluster.yaml:6: roles.ps.replicas:")
    assert "at least 1 ps" in msg


def test_every_cross_field_problem_is_reported():
    text = PS.replace("chief: {replicas: 1}", "chief: {replicas: 2}").replace("ps: {replicas: 1}", "ps: {replicas: 0}")
    msgs = problems(text)
    assert len(msgs) == 2
    assert any("roles.chief.replicas" in m for m in msgs)
    assert any("roles.ps.replicas" in m for m in msgs)


def test_long_name_is_refused():
    [msg] = problems(PS.replace("name: demo", "name: " + "a" * 70))
    assert msg.startswith("cluster.yaml:1: name: 70 characters")


def test_generated_names_must_fit_63_characters():
    # 52 characters pass alone, but "<name>-evaluator-0" would exceed a DNS label.
    name = "a" * 52
    text = PS.replace("name: demo", f"name: {name}") + "  evaluator: {replicas: 1}\ncheckpoint: {dir: gs://b/m}\n"
    msgs = problems(text)
    assert any(f"{name}-evaluator-0" in m for m in msgs)


def test_bad_yaml_points_at_line():
    [msg] = problems("name: demo\nroles:\n  chief: {replicas: 1\n")
    assert msg.startswith("cluster.yaml:") and "invalid YAML" in msg


def test_duplicate_keys_are_refused():
    [msg] = problems(PS + "name: other\n")
    assert "duplicate key 'name' (first at line 1)" in msg


def test_mwms_rules():
    spec = load_text(
        "name: m\nstrategy: multi_worker_mirrored\nroles: {worker: {replicas: 3}}\ncheckpoint: {dir: gs://b/m}\n"
    )
    assert [r.role for r in plan(spec).training_roles] == ["worker"]
    msgs = problems("name: m\nstrategy: multi_worker_mirrored\nroles: {worker: {replicas: 2}, ps: {replicas: 1}}\n")
    assert any("has no ps" in m for m in msgs)


def test_mirrored_is_one_pod():
    msgs = problems("name: m\nstrategy: mirrored\nroles: {chief: {replicas: 1}, worker: {replicas: 1}}\n")
    assert any("roles.worker.replicas" in m for m in msgs)


def test_evaluator_needs_shared_checkpoints():
    msgs = problems(PS + "  evaluator: {replicas: 1}\n")
    assert any("checkpoint.volume" in m for m in msgs)


def test_strategy_enum_error():
    [msg] = problems(PS.replace("parameter_server", "ps"))
    assert "strategy" in msg and "parameter_server" in msg


def test_byo_command_excludes_program():
    msgs = problems(PS + "command: [python, t.py]\nprogram: {module: x}\n")
    assert any("either program" in m for m in msgs)


def test_gpu_must_be_a_limit():
    msgs = problems(
        PS.replace("worker: {replicas: 2}", "worker: {replicas: 2, resources: {requests: {nvidia.com/gpu: 1}}}")
    )
    assert any("limits" in m for m in msgs)


def test_reserved_env_is_refused():
    msgs = problems(PS + "env: {TF_CONFIG: x}\n")
    assert any("TF_CONFIG is set by the launcher" in m for m in msgs)


def test_checkpoint_dir_must_be_on_volume():
    msgs = problems(PS + "checkpoint:\n  dir: /data/m\n  volume: {persistentVolumeClaim: {claimName: c}}\n")
    assert any("mountPath" in m for m in msgs)


def test_not_a_mapping():
    [msg] = problems("- a\n- b\n")
    assert "must be a YAML mapping" in msg


def test_replica_rules_are_reported_beside_field_errors():
    # pydantic skips the model's cross-field validator once a field fails; the loader still
    # checks the replica counts so the user sees every problem in one run.
    text = (
        PS.replace("name: demo", "name: " + "a" * 70)
        .replace("worker: {replicas: 2}", "worker: {replicas: 2, replicsa: 1}")
        .replace("ps: {replicas: 1}", "ps: {replicas: 0}")
    )
    msgs = problems(text)
    assert len(msgs) == 3, msgs
    assert msgs[0].startswith("cluster.yaml:1: name: 70 characters")
    assert "roles.worker.replicsa" in msgs[1] and "did you mean 'replicas'" in msgs[1]
    assert msgs[2] == "cluster.yaml:6: roles.ps.replicas: parameter_server needs at least 1 ps, got 0"


def test_replica_rules_are_not_guessed_from_invalid_counts():
    msgs = problems(PS.replace("ps: {replicas: 1}", "ps: {replicas: many}"))
    assert len(msgs) == 1 and "roles.ps.replicas" in msgs[0] and "integer" in msgs[0]


MWMS = """\
name: m
strategy: multi_worker_mirrored
roles:
  worker: {replicas: 3}
"""


@pytest.mark.parametrize(
    "checkpoint,where",
    [
        ("", "without a volume each pod gets its own emptyDir"),
        ("checkpoint:\n  volume:\n    hostPath: {path: /data}\n", "a hostPath is a different directory on each node"),
    ],
)
def test_mwms_workers_need_shared_checkpoints(checkpoint, where):
    [msg] = problems(MWMS + checkpoint)
    # Where, what and why, and how to fix it.
    assert msg.startswith("cluster.yaml:") and ": checkpoint.volume: " in msg, msg
    assert f"multi_worker_mirrored with 3 workers needs checkpoint storage that every worker shares ({where})" in msg
    assert "each worker would restore a different checkpoint" in msg
    assert "ReadWriteMany claim, or use a gs:// checkpoint.dir" in msg
    if checkpoint:
        assert msg.startswith("cluster.yaml:6: "), msg  # the volume's line


@pytest.mark.parametrize(
    "text",
    [
        MWMS + "checkpoint: {volume: {persistentVolumeClaim: {claimName: c}}}\n",
        MWMS + "checkpoint: {dir: gs://bucket/run}\n",
        MWMS.replace("replicas: 3", "replicas: 1"),  # one worker: nothing to disagree with
        MWMS.replace("replicas: 3", "replicas: 1") + "checkpoint: {volume: {hostPath: {path: /d}}}\n",
    ],
)
def test_mwms_shared_checkpoints_accepted(text):
    assert load_text(text).strategy.value == "multi_worker_mirrored"


def test_termination_grace_must_be_positive():
    [msg] = problems(PS + "terminationGracePeriodSeconds: 0\n")
    assert "terminationGracePeriodSeconds" in msg and "greater than or equal to 1" in msg


def test_network_policy_is_a_strict_boolean():
    # Strict like the chart's schema: a string or a number is refused, never coerced.
    [msg] = problems(PS + 'networkPolicy: "false"\n')
    assert msg == (
        "cluster.yaml:7: networkPolicy: Input should be a valid boolean (write true or false, without quotes)"
    )
    assert load_text(PS + "networkPolicy: false\n").network_policy is False


def test_a_huge_spec_or_env_value_is_refused_at_load_in_one_line(tmp_path):
    """A 10 MB spec rendered 13 MB of YAML (22 s) and crashed `submit --local` with "Argument
    list too long"; an env value over 128 KiB did the same to a local task."""
    from launcher.cluster_spec.loader import load_file
    from launcher.errors import SpecError

    path = tmp_path / "cluster.yaml"
    path.write_text(
        f"name: big\nstrategy: mirrored\nroles: {{chief: {{replicas: 1}}}}\nenv: {{BLOB: {'x' * 300_000}}}\n"
    )
    with pytest.raises(SpecError, match=r"cluster.yaml: the spec is 293 KiB, over the 256 KiB"):
        load_file(path)
    path.write_text(
        f"name: big\nstrategy: mirrored\nroles: {{chief: {{replicas: 1, env: {{BLOB: {'x' * 40_000}}}}}}}\n"
    )
    with pytest.raises(SpecError) as info:
        load_file(path)
    assert "roles.chief.env: BLOB is 39 KiB, over the 32 KiB an env value may have" in str(info.value), str(info.value)


BYO = PS + "image: me/train:1\ncommand: [python, train.py]\n"


def test_fatal_exit_codes_of_a_command_of_your_own_are_accepted():
    spec = load_text(BYO + "fatalExitCodes: [3, 1, 100]\n")
    assert spec.fatal_exit_codes == [3, 1, 100]
    assert plan(spec).failure.fatal_exit_codes == (78, 70, 3, 1, 100)  # 78, 70: our checks', always
    assert load_text(BYO).fatal_exit_codes == []  # by default every failure is retried


@pytest.mark.parametrize(
    "text,message",
    [
        (
            PS + "fatalExitCodes: [1]\n",
            "cluster.yaml:7: fatalExitCodes: the built-in worker's exit codes have fixed meanings",
        ),
        (
            BYO + "restartPolicy: OnFailure\nfatalExitCodes: [1]\n",
            "cluster.yaml:10: fatalExitCodes: needs restartPolicy: Never (Kubernetes allows no podFailurePolicy",
        ),
        (
            BYO + "fatalExitCodes: [1, 143]\n",
            "cluster.yaml:9: fatalExitCodes: 143 is SIGTERM's (a preemption, never counted), not your program's: "
            "remove it from fatalExitCodes",
        ),
        (BYO + "fatalExitCodes: [137]\n", "fatalExitCodes: 137 is SIGKILL's"),
        (BYO + "fatalExitCodes: [7]\n", "fatalExitCodes: 7 is the supervisor's"),
        (BYO + "fatalExitCodes: [3, 1, 3]\n", "fatalExitCodes: 3 is listed twice: list each code once"),
        (BYO + "fatalExitCodes: [0]\n", "fatalExitCodes[0]: "),
        (BYO + "fatalExitCodes: [256]\n", "fatalExitCodes[0]: "),
    ],
    ids=["built-in", "on-failure", "sigterm", "sigkill", "supervisor", "twice", "zero", "above-255"],
)
def test_fatal_exit_codes_are_refused_where_they_cannot_be_a_fail_job_rule(text, message):
    [msg] = problems(text)
    assert message in msg


def _alias_bomb(levels: int) -> str:
    """A spec whose env value A repeats nine times per level: 9**levels strings of 3 bytes."""
    lines = ['  L0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"  L{i}: &l{i} [{','.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return PS + "env:\n" + "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_at_load_in_one_line_naming_its_line():
    """A few hundred bytes of aliases expand exponentially: refused from the node tree, before
    PyYAML builds the values (seen: 362 bytes cost 374 MB to refuse), at the innermost line over."""
    text = _alias_bomb(9)  # 9**9 * "lol": over a GiB, built
    assert len(text.encode()) < 1024
    found = problems(text)
    # L4 is 9**5 "lol"s, about 240 KB; L5, nine of them, the innermost value over 256 KiB
    line = next(n for n, text_line in enumerate(text.splitlines(), 1) if text_line.startswith("  L5:"))
    assert found == [
        f"cluster.yaml:{line}: YAML aliases (*name) expand this value to over 256 KiB, "
        "the most a spec may have (write the values out, or repeat fewer aliases)"
    ]


def test_aliases_that_expand_within_the_spec_limit_still_load_as_yaml_says():
    """Below the bound, aliases keep their meaning (here a list value, which env: refuses as
    not a string: the ordinary field error, not the alias one)."""
    found = problems(_alias_bomb(2))
    assert found and not any("alias" in p for p in found)


def test_a_yaml_alias_to_the_value_that_holds_it_is_refused():
    found = problems(PS + "env:\n  A: &a [*a]\n")
    assert found == [
        "cluster.yaml:8: a YAML alias (*name) in this value refers to the value itself: it never ends "
        "(write the values out, or repeat fewer aliases)"
    ]


@pytest.mark.parametrize("script", ["train.py", "/app/train.py", "src/train"])
def test_a_script_as_program_module_suggests_a_command(script):
    text = f"name: a\nstrategy: mirrored\nprogram: {{module: {script}}}\nroles: {{chief: {{replicas: 1}}}}\n"
    with pytest.raises(SpecError) as caught:
        load_text(text, filename="c.yaml")
    [problem] = caught.value.problems
    assert (problem.line, problem.path) == (3, "program.module")
    assert f"is a script, not a module: a program of your own runs by command, e.g. `command: [python, {script}]`" in (
        problem.message
    )
