"""The tf.data service's servers (the spec's dataService): the dispatcher and the data workers.

Like ps they serve until killed: the launcher ends them once the success role has ended (as
Jobs, through the supervisor; in a JobSet, JobSet deletes their Jobs) and at once after a
failure. `join()` blocks in C++, so SIGTERM is answered from a thread and exits 143 at once:
they hold nothing a save could keep (the trainers' checkpoints hold the model).

- The dispatcher runs in fault-tolerant mode with its journal in <model dir>/data-service: a
  restarted dispatcher replays it and serves the same datasets and jobs, so trainers and data
  workers reconnect and go on (a stall, nothing repeated or lost).
- A data worker registers at its own stable address (its TF_CONFIG entry: the pod's DNS name,
  or the local run's port), so its replacement takes over its tasks under the same name and the
  trainers' reads resume there (docs/data-service.md: what a lost data worker costs).
"""

from __future__ import annotations

import os

import tensorflow as tf

from worker import contract, errors, progress
from worker.context import TaskContext
from worker.contract import Role
from worker.lifecycle import preemption
from worker.model_dir import layout

GRPC = "grpc://"


def run(task: TaskContext) -> int:
    preemption.exit_on_sigterm_from_a_thread()
    service = tf.data.experimental.service
    port = task.own_port
    address = task.address(task.role, task.index)
    if task.role is Role.DISPATCHER:
        journal = layout.data_service_dir(task.model_dir)
        tf.io.gfile.makedirs(journal)  # the dispatcher writes into it and does not create it
        # what a restart resumes: the datasets registered before (the journal has their jobs)
        datasets = layout.join(journal, "datasets")
        resumed = len(tf.io.gfile.listdir(datasets)) if tf.io.gfile.isdir(datasets) else 0
        server = service.DispatchServer(service.DispatcherConfig(port=port, work_dir=journal, fault_tolerant_mode=True))
        progress.report("serving", task=task.name, address=address, journal=journal, resumed_datasets=resumed)
    else:
        dispatcher = dispatcher_address(os.environ.get(contract.DATA_SERVICE, ""))
        server = service.WorkerServer(
            service.WorkerConfig(dispatcher_address=dispatcher, worker_address=address, port=port)
        )
        progress.report("serving", task=task.name, address=address, dispatcher=dispatcher)
    server.join()
    return 0  # not reached: join() blocks until the process is killed


def distribute(dataset, pipeline_id: int):
    """The trainer's side (--data-service): `dataset` read from the data workers instead of built
    here. Sharding OFF: each data worker runs the whole pipeline (the built-in one is an endless
    shuffled stream of this pipeline's shard) and the trainer reads from all of them. One named
    job per input pipeline: a restarted trainer joins its own pipeline's job again and reads on;
    under parameter_server every worker's pipeline is number 0, so they share one job and each
    batch goes to one of them."""
    return dataset.apply(
        tf.data.experimental.service.distribute(
            processing_mode=tf.data.experimental.service.ShardingPolicy.OFF,
            service=GRPC + dispatcher_address(os.environ.get(contract.DATA_SERVICE, "")),
            job_name=f"train-{pipeline_id}",
        )
    )


def dispatcher_address(value: str) -> str:
    """host:port of TFK8S_DATA_SERVICE's grpc://host:port."""
    if not value.startswith(GRPC) or ":" not in value[len(GRPC) :]:
        raise errors.ConfigError(
            f"{contract.DATA_SERVICE}={value!r}: not the dispatcher's grpc://host:port; the launcher sets "
            "it for a spec with dataService: add one, or drop --data-service from program.args"
        )
    return value[len(GRPC) :]
