"""Two runs' trainers on one tf.data service journal (a kept model dir), in one process: run 1's
pipeline yields the constant 1, run 2's the constant 2, each read through the worker's own
data_service.distribute (its job name); run 2's dispatcher is then killed and restarted on the
same journal and port while run 2's reader goes on.

Prints JSON: what each run read, the datasets the run-2 dispatcher resumed, the job names.
"""

import json
import os
import sys
from pathlib import Path

import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from worker import contract  # noqa: E402
from worker.roles import data_service  # noqa: E402

service = tf.data.experimental.service
journal = sys.argv[1]


def dispatcher(port: int = 0):
    config = service.DispatcherConfig(port=port, work_dir=journal, fault_tolerant_mode=True)
    return service.DispatchServer(config)


def serve():
    """A dispatcher on the journal and one data worker, as a run's data roles."""
    server = dispatcher()
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=server.target.split("://")[1]))
    os.environ[contract.DATA_SERVICE] = server.target  # what the launcher gives every trainer
    return server, worker


def constant(value: int):
    return tf.data.Dataset.from_tensors(tf.constant(value, tf.int64)).repeat()


def take(iterator, count: int = 5) -> list[int]:
    return [int(next(iterator)) for _ in range(count)]


run1_dispatcher, run1_worker = serve()
run1 = take(iter(data_service.distribute(constant(1), 0)))
run1_job = data_service.job_name(constant(1), 0).numpy().decode()
run1_worker._stop()
run1_dispatcher._stop()

run2_dispatcher, run2_worker = serve()
datasets = os.path.join(journal, "datasets")
resumed = len(tf.io.gfile.listdir(datasets)) if tf.io.gfile.isdir(datasets) else 0
reader = iter(data_service.distribute(constant(2), 0))
run2 = take(reader)
port = int(run2_dispatcher.target.rsplit(":", 1)[1])
run2_dispatcher._stop()  # killed within run 2: the replacement replays the journal
run2_restarted = dispatcher(port)
run2_after_restart = take(reader)
print(
    json.dumps(
        {
            "run1": run1,
            "run2": run2,
            "run2_after_restart": run2_after_restart,
            "resumed_datasets": resumed,
            "run1_job": run1_job,
            "run2_job": data_service.job_name(constant(2), 0).numpy().decode(),
        }
    ),
    flush=True,
)
os._exit(0)  # the servers' threads would hold the process at exit
