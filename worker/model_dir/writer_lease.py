"""One writer per model dir at a time: WRITER.json, a lease the writer takes when it starts and
checks before every checkpoint it saves and before the final export.

Why: Kubernetes replaces a task whose node stopped reporting once someone says the node is
gone: the Node deleted, the `node.kubernetes.io/out-of-service` taint, a force delete (by a
person, or Kueue's failure recovery). If the node was only cut off from the API server (a
partition), the old chief still runs there and may still reach the volume: two writers in one
model dir, each saving over the other's steps. The replacement takes the lease before it
restores; the old writer finds the lease is no longer its own at its next save and exits
without saving (EXIT_SUPERSEDED), so the two overlap by at most one checkpoint interval, and
every checkpoint either of them wrote is a state of this cluster's own training.

The lease is a plain file (temp file + rename, tf.io.gfile: local, NFS and gs:// alike), not a
lock: nothing has to release it, a writer that dies leaves it to its successor.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid

from worker import errors
from worker.context import TaskContext
from worker.model_dir import layout

WRITER = "WRITER.json"
_held: "Lease | None" = None  # this process's lease, once the writer took it


class Superseded(errors.WorkerError):
    exit_code = errors.EXIT_SUPERSEDED


def lease_path(model_dir: str) -> str:
    return layout.join(model_dir, WRITER)


class Lease:
    """This writer's claim on the model dir."""

    def __init__(self, model_dir: str, record: dict):
        self.model_dir = model_dir
        self.record = record

    @classmethod
    def take(cls, task: TaskContext, now: float | None = None) -> "Lease":
        """Claims the dir for this process (replacing any earlier writer's claim)."""
        import tensorflow as tf

        record = {
            "task": task.name,
            "pod": os.environ.get("HOSTNAME") or socket.gethostname(),
            "pid": os.getpid(),
            "taken_at": time.time() if now is None else now,
            "token": uuid.uuid4().hex,
        }
        tf.io.gfile.makedirs(task.model_dir)
        layout.write_atomically(
            lease_path(task.model_dir), json.dumps(record, sort_keys=True) + "\n", tag=record["token"]
        )
        return cls(task.model_dir, record)

    def holder(self) -> dict | None:
        """The lease as the dir holds it now (None: gone or unreadable)."""
        import tensorflow as tf

        try:
            with tf.io.gfile.GFile(lease_path(self.model_dir)) as src:
                found = json.loads(src.read())
        except (tf.errors.NotFoundError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def check(self, before: str) -> None:
        """Raises Superseded when another writer has taken the dir since this one did."""
        found = self.holder()
        if found is not None and found.get("token") == self.record["token"]:
            return
        if found is None:
            who = "nobody (WRITER.json is gone or unreadable)"
        else:
            when = time.strftime("%H:%M:%S UTC", time.gmtime(float(found.get("taken_at", 0))))
            who = f"{found.get('task')} in pod {found.get('pod')} since {when}"
        raise Superseded(
            f"not saving {before}: model dir {self.model_dir} is now written by {who}, not by "
            f"this {self.record['task']} (pod {self.record['pod']}): Kubernetes replaced this "
            "task (its node was declared lost) while it still ran. This copy stops; the "
            "replacement goes on from the last checkpoint"
        )


def take(task: TaskContext) -> None:
    """The writer claims the model dir, after OWNER.json said it is this cluster's and before it
    restores anything."""
    global _held
    _held = Lease.take(task)


def check(before: str) -> None:
    """Before a save: raises Superseded if this writer lost the lease (a no-op for tasks that do
    not write the dir)."""
    if _held is not None:
        _held.check(before)
