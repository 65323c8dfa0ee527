"""The tf.data service's servers (the spec's dataService): the dispatcher and the data workers.

Like ps they serve until killed: the launcher ends them once the success role has ended (as
Jobs, through the supervisor; in a JobSet, JobSet deletes their Jobs) and at once after a
failure. `join()` blocks in C++, so SIGTERM is answered from a thread and exits 143 at once:
they hold nothing a save could keep (the trainers' checkpoints hold the model).

- The dispatcher runs in fault-tolerant mode with its journal in <model dir>/data-service: a
  restarted dispatcher replays it and serves the same datasets and jobs, so trainers and data
  workers reconnect and go on (a stall, nothing repeated or lost). The journal outlives the run
  (a kept model dir); a job's name carries its pipeline graph's fingerprint (distribute), so a
  later run with a changed pipeline gets a job of its own, never the old pipeline's elements.
- A data worker registers at its own stable address (its TF_CONFIG entry: the pod's DNS name,
  or the local run's port), so its replacement takes over its tasks under the same name and the
  trainers' reads resume there (docs/data-service.md: what a lost data worker costs).
"""

from __future__ import annotations

import os

import tensorflow as tf
from tensorflow.python.data.experimental.ops import data_service_ops

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
    shuffled stream of this pipeline's shard) and the trainer reads from all of them.

    One named job per input pipeline and pipeline graph (job_name): a restarted trainer
    registers the same graph, joins its own job again and reads on; under parameter_server every
    worker's pipeline is number 0 with one graph, so they share one job and each batch goes to one
    of them. The graph's fingerprint is in the name because TF's dispatcher hands a client that
    names an existing job that job, whatever dataset the client registered, and its journal
    outlives the run (<model dir>/data-service): a fixed name would feed a resubmitted training
    with a changed pipeline the old pipeline's elements."""
    address = GRPC + dispatcher_address(os.environ.get(contract.DATA_SERVICE, ""))
    # The private _distribute is the public distribute() without its check that job_name is a
    # Python str: under parameter_server this runs in the coordinator's traced dataset
    # function, where the fingerprint is a tensor. (The public from_dataset_id takes a tensor,
    # but puts the dataset id in the job name, and each registration gets a new id.)
    return dataset.apply(
        data_service_ops._distribute(
            processing_mode=tf.data.experimental.service.ShardingPolicy.OFF,
            service=address,
            job_name=job_name(dataset, pipeline_id),
        )
    )


def job_name(dataset, pipeline_id: int):
    """`train-<input pipeline id>-<fingerprint of the dataset graph>` (a string tensor): TF's own
    graph hash (the one tf.data snapshots key on), which ignores function names and node names,
    so the same pipeline code gives the same name in every process and after a restart, and a
    changed constant, file name, map function or shuffle buffer a new one."""
    fingerprint = tf.raw_ops.DatasetFingerprint(input_dataset=tf.data.experimental.to_variant(dataset))
    return tf.strings.join([f"train-{pipeline_id}-", tf.strings.as_string(fingerprint)])


def dispatcher_address(value: str) -> str:
    """host:port of TFK8S_DATA_SERVICE's grpc://host:port."""
    if not value.startswith(GRPC) or ":" not in value[len(GRPC) :]:
        raise errors.ConfigError(
            f"{contract.DATA_SERVICE}={value!r}: not the dispatcher's grpc://host:port; the launcher sets "
            "it for a spec with dataService: add one, or drop --data-service from program.args"
        )
    return value[len(GRPC) :]
