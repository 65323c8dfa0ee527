"""Who owns a model dir: OWNER.json, written by the writer at its first start, checked by every
task that uses the dir before it reads anything else there.

Why: two clusters pointed at one model dir (one checkpoint.dir on a shared volume) would restore
each other's weights when running at once, and one after the other the second would find the
first's FINAL.json and report "already finished" with nothing trained. A rerun of one cluster
with other model-defining arguments would restore checkpoints that do not fit it.

The record names the cluster (namespace/name from TFK8S_NAMESPACE and TFK8S_CLUSTER, and the
platform that runs it from TFK8S_PLATFORM: two Kubernetes clusters, or two machines, may each run
a cluster of one name on one gs:// dir or shared volume; a platform left unnamed is compared like
any other) and the training: the program module,
the strategy and the program arguments that define the model and its checkpoints
(TRAINING_ARGS), plus a fingerprint of those. Not --steps: a rerun with more steps continues the
same training; nor how often to save, keep or all-reduce (except --checkpoint-every under the
fit loop, where it is the epoch length that checkpoints count in).

- Writer (chief; MWMS worker 0): no record -> claims the dir, then reads the record back and
  checks it like everyone else. On a filesystem (a volume, a local dir) the claim is a
  create-if-absent: a complete temporary file hard-linked to OWNER.json, which fails when the
  name exists (link(2) is atomic, NFS included), so of writers racing in any order exactly one
  claims and the others read its record. On gs:// tf.io.gfile has no conditional create: the
  claim is a rename (the last one wins) and the read-back refuses the writer whose record was
  replaced; two claims whose renames both land before either reads back are not caught there.
  A dir with content but no record, left by a tfk8s before owner records, is adopted with a
  printed line.
- Everyone (writer, other MWMS workers, evaluator): a record of another cluster, or of this
  cluster with another training, is refused with one line (ConfigError: exit 2, not retried).
  Other tasks never write the record: without one they go on, the writer decides.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid

from worker import errors
from worker.args import Options
from worker.context import TaskContext
from worker.model_dir import layout

OWNER = "OWNER.json"
FORMAT = 1
# Options fields that define the training: what checkpoints in the dir must agree with.
TRAINING_ARGS = ("loop", "global_batch_size", "data", "mixed_precision")
FIT_ONLY_ARGS = ("checkpoint_every",)  # the fit loop's epoch length: checkpoints count epochs
_FLAGS = {
    "loop": "--loop",
    "global_batch_size": "--global-batch-size",
    "data": "--data",
    "mixed_precision": "--mixed-precision",
    "checkpoint_every": "--checkpoint-every",
    "program": "program.module",
    "strategy": "strategy",
}


def owner_path(model_dir: str) -> str:
    return layout.join(model_dir, OWNER)


def training(task: TaskContext, options: Options) -> dict:
    """What defines this task's training (the same on every task of a cluster)."""
    names = TRAINING_ARGS + (FIT_ONLY_ARGS if options.loop == "fit" else ())
    return {
        "program": task.program_module,
        "strategy": str(task.strategy),
        **{name: getattr(options, name) for name in names},
    }


def fingerprint(defining: dict) -> str:
    return hashlib.sha256(json.dumps(defining, sort_keys=True).encode()).hexdigest()[:16]


def record_for(task: TaskContext, options: Options, now: float | None = None) -> dict:
    defining = training(task, options)
    return {
        "format": FORMAT,
        "namespace": task.namespace,
        "cluster": task.cluster_name,
        "platform": task.platform,
        "training": defining,
        "fingerprint": fingerprint(defining),
        "written_by": task.name,
        "written_at": time.time() if now is None else now,
        "claim": uuid.uuid4().hex,
    }


def _when(record: dict) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(record["written_at"])))
    except (KeyError, TypeError, ValueError):
        return "at an unknown time"


def conflict(model_dir: str, found: dict, mine: dict) -> str | None:
    """Why this task may not use a model dir whose OWNER.json is `found`, in one line; None if
    it is this cluster's record of this training."""
    owner = f"{found.get('namespace')}/{found.get('cluster')}"
    if (found.get("namespace"), found.get("cluster")) != (mine["namespace"], mine["cluster"]):
        return (
            f"model dir {model_dir} belongs to cluster {owner} ({OWNER} of {_when(found)}): "
            "two clusters in one dir restore each other's checkpoints. Set checkpoint.dir "
            "to another dir (unset, each cluster gets its own), or delete "
            f"{model_dir} if {owner}'s training is no longer needed"
        )
    if found.get("platform") != mine.get("platform"):
        # One unnamed (TFK8S_PLATFORM unset: `helm template` without the value platform, a
        # record of a tfk8s that could not name it) is another platform too: two unnamed twins
        # would train in one dir, superseding each other's checkpoints.
        there, here = (found.get("platform") or "unnamed", mine.get("platform") or "unnamed")
        return (
            f"model dir {model_dir} belongs to cluster {owner} on another platform ({there} "
            f"there, {here} here; {OWNER} of {_when(found)}): two clusters of one name in one "
            "dir restore each other's checkpoints. Set checkpoint.dir to another dir; to resume that "
            f"training here, delete {owner_path(model_dir)} (the checkpoints stay)"
        )
    if found.get("fingerprint") == mine["fingerprint"]:
        return None
    theirs, ours = found.get("training") or {}, mine["training"]
    changed = [
        f"{_FLAGS.get(k, k)} {theirs.get(k)!r} there, {ours.get(k)!r} now"
        for k in sorted(set(theirs) | set(ours))
        if theirs.get(k) != ours.get(k)
    ]
    return (
        f"model dir {model_dir} holds another training of {owner} ({OWNER} of "
        f"{_when(found)}: {'; '.join(changed) or 'another fingerprint'}); its checkpoints "
        "do not fit this one. Run with the earlier arguments, set checkpoint.dir to another "
        f"dir, or delete {model_dir} to start over"
    )


def read(model_dir: str) -> dict | None:
    import tensorflow as tf  # gfile: local paths and gs:// alike

    path = owner_path(model_dir)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as src:
        text = src.read()
    try:
        record = json.loads(text)
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise errors.ConfigError(
            f"{path} is not a valid owner record ({exc}); delete it if this model dir is this "
            "cluster's (its writer writes a new one), or set checkpoint.dir to another dir"
        ) from None
    return record


def claim(model_dir: str, record: dict) -> None:
    """Write `record` as the dir's OWNER.json unless one is there (see the module's docstring:
    create-if-absent on a filesystem, a rename on gs://). The caller reads back who won."""
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    if "://" in model_dir:
        import tensorflow as tf

        tf.io.gfile.makedirs(model_dir)
        layout.write_atomically(owner_path(model_dir), text, tag=record["claim"])
        return
    os.makedirs(model_dir, exist_ok=True)
    create_if_absent(owner_path(model_dir), text, tag=record["claim"])


def create_if_absent(path: str, text: str, tag: str) -> bool:
    """Whether this call created `path` with `text`: a complete temporary file, linked to the
    name, which fails if the name exists. Readers never see a partial file."""
    temporary = f"{path}.tmp-{tag}"
    with open(temporary, "w") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    try:
        os.link(temporary, path)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        # A filesystem without hard links (gcsfuse, SMB shares): the claim is a rename, as on
        # gs://, and the read-back is the only check. Said, since it is weaker.
        print(
            f"tfk8s: {path}: this filesystem has no hard links ({exc.strerror}); claiming by rename, "
            "which two writers claiming at the same moment may both pass",
            flush=True,
        )
        os.replace(temporary, path)
        return True
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _has_content(model_dir: str) -> bool:
    import tensorflow as tf

    return tf.io.gfile.isdir(model_dir) and bool(tf.io.gfile.listdir(model_dir))


def check(task: TaskContext, options: Options) -> bool:
    """Refuse (ConfigError) a model dir that is not this cluster's for this training; the writer
    claims an unowned one. Returns whether a record was there to check (or was written)."""
    model_dir = task.model_dir
    mine = record_for(task, options)
    found = read(model_dir)
    if found is not None:
        problem = conflict(model_dir, found, mine)
        if problem:
            raise errors.ConfigError(problem)
        return True
    if not task.is_writer:
        return False
    if _has_content(model_dir):
        print(
            f"tfk8s: model dir {model_dir} has no {OWNER} (written by a tfk8s before owner "
            f"records): adopting it for {task.namespace}/{task.cluster_name}; its checkpoints "
            "are resumed as this cluster's",
            flush=True,
        )
    claim(model_dir, mine)
    again = read(model_dir)
    if again is None:
        raise errors.ConfigError(
            f"model dir {model_dir}: {OWNER} vanished while this task claimed it; another writer "
            "uses this dir. Set checkpoint.dir to a dir of this cluster's own"
        )
    if again.get("claim") != mine["claim"]:
        # Another writer claimed the dir first (or, on gs://, renamed last): its record decides.
        problem = conflict(model_dir, again, mine)
        if problem:
            raise errors.ConfigError(problem)
    return True
