"""`python -m worker [program args]`: run this task's role of a TensorFlow training cluster.

Every pod (and every local task) runs this same command; TF_CONFIG says which role it is:

    strategy               role       module                  what it does
    parameter_server       chief      worker/roles/coordinator.py   trains: ClusterCoordinator or fit
                           worker/ps  worker/roles/ps_server.py     tf.distribute.Server().join()
    multi_worker_mirrored  worker     worker/roles/mwms.py          trains; worker 0 writes
    mirrored               chief      worker/roles/mirrored.py      trains over local devices
    any                    evaluator  worker/roles/evaluator.py     evaluates checkpoints, exits after
                                                              the final one
    any (dataService)      dispatcher worker/roles/data_service.py  tf.data service servers: join()
                           data-worker

Program arguments (all roles get the same; `python -m worker --help` for details):
    --loop custom|fit        training loop (default custom; fit uses tf_keras)
    --steps N                optimizer steps in total (default 400)
    --global-batch-size N    examples per step across replicas (default 64)
    --checkpoint-every N     steps between checkpoints / steps per fit epoch (default 50)
    --data SOURCE            digits | synthetic | fashion_mnist | /path/file.npz (default digits)
    --max-checkpoints N      checkpoints kept (default 10)

Order of events, and why:
1. Parse arguments and the environment without TensorFlow: mistakes fail in milliseconds.
2. Set GRPC_FAIL_FAST=use_caller (a dead worker's closures move to the others instead of
   stalling) and, for the fit loop and anything under parameter_server, TF_USE_LEGACY_KERAS=1
   (tf_keras; why: worker/args.py Options.uses_legacy_keras): both only work if set before
   TensorFlow is imported.
3. Wait for the peers this role needs (worker/lifecycle/peers.py) while a thread imports TensorFlow:
   on a fresh cluster the wait is the peers' own start-up, so the import (seconds) overlaps it
   instead of following it.
4. Resolve TF_CONFIG with TFConfigClusterResolver, run the role.
5. Exit with os._exit once the work is written (worker/lifecycle/shutdown.py): returning would run TF's
   teardown of remote resources, which took up to 30 s here, silently.
"""

from __future__ import annotations

import dataclasses
import errno
import gc
import os
import sys
import threading
import time
import traceback

from worker import (
    args,
    context,
    contract,
    errors,
    metrics,
    node_faults,
    progress,  # first: its import time is the process start for timings
)
from worker.contract import Role, Strategy
from worker.lifecycle import peers, port_holders, preemption, shutdown
from worker.model_dir import layout


def main(argv: list[str] | None = None):
    """Runs the role and exits the process (see worker/lifecycle/shutdown.py); never returns."""
    gc.disable()  # until the imports are done: _collect_from_here
    preemption.install()  # SIGTERM while starting up exits at once (worker/lifecycle/preemption.py)
    options = args.parse(argv)  # exits 2 with usage on bad arguments, 0 on --help
    where = "worker"  # becomes the task's name once TF_CONFIG is read
    task = None
    try:
        task = context.from_environment()
        where = task.name
        _serve_metrics(task, options)
        os.environ[contract.GRPC_FAIL_FAST] = contract.GRPC_FAIL_FAST_VALUE
        if options.uses_legacy_keras(task.strategy):
            os.environ["TF_USE_LEGACY_KERAS"] = "1"
        _wait_for_peers(task)
        if task.role is Role.EVALUATOR:
            _wait_for_a_checkpoint(task)
        code = _run_role(task, options)
    # Exit inside each handler: leaving it would free the failed frames and run TF's teardown.
    except errors.WorkerError as exc:
        _fail(where, exc)
    except KeyboardInterrupt:
        shutdown.exit_now(130)
    except Exception as exc:  # noqa: BLE001 - every failure ends with its one-line cause
        from worker import program

        module = None if task is None else task.program_module
        if isinstance(exc, ImportError):  # a package missing, or an import while the role ran (a lazy one)
            verdict = program.import_failure(exc, module)
        else:  # our port taken, or the program's code raised it
            verdict = port_holders.bind_failure(exc, None if task is None else task.own_port) or (
                program.runtime_failure(exc, module)
            )
        if verdict is None:
            _fail_unexpected(where, exc)
        _fail(where, verdict)
    shutdown.exit_now(code)


def _fail(where: str, exc: errors.WorkerError):
    """One line on stderr and in the pod's termination message, then exit with its code. An
    error raised from another (`raise ... from exc`) leaves that one's traceback first."""
    if exc.__cause__ is not None:
        traceback.print_exception(exc.__cause__)
    _say_cause(where, str(exc))
    shutdown.exit_now(exc.exit_code)


def _fail_unexpected(where: str, exc: BaseException):
    """The traceback for the log, then its cause in one line (the log's last line, which the
    local backend reads, and the termination message, which Kubernetes keeps): never the
    traceback's tail, which may be a tensor printout."""
    traceback.print_exc()
    _say_cause(where, errors.cause_line(exc))
    shutdown.exit_now(errors.EXIT_UNEXPECTED)


def _say_cause(where: str, message: str) -> None:
    print(contract.ERROR_LINE.format(task=where, message=message), file=sys.stderr, flush=True)
    errors.write_termination_message(message)


def _serve_metrics(task: context.TaskContext, options: args.Options) -> None:
    """Prometheus metrics on TFK8S_METRICS_PORT (worker/metrics.py), from before the peers'
    wait, so the start-up phases are seen as they pass. A port it cannot bind costs the
    metrics, said in one line, never the training."""
    try:
        address = metrics.start(task, progress.PROCESS_START, options.global_batch_size)
    except OSError as exc:
        port = os.environ.get(contract.METRICS_PORT, "")
        held = f": {port_holders.describe(int(port))}" if exc.errno == errno.EADDRINUSE and port.isdigit() else ""
        print(
            f"tfk8s {task.name}: no Prometheus metrics: cannot serve on {contract.METRICS_PORT}="
            f"{port} ({exc.strerror or exc}{held}); training goes on without them",
            flush=True,
        )
        return
    if address:
        print(f"tfk8s {task.name}: Prometheus metrics on {address}", flush=True)


def _wait_for_peers(task: context.TaskContext) -> None:
    needed = peers.peers_needed(task)
    if not needed:
        return
    _import_tensorflow_in_background(with_keras=not contract.is_server(task.strategy, task.role))
    if peers.holds_own_port(task):
        with peers.hold_own_port(task.address(task.role, task.index)):
            peers.wait_for_peers(needed, task.peer_timeout_seconds)
    else:
        peers.wait_for_peers(needed, task.peer_timeout_seconds)
    progress.report("peers_ready", task=task.name, peers=len(needed))


def _wait_for_a_checkpoint(task: context.TaskContext) -> None:
    """The evaluator has nothing to do before the first checkpoint (or a FINAL.json): on a
    mounted model dir it waits for one without TensorFlow, leaving the CPU to the tasks that
    start the cluster, which often share its node. A URL (gs://) needs TensorFlow's file
    systems to look, so there it waits in TensorFlow's checkpoint iterator as before."""
    if "://" in task.model_dir:
        return
    state = os.path.join(layout.checkpoint_dir(task.model_dir), "checkpoint")
    final = layout.marker_path(task.model_dir)
    if os.path.exists(state) or os.path.exists(final):
        return
    print(
        f"tfk8s {task.name}: waiting for the first checkpoint in {os.path.dirname(state)} before starting TensorFlow",
        flush=True,
    )
    while not (os.path.exists(state) or os.path.exists(final)):
        time.sleep(1.0)


def _import_tensorflow_in_background(with_keras: bool) -> None:
    """Start TensorFlow's import now, after the environment it reads is set, and with_keras
    also tf.keras (tf_keras or Keras 3, loaded lazily on first use: another second). The main
    thread's own import then waits on the module lock for this one to finish; if this one
    fails, the module is left out of sys.modules, so that import fails again in the main thread,
    where the error is handled and reported."""

    def load():
        try:
            import tensorflow as tf

            if with_keras:
                tf.keras.__name__  # noqa: B018 - the attribute access is the import
        except BaseException:  # noqa: BLE001 - re-raised by the main thread's import
            pass

    threading.Thread(target=load, name="tfk8s-import-tensorflow", daemon=True).start()


def _run_role(task: context.TaskContext, options: args.Options) -> int:
    """The exit code of roles that return (evaluator, nothing left to train). Training roles
    exit the process themselves when done (worker/lifecycle/shutdown.py); ps and PS workers never end."""
    try:
        import tensorflow as tf
    except ImportError as exc:  # a shared library TensorFlow loads: the node's (libcuda) or the image's
        verdict = not isinstance(exc, ModuleNotFoundError) and node_faults.from_import_error(
            exc, "tensorflow does not import"
        )
        if not verdict:
            raise
        raise verdict from exc

    from worker import program as program_module
    from worker.model_dir import ownership, writer_lease
    from worker.roles import finished, training

    # Before any role runs (a PS worker computes too): fewer GPUs than given is the node's fault,
    # or the image's where its TensorFlow is built without CUDA.
    fault = node_faults.missing_gpus(
        node_faults.gpus_given(), len(tf.config.list_physical_devices("GPU")), tf.test.is_built_with_cuda()
    )
    if fault is not None:
        raise fault

    if task.role in contract.DATA_SERVICE_ROLES:  # no Keras, no model dir of its own to check
        from worker.roles import data_service

        progress.report("tensorflow_imported", task=task.name, strategy=task.strategy)
        _collect_from_here()
        data_service.run(task)  # never returns
    if contract.is_server(task.strategy, task.role):
        # Before tf.keras is touched: a server runs the chief's traced functions and never
        # Keras, and the lazy Keras import would delay the moment the chief can connect.
        from worker.roles import ps_server

        progress.report("tensorflow_imported", task=task.name, strategy=task.strategy)
        _collect_from_here()
        ps_server.run(task, _resolver(task))  # never returns
    if options.uses_legacy_keras(task.strategy):
        training.require_legacy_keras(f"--loop {options.loop} under {task.strategy}")
    progress.report("tensorflow_imported", task=task.name, strategy=task.strategy, keras=tf.keras.__name__)
    _collect_from_here()

    training.set_precision_policy(options, task.strategy)  # before any model is built (evaluator too)
    program = dataclasses.replace(program_module.load(task.program_module), learning_rate=options.learning_rate)
    # Whose model dir this is, before anything in it is read (FINAL.json included): another
    # cluster's, or another training's, is refused (worker/model_dir/ownership.py).
    owner_checked = ownership.check(task, options)
    if task.is_writer:  # before the restore: a replaced writer still running stops at its next save
        writer_lease.take(task)
    if task.role is Role.EVALUATOR:
        from worker.roles import evaluator

        return evaluator.run(task, options, program, owner_checked)

    # Before the strategy exists (MWMS must create it before any other op): a cluster that
    # already finished these --steps with this program has nothing to do, on every training
    # task alike (worker/roles/finished.py).
    done = finished.completed_marker(task, options)
    if done is not None:
        finished.check_same_program(task, options, program, done)  # deterministic: exit 2
        finished.claim_for_this_run(task, done)
        print(
            f"tfk8s: training already finished: {task.model_dir}/FINAL.json names "
            f"{done.checkpoint} (step {done.step}, --steps {done.requested_steps}); nothing "
            "to do. Delete FINAL.json or use another model dir to train again.",
            flush=True,
        )
        # what `status` shows for this run: the finished model, not "no progress reported"
        progress.report(
            contract.EVENT_FINAL,
            step=done.step,
            target=done.requested_steps,
            checkpoint=done.checkpoint_path(task.model_dir),
            already_finished=True,
        )
        return errors.EXIT_OK
    resolver = _resolver(task)
    if task.strategy is Strategy.PARAMETER_SERVER:
        from worker.roles import coordinator as role_module
    elif task.strategy is Strategy.MULTI_WORKER_MIRRORED:
        from worker.roles import mwms as role_module
    else:
        from worker.roles import mirrored as role_module
    role_module.run(task, options, program, resolver)
    raise AssertionError(f"{task.strategy} {task.name} returned instead of exiting")


def _collect_from_here() -> None:
    """Start-up ran without the cyclic GC (main): importing TensorFlow and tf.keras allocates
    millions of objects, none of them garbage, and the collections they set off were 13% of the
    import's CPU (4.4 -> 3.8 CPU-s measured, docs/benchmarks.md), paid by every task of every
    restart. What start-up made is frozen (never scanned again); training collects as usual."""
    gc.freeze()
    gc.enable()


def _resolver(task: context.TaskContext):
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if (resolver.task_type, resolver.task_id) != (task.role, task.index):
        raise errors.ConfigError(
            f"TFConfigClusterResolver reads task {resolver.task_type}-{resolver.task_id} from "
            f"TF_CONFIG, the worker read {task.name}: TF_CONFIG changed while starting?"
        )
    return resolver


if __name__ == "__main__":
    main()
