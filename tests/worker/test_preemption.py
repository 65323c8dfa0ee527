"""SIGTERM (pod deletion, drain, spot reclaim) to a training task: it saves the step it has
reached, exits EXIT_PREEMPTED, and its restart resumes at exactly that step (0 lost steps).

Real TensorFlow clusters run by LocalBackend; the signal is what Kubernetes sends. Each of these
runs trains its strategy and loop to the end, so the ones in EVALUATED also carry what a plain
training of that strategy and loop must show (an evaluator's final evaluation, the exported
SavedModel's accuracy, every task done): a separate run to the end without the SIGTERM would
start the same TensorFlow cluster again to prove nothing more. The preemption does not make
those checks easier: the model must learn through the save and the restart.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import gce_metadata
import pytest
from local_clusters import (
    ONE_PS_WORKER,
    REPO_ROOT,
    SMALL_PROGRAM,
    Submission,
    assert_no_task_processes,
    attempts,
    events,
    final_marker,
    free_port,
    kill_task,
    make_spec,
    measure,
    metrics,
    run_files,
    wait_until,
    worker_args,
)

from worker.errors import EXIT_PREEMPTED

pytestmark = pytest.mark.process

STEPS = 240  # 4 epochs of EVERY under fit
EVERY = 60  # periodic checkpoints far apart, so a save at the SIGTERM step is visibly extra
TIMEOUT = 420
CHANCE = 0.1
MIN_ACCURACY = 0.8  # the built-in CNN on digits: 0.96-0.98 after 200 steps, 0.97-0.99 after 400
PROBES = Path(__file__).parent / "probes"


def args(loop: str) -> list[str]:
    return worker_args(STEPS, EVERY, loop)


def progress_step(backend, name, role, index) -> int:
    """The highest step the task's current attempt has reported."""
    runs = attempts(backend, name, role, index)
    steps = [
        r["step"]
        for r in (runs[-1] if runs else [])
        if r["event"] in ("first_step", "block", "epoch") and r.get("step") is not None
    ]
    return max(steps, default=0)


CASES = {
    # name: (strategy, loop, role, index that gets SIGTERM, the trainers that restart, GCE node)
    "ps-custom": ("parameter_server", "custom", "chief", 0, [("chief", 0)], False),
    "ps-fit": ("parameter_server", "fit", "chief", 0, [("chief", 0)], False),
    "mwms-custom-w0": ("multi_worker_mirrored", "custom", "worker", 0, [("worker", 0), ("worker", 1)], False),
    # On a GCE/GKE node TF's own PreemptionCheckpointHandler neither restores nor watches
    # SIGTERM (worker/lifecycle/agreement.py): the synchronous loops must not depend on it.
    "mwms-custom-w1-gce": ("multi_worker_mirrored", "custom", "worker", 1, [("worker", 0), ("worker", 1)], True),
    "mwms-fit-w1-gce": ("multi_worker_mirrored", "fit", "worker", 1, [("worker", 0), ("worker", 1)], True),
    "mirrored-custom-gce": ("mirrored", "custom", "chief", 0, [("chief", 0)], True),
    "mirrored-fit-gce": ("mirrored", "fit", "chief", 0, [("chief", 0)], True),
}
# The runs that also show the strategy and loop learn, with an evaluator (only they start one:
# nothing reads the others' evaluations). One per strategy and loop, as the training tests
# that ran each of them to the end without a SIGTERM had it (mirrored: its custom loop).
EVALUATED = {"ps-custom", "ps-fit", "mwms-custom-w0", "mwms-fit-w1-gce", "mirrored-custom-gce"}
# Its tasks run probes/child_mask_program.py: the processes the program starts get SIGTERM.
CHILD_MASK_CASE = "mwms-custom-w0"
# The finished run a resubmit of the same spec must leave alone (no evaluator, as before).
RESUBMITTED = "mirrored-fit-gce"


@pytest.fixture
def gce_node(monkeypatch):
    """Task processes started now see a GCE metadata server (tests/gce_metadata.py), as on GKE,
    and TensorFlow's own platform check says so."""
    from tensorflow.python.distribute.failure_handling import failure_handling_util

    with gce_metadata.serving() as server:
        monkeypatch.setenv("GCE_METADATA_IP", server.address)
        assert failure_handling_util.on_gcp(), "TF does not take the stand-in for GCE"
        yield server


@pytest.mark.parametrize("case", list(CASES))
def test_sigterm_saves_the_current_step_the_restart_resumes_there_and_the_training_ends_right(
    backend, workdir, case, request
):
    strategy, loop, role, index, trainers, gce = CASES[case]
    if gce:
        request.getfixturevalue("gce_node")
    name = f"term-{case}"
    # backoffLimit 0: a preemption must not count as a failure, or this cluster would fail.
    program = {}
    if case == CHILD_MASK_CASE:
        request.getfixturevalue("probe_programs_importable")
        program = {"program": {"module": "child_mask_program", "args": args(loop)}}
    # PS: the chief is preempted, the worker's part is unchanged: one worker is as many as that needs
    roles = ONE_PS_WORKER if strategy == "parameter_server" else None
    spec = make_spec(name, strategy, args(loop), evaluator=case in EVALUATED, backoffLimit=0, roles=roles, **program)
    run = Submission(backend, spec)
    # Past the first periodic checkpoint and some way into the next interval.
    wait_until(
        lambda: run.still_running() and progress_step(backend, name, trainers[0][0], trainers[0][1]) >= EVERY + 30,
        TIMEOUT,
        f"{name} past step {EVERY + 30}",
    )
    kill_task(backend, name, role, index, signal.SIGTERM)
    sigterm_at = time.time()
    assert run.wait(TIMEOUT) == 0, backend.status(name)
    assert_no_task_processes(workdir)

    status = backend.status(name)
    assert status.phase == "Succeeded", status
    assert all(r.failed == 0 for r in status.roles), status.roles
    assert final_marker(backend, name)["step"] == STEPS

    preempted_steps, restored = set(), {}
    for trainer_role, trainer_index in trainers:
        runs = attempts(backend, name, trainer_role, trainer_index)
        assert len(runs) == 2, f"{trainer_role}-{trainer_index} ran {len(runs)} times"
        first, second = runs
        preempted = [r for r in first if r["event"] == "preempted"]
        assert preempted, f"{trainer_role}-{trainer_index} did not save on preemption"
        exit_record = [r for r in first if r["event"] == "exit"][-1]
        assert exit_record["code"] == EXIT_PREEMPTED
        reached = max(r["step"] for r in first if r["event"] in ("first_step", "block", "epoch", "checkpoint", "step"))
        start = [r for r in second if r["event"] == "start"][0]
        # Zero lost steps: the restart starts where the preempted attempt had got to.
        assert start["step"] == preempted[0]["step"] >= reached, (start, preempted, reached)
        preempted_steps.add(preempted[0]["step"])
        restored[f"{trainer_role}-{trainer_index}"] = start["step"]
        if strategy == "multi_worker_mirrored":
            # Every worker's restart restored that same step (the all-gathered check).
            [gathered] = [r["steps"] for r in second if r["event"] == "restored_steps"]
            assert set(gathered) == {start["step"]}, gathered
        if (trainer_role, trainer_index) == (role, index):
            stopped_after = exit_record["wall"] - sigterm_at
            first_step = [r for r in second if r["event"] in ("first_step", "epoch", "step")][0]
            resumed_after = first_step["wall"] - sigterm_at
    assert len(preempted_steps) == 1, f"the workers saved different steps: {preempted_steps}"
    step = preempted_steps.pop()
    measure(
        f"preemption {case}: SIGTERM to {role}-{index} at step ~{step}: saved step {step} "
        f"(last periodic checkpoint {step // EVERY * EVERY}), exited {EXIT_PREEMPTED} "
        f"{stopped_after:.1f} s after the signal; restarted at step {step} (0 lost steps; "
        f"restored step per trainer {restored}), next step {resumed_after:.1f} s after the "
        f"signal; cluster took {run.seconds:.1f} s" + (" [GCE node]" if gce else "")
    )
    if case in EVALUATED:
        check_trained_to_the_end(backend, name, strategy, loop, status, run)
    if case == CHILD_MASK_CASE:
        check_the_programs_children_block_no_signal(backend, name, trainers)
    if case == RESUBMITTED:
        check_resubmitting_the_finished_cluster_is_a_no_op(backend, workdir, spec)


def check_the_programs_children_block_no_signal(backend, name, trainers) -> None:
    """A process the program starts (in build_dataset) keeps the signal mask of the thread that
    started it through exec: with SIGTERM blocked there, it would outlive a pod's SIGTERM."""
    tasks = [*trainers, ("evaluator", 0)]
    masks = {
        f"{role}-{index}": [r["blocked"] for r in events(backend, name, role, index, "child_signal_mask")]
        for role, index in tasks
    }
    assert all(masks.values()), f"a task reported no child: {masks}"
    assert {mask for seen in masks.values() for mask in seen} == {"0000000000000000"}, masks
    measure(f"SigBlk of a process the program started, per task and attempt: {masks}")


def check_trained_to_the_end(backend, name, strategy, loop, status, run) -> None:
    """What a run of `strategy` and `loop` to the end must show, whatever happened on the way:
    the evaluator's final evaluation of the final checkpoint, a model that learnt, each role
    done, and for the multi-task strategies the exported SavedModel (loaded with no strategy)
    as accurate."""
    final = check_evaluated_final(backend, name, loop)
    roles = {r.role: r for r in status.roles}
    if strategy == "parameter_server":
        exported = saved_model_accuracy(backend, name)
        assert exported["accuracy"] > MIN_ACCURACY
        # ps and workers never exit: the launcher stopped them after training and they count as done.
        assert roles["ps"].succeeded == 1 and roles["worker"].succeeded == ONE_PS_WORKER["worker"]
        assert roles["evaluator"].succeeded == 1 and roles["chief"].succeeded == 1
        assert exported["strategy"] == "_DefaultDistributionStrategy"
        connected = events(backend, name, "chief", 0, "connected")[0]
        first = (events(backend, name, "chief", 0, "first_step") or events(backend, name, "chief", 0, "first_epoch"))[0]
        measure(
            f"PS {loop}: final accuracy {final['accuracy']:.3f} at step {final['step']}, "
            f"SavedModel accuracy {exported['accuracy']:.3f}, chief connected at "
            f"{connected['t']:.1f} s, first {'step' if loop == 'custom' else 'epoch'} at "
            f"{first['t']:.1f} s, cluster wall time {run.seconds:.1f} s (with a preemption)"
        )
    elif strategy == "multi_worker_mirrored":
        assert roles["worker"].succeeded == 2 and roles["worker"].failed == 0
        assert saved_model_accuracy(backend, name)["accuracy"] > MIN_ACCURACY
        # Only worker 0 writes into the model dir; worker 1's checkpoint copies were temporary.
        model_dir = run_files(backend, name).dir / "model"
        assert not [p for p in model_dir.rglob("*workertemp*")], "worker 1 left files behind"
        if loop == "custom":
            temporary = Path(events(backend, name, "worker", 1, "checkpoint")[-1]["path"]).parent
            assert not temporary.is_relative_to(model_dir)
            assert not temporary.exists(), f"worker 1's temporary checkpoints left in {temporary}"
        measure(
            f"MWMS {loop}: final accuracy {final['accuracy']:.3f} at step {final['step']}, "
            f"cluster wall time {run.seconds:.1f} s (with a preemption)"
        )
    else:
        devices = events(backend, name, "chief", 0, "devices")[0]
        assert devices["replicas"] >= 1
        measure(
            f"mirrored {loop} ({devices['replicas']} device(s)): final accuracy "
            f"{final['accuracy']:.3f}, cluster wall time {run.seconds:.1f} s (with a preemption)"
        )


def check_evaluated_final(backend, name, loop) -> dict:
    marker = final_marker(backend, name)
    assert marker["step"] == STEPS and marker["requested_steps"] == STEPS
    assert marker["loop"] == loop
    records = metrics(backend, name)
    final = [r for r in records if r["final"]]
    assert len(final) == 1 and final[0]["checkpoint"] == marker["checkpoint"], records
    assert final[0]["step"] == STEPS
    assert final[0]["accuracy"] > MIN_ACCURACY > CHANCE, records
    steps = [r["step"] for r in records]
    assert steps == sorted(steps), "evaluated out of order"
    return final[0]


def saved_model_accuracy(backend, name) -> dict:
    path = run_files(backend, name).dir / "model" / "saved_model"
    done = subprocess.run(
        [sys.executable, str(PROBES / "saved_model_accuracy.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_resubmitting_the_finished_cluster_is_a_no_op(backend, workdir, spec) -> None:
    """FINAL.json with the same --steps: the chief exits 0 at once; nothing is retrained."""
    first = final_marker(backend, spec.name)
    assert Submission(backend, spec, replace=True).wait(120) == 0
    again = final_marker(backend, spec.name)
    # the same final, re-stamped for this run: its evaluator ends on a marker of its own run
    assert {**again, "run": None} == {**first, "run": None} and again["run"] != first["run"], (first, again)
    assert not events(backend, spec.name, "chief", 0, "epoch"), "trained again"
    assert_no_task_processes(workdir)


def test_fit_resumes_and_never_retrains(backend, workdir):
    """A chief that died after fit returned but before FINAL.json (what a lost ps does right
    there) comes back to a model dir with every checkpoint and no marker: it must finish from
    the backup, not train again from epoch 0 with fresh weights. A larger --steps continues."""
    name = "fit-resume"
    fit_args = [
        "--loop",
        "fit",
        "--steps",
        "200",
        "--checkpoint-every",
        "50",
        "--global-batch-size",
        "64",
        "--data",
        "digits",
        "--max-checkpoints",
        "2",
    ]
    small = {"module": SMALL_PROGRAM}  # the model is not the subject
    # Nor is the number of workers: one, so each of the three submissions starts 3 tasks, not 4.
    roles = ONE_PS_WORKER
    spec = make_spec(
        name, "parameter_server", fit_args, evaluator=False, roles=roles, program={**small, "args": fit_args}
    )
    assert Submission(backend, spec).wait(TIMEOUT) == 0, backend.status(name)
    model = run_files(backend, name).dir / "model"
    checkpoints = sorted(p.name for p in (model / "checkpoints").glob("ckpt-*.index"))
    assert checkpoints == ["ckpt-3.index", "ckpt-4.index"]  # --max-checkpoints 2 honoured
    (model / "FINAL.json").unlink()

    assert Submission(backend, spec, replace=True).wait(TIMEOUT) == 0, backend.status(name)
    again = attempts(backend, name, "chief", 0)[-1]
    assert [r["step"] for r in again if r["event"] == "start"] == [200]
    assert not [r for r in again if r["event"] == "epoch"], "fit trained again"
    assert final_marker(backend, name)["step"] == 200

    longer_args = [a if a != "200" else "300" for a in fit_args]
    longer = make_spec(
        name, "parameter_server", longer_args, evaluator=False, roles=roles, program={**small, "args": longer_args}
    )
    assert Submission(backend, longer, replace=True).wait(TIMEOUT) == 0, backend.status(name)
    more = attempts(backend, name, "chief", 0)[-1]
    assert [r["step"] for r in more if r["event"] == "start"] == [200]
    assert [r["step"] for r in more if r["event"] == "epoch"] == [250, 300]
    assert final_marker(backend, name)["step"] == 300
    measure(
        "fit resume: chief back after fit returned: 0 epochs retrained, FINAL at step 200; "
        "rerun with --steps 300 continued from step 200 (epochs at 250, 300)"
    )


def _start_ps_as_pid_1(tmp_path, chief_address: str, **env_extra):
    """`python -m worker` as a ps, PID 1 of a new PID namespace (as in a container), after it
    reports serving: (unshare process, the server's psutil.Process, output so far)."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    import psutil

    from launcher.cluster_spec.loader import load_text
    from launcher.plan.plan import task_env

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a PID namespace")
    spec = load_text(
        "name: pid1\nstrategy: parameter_server\nworkload: jobset\n"
        "roles: {chief: {replicas: 1}, worker: {replicas: 1}, ps: {replicas: 1}}\n"
    )
    env = {
        **os.environ,
        **task_env(spec, "ps", str(tmp_path / "model")),
        **env_extra,
        "TF_CONFIG": json.dumps(
            {
                "cluster": {"chief": [chief_address], "worker": ["127.0.0.1:2"], "ps": [f"127.0.0.1:{free_port()}"]},
                "task": {"type": "ps", "index": 0},
            }
        ),
        "TFK8S_TASK_INDEX": "0",
    }
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-m", "worker"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if '"event": "serving"' in line:
            break
    if not any('"serving"' in line for line in lines):
        proc.kill()
        raise AssertionError("".join(lines)[-3000:])
    [server] = psutil.Process(proc.pid).children()  # PID 1 inside the namespace
    return proc, server


def test_ps_server_as_pid_1_exits_143_on_sigterm(tmp_path):
    """In a JobSet a ps (or PS worker) runs without our supervisor: it is PID 1 of its container,
    where the kernel drops a SIGTERM whose disposition is the default. The server must still end
    by itself with EXIT_PREEMPTED, not live on to the SIGKILL. No chief answers here: it exits
    at once."""
    proc, server = _start_ps_as_pid_1(tmp_path, "127.0.0.1:1")
    try:
        sent = time.monotonic()
        server.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        seconds = time.monotonic() - sent
        rest = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == EXIT_PREEMPTED, rest[-3000:]
    assert '"event": "preempted"' in rest
    measure(f"ps server as PID 1, no chief: SIGTERM -> exit {code} in {seconds:.2f} s")


def test_ps_serves_on_while_the_chief_saves_for_the_pods_grace_not_10_s(tmp_path):
    """The whole cluster preempted at once: the chief saves the current step from the ps'
    variables, so the ps serves on after SIGTERM while the chief's port answers, and leaves
    (143) as soon as the chief has gone, well before its linger. That linger is the one the plan
    sets (the pod's grace less a margin: 115 s of the default 120), not the old fixed 10 s: a
    chief whose save takes longer than 10 s still finds its ps serving. One ps for both: a
    second would only start TensorFlow again to show the first half."""
    # TFK8S_SERVER_LINGER_SECONDS from the plan; 13 s: a save longer than the old 10 s
    code, seconds, rest = _sigterm_ps_while_the_chief_is_up(tmp_path, 13)
    assert code == EXIT_PREEMPTED, rest[-3000:]
    assert "serving while the chief is up" in rest
    assert "at most 115 s" in rest, rest[-3000:]
    assert seconds < 10, seconds
    measure(
        f"ps after SIGTERM, linger from the plan (115 s): served on 13 s while the chief was "
        f"up, exited {code} {seconds:.2f} s after the chief's port closed"
    )


def _sigterm_ps_while_the_chief_is_up(tmp_path, serve_seconds: float, **env):
    """SIGTERM to a ps whose chief's port answers; after `serve_seconds` (the ps must still be
    there) the chief's port closes. (the ps' exit code, seconds from the close to its exit,
    its output after serving)."""
    import socket

    chief = socket.socket()
    chief.bind(("127.0.0.1", 0))
    chief.listen(16)
    address = f"127.0.0.1:{chief.getsockname()[1]}"
    proc, server = _start_ps_as_pid_1(tmp_path, address, **env)
    try:
        server.send_signal(signal.SIGTERM)
        time.sleep(serve_seconds)
        if proc.poll() is not None:
            raise AssertionError(
                f"the ps left ({proc.returncode}) while the chief was still up:\n" + proc.stdout.read()[-3000:]
            )
        chief.close()
        gone = time.monotonic()
        code = proc.wait(timeout=30)
        seconds = time.monotonic() - gone
        rest = proc.stdout.read()
    finally:
        chief.close()
        if proc.poll() is None:
            proc.kill()
    return code, seconds, rest


def test_mwms_sigterm_while_the_strategy_waits_for_a_peer_that_never_joins_exits_143_at_once(tmp_path):
    """MultiWorkerMirroredStrategy(...) waits inside one C call for every worker to register, and
    TensorFlow's binding held the GIL through it: SIGTERM's thread could not run until the peer
    joined, and with a peer that never joins (a whole cluster drained, a replacement Pending on
    GPUs) the worker ran on to the SIGKILL at the end of the grace (exit 137, counted). Worker 1
    here never joins: its pod is up (its port answers, so worker 0's peer wait is over) but its
    TensorFlow never starts. Worker 0, SIGTERMed inside the constructor's wait, exits 143 at once
    (worker/lifecycle/gil_free_wait.py), with no step."""
    import json
    import os
    import socket
    import subprocess
    import sys
    import threading

    never_joins = socket.create_server(("127.0.0.1", 0))  # worker 1's pod: up, TF never
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{never_joins.getsockname()[1]}"]}
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "TFK8S_STRATEGY": "multi_worker_mirrored",
        "TFK8S_PROGRAM": SMALL_PROGRAM,
        "TFK8S_MODEL_DIR": str(tmp_path / "model"),
        "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}),
    }
    worker0 = subprocess.Popen(
        [sys.executable, "-m", "worker", "--steps", "20", "--data", "digits"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    waiting = threading.Event()

    def read() -> None:
        for line in worker0.stdout:
            lines.append(line)
            if "tasks to connect" in line:  # the coordination service waits for worker 1
                waiting.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    grace = 30  # well inside a pod's (120 s by default); TF's own wait for the peer is longer
    try:
        assert waiting.wait(180), "".join(lines)[-3000:]
        time.sleep(1.0)  # inside the strategy's constructor, TF's notifier installed
        sent = time.monotonic()
        worker0.send_signal(signal.SIGTERM)
        try:
            code = worker0.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            code = None
        seconds = time.monotonic() - sent
    finally:
        if worker0.poll() is None:
            worker0.kill()
        never_joins.close()
    reader.join(10)
    output = "".join(lines)
    assert code is not None, f"worker 0 still ran {grace} s after SIGTERM (a pod's SIGKILL):\n{output[-3000:]}"
    assert code == EXIT_PREEMPTED, output[-3000:]
    assert '"event": "preempted"' in output and '"event": "start"' not in output, output[-3000:]
    measure(
        f"MWMS worker SIGTERMed inside the strategy's wait for a peer that never joins: exit {code} "
        f"{seconds:.1f} s after the signal (before: alive until the pod's SIGKILL, 137)"
    )
