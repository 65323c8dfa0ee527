"""What the worker writes under the model dir (TFK8S_MODEL_DIR), and the FINAL.json marker.

    <model dir>/
      checkpoints/        tf.train checkpoints the evaluator follows, plus TF's `checkpoint`
                          state file. custom loop: ckpt-<step> holding {model, optimizer};
                          fit loop: ckpt-<epoch>, tf_keras ModelCheckpoint weights (the model
                          and its optimizer)
      backup/             fit loop only: tf_keras BackupAndRestore (deleted when fit ends)
      saved_model/        the final model as a SavedModel that loads without any strategy:
                          tf.saved_model.load(path).signatures["serving_default"](images=...)
                          returns {"logits": ...}
      OWNER.json          written first, by the writer: whose dir this is (worker/model_dir/ownership.py)
      WRITER.json         the writer's lease, taken at each start (worker/model_dir/writer_lease.py)
      FINAL.json          written last, by the writer (chief; MWMS: worker 0), see below
      eval/metrics.jsonl  one JSON line per evaluated checkpoint (evaluator)
      eval/tensorboard/   evaluation summaries (loss, accuracy per step)
      data-service/       the tf.data service dispatcher's journal (dataService): a restarted
                          dispatcher resumes its datasets and jobs from it

The FINAL.json marker tells the evaluator which checkpoint is the last one, so it evaluates that
one for sure and then exits 0 (instead of polling forever, or being killed before it got there,
kubeflow/trainer#1658). Design:
- The writer saves the final checkpoint, then the SavedModel, then writes FINAL.json through a
  temporary file and a rename, so a reader sees either no marker or a complete one.
- The marker records the program arguments that define "finished": `requested_steps` (--steps)
  and `loop`. A marker left by an earlier run with other arguments is stale: the evaluator
  ignores it and the writer deletes it before training. The evaluator gets the same program
  arguments as the chief, so it can tell without any clock or ordering assumption.
- The marker records the submission (`run`, TFK8S_RUN): an evaluator takes only its own run's
  marker as final, so after `--replace` or a resubmission onto a kept model dir it never ends on
  the previous run's final (read before this run's writer removed or re-stamped it). A writer
  that finds its training already finished re-stamps the marker with its run, and the run's
  evaluator ends on it.
- A writer that starts and finds a matching marker has nothing left to do and exits 0: the
  resubmission of a finished cluster is a no-op, whatever the loop. Only after OWNER.json said
  the dir is this cluster's, for this training: another cluster's marker is never "finished";
  and only for the program that finished it (worker/roles/finished.py).
"""

from __future__ import annotations

import json
import posixpath
import uuid
from dataclasses import asdict, dataclass

CHECKPOINTS = "checkpoints"
BACKUP = "backup"
SAVED_MODEL = "saved_model"
FINAL_MARKER = "FINAL.json"
EVAL = "eval"
METRICS = "metrics.jsonl"
TENSORBOARD = "tensorboard"
DATA_SERVICE = "data-service"
CHECKPOINT_PREFIX = "ckpt"


def join(model_dir: str, *parts: str) -> str:
    # posixpath keeps gs:// URLs intact; os.path would too on Linux, but not by contract.
    return posixpath.join(model_dir, *parts)


def checkpoint_dir(model_dir: str) -> str:
    return join(model_dir, CHECKPOINTS)


def backup_dir(model_dir: str) -> str:
    return join(model_dir, BACKUP)


def saved_model_dir(model_dir: str) -> str:
    return join(model_dir, SAVED_MODEL)


def eval_dir(model_dir: str) -> str:
    return join(model_dir, EVAL)


def metrics_path(model_dir: str) -> str:
    return join(model_dir, EVAL, METRICS)


def data_service_dir(model_dir: str) -> str:
    return join(model_dir, DATA_SERVICE)


def marker_path(model_dir: str) -> str:
    return join(model_dir, FINAL_MARKER)


@dataclass(frozen=True)
class FinalMarker:
    checkpoint: str  # file name inside checkpoints/, e.g. ckpt-400 (relative: mounts may differ)
    step: int  # optimizer iterations in that checkpoint
    requested_steps: int  # --steps of the run that wrote it
    loop: str  # --loop of the run that wrote it
    saved_model: str  # directory name inside the model dir
    written_at: float
    code: str | None = None  # TFK8S_CODE_DIGEST of the run that wrote it (None: no shipped code)
    run: str | None = None  # TFK8S_RUN of the run that wrote (or re-stamped) it, if it had one

    def matches(self, requested_steps: int, loop: str) -> bool:
        return self.requested_steps == requested_steps and self.loop == loop

    def is_of_run(self, run: str | None) -> bool:
        """Whether this marker is the final of the run `run` (a reader without a run id takes
        any: the chart sets none)."""
        return run is None or self.run == run

    def checkpoint_path(self, model_dir: str) -> str:
        return join(checkpoint_dir(model_dir), self.checkpoint)


def write_atomically(path: str, text: str, tag: str | None = None) -> None:
    """Writes `text` to a temporary file beside `path`, then renames it over `path`, so a reader
    sees the old content or the new one, never a part (tf.io.gfile: local paths and gs://
    alike). `tag` makes the temporary name unique to this writer (default: a random one)."""
    import tensorflow as tf

    temporary = f"{path}.tmp-{tag or uuid.uuid4().hex}"
    with tf.io.gfile.GFile(temporary, "w") as out:
        out.write(text)
    tf.io.gfile.rename(temporary, path, overwrite=True)


def write_marker(model_dir: str, marker: FinalMarker) -> None:
    write_atomically(marker_path(model_dir), json.dumps(asdict(marker), indent=2, sort_keys=True) + "\n")


def read_marker(model_dir: str) -> FinalMarker | None:
    import tensorflow as tf

    path = marker_path(model_dir)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as src:
        data = json.load(src)
    return FinalMarker(**data)


def remove_marker(model_dir: str) -> None:
    import tensorflow as tf

    path = marker_path(model_dir)
    if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


def checkpoint_name(path: str) -> str:
    return posixpath.basename(path)
