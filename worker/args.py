"""Program arguments of `python -m worker` (the spec's `program.args`), parsed without TensorFlow.

Every task of a cluster gets the same arguments, so each role derives the same decisions from
them: the evaluator knows the loop (and so the checkpoint format and the Keras flavour) and the
number of steps the final checkpoint stands for.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from worker import errors
from worker.contract import Strategy

LOOPS = ("custom", "fit")
DATA_SERVICE_FLAG = "--data-service"  # needs the spec's dataService (launcher/cluster_spec/spec.py)
COLLECTIVES = ("auto", "ring", "nccl")
DATA_HELP = (
    "training data, passed to the program's build_dataset(data=...). The built-in program "
    "accepts: digits (scikit-learn's bundled 8x8 digits resized to 28x28, works offline; the "
    "default), synthetic (generated, learnable), fashion_mnist (downloads with "
    "keras.datasets.fashion_mnist.load_data; needs internet), or a path to a .npz file with "
    "x_train, y_train, x_test, y_test (28x28 uint8 images, integer labels; the Keras mnist.npz "
    "layout)"
)

EPILOG = """\
environment (set by the launcher; see worker/contract.py):
  TF_CONFIG            cluster and this task's role/index
  TFK8S_STRATEGY       parameter_server | multi_worker_mirrored | mirrored
  TFK8S_MODEL_DIR      checkpoints, final SavedModel, FINAL.json marker, eval/ (local path or gs://)
  TFK8S_PROGRAM        the training program module (default worker.examples.fashion_mnist;
                       its interface is documented in worker/program.py)
  TFK8S_PEER_TIMEOUT   seconds to wait for every peer's DNS name and port (default 300)
  TFK8S_NODE_NAME      the node a node fault names (the pod's spec.nodeName; default the hostname)
  TFK8S_GPUS           GPUs the task is given; a task that sees fewer fails as a node fault (exit 9)
  TFK8S_DATA_SERVICE   the tf.data service's dispatcher, grpc://host:port (with dataService)
  TFK8S_NAMESPACE, TFK8S_CLUSTER
                       whose model dir it is: the writer records them in OWNER.json there, and
                       every task refuses a dir another cluster owns (exit 2)

exit codes:
  0 success; 1 unexpected error (traceback in the log); 2 bad arguments, environment, program,
  data or a missing package: not retried, the reason is one line (and the termination message);
  3 a peer was unreachable for TFK8S_PEER_TIMEOUT seconds; 4 a parameter server was lost during
  training (restart the chief to resume from the last checkpoint); 5 MWMS workers restored
  different steps; 6 a peer (a ps, or an MWMS worker) was lost after this attempt had saved a
  step beyond the one it restored: not counted against backoffLimit (without a save: 4, or 1 under MWMS);
  8 another writer took this model dir's lease (this task was replaced while it still ran);
  9 a node fault (a GPU it was given and does not see, a shared library that does not load, its
  own port taken): retried in a new pod, counted against backoffLimit; the line names the node;
  143 preempted (SIGTERM) after saving the current step
"""


@dataclass(frozen=True)
class Options:
    loop: str
    steps: int
    global_batch_size: int
    checkpoint_every: int
    data: str
    max_checkpoints: int
    mixed_precision: bool = False
    collective: str = "auto"
    data_service: bool = False
    learning_rate: float | None = None  # None: the program's optimizer's own

    def uses_legacy_keras(self, strategy: str) -> bool:
        """tf_keras (TF_USE_LEGACY_KERAS=1) for Model.fit and for everything under PS.

        Keras 3 cannot run Model.fit under parameter_server or MWMS (see the notes). Under
        parameter_server its custom loop runs but loses updates: Keras 3 variables implement
        assign_add/assign_sub as assign(read + delta) (keras/src/backend/common/variables.py),
        so two workers updating the same ps variable overwrite each other; measured here, the
        step counter advanced 44 for 50 steps with 2 workers. tf_keras uses TF's atomic
        AssignAdd/AssignSub ops. Every role decides alike (the evaluator must restore what the
        chief saved), from the loop and the strategy, which all tasks share.
        """
        return self.loop == "fit" or strategy == Strategy.PARAMETER_SERVER

    def fit_epochs(self) -> int:
        """Model.fit trains whole epochs of `checkpoint_every` steps: --steps rounded up."""
        return -(-self.steps // self.checkpoint_every)


class UsageError(ValueError):
    """Program arguments `python -m worker` would refuse (check() raises it instead of exiting)."""


class _Parser(argparse.ArgumentParser):
    raises = False  # check(): raise UsageError instead of printing usage and exiting 2

    def error(self, message: str):
        """argparse's usage error (exit 2), its one line also left for `status`."""
        if self.raises:
            raise UsageError(message)
        errors.write_termination_message(f"program args: {message} (see python -m worker --help)")
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m worker",
        description=(
            "The tfk8s built-in worker: one image and command for every role (chief, worker, "
            "ps, evaluator) of a TensorFlow cluster. The role comes from TF_CONFIG; what to "
            "train comes from the program module (TFK8S_PROGRAM) and these arguments."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--loop",
        choices=LOOPS,
        default="custom",
        help="custom: a tf.function training loop (ClusterCoordinator under parameter_server) "
        "with tf.train.CheckpointManager; fit: Keras Model.fit via tf_keras with BackupAndRestore "
        "and ModelCheckpoint (default: custom)",
    )
    parser.add_argument(
        "--steps",
        type=_positive,
        default=400,
        help="optimizer steps to train in total, counted across restarts (default: 400); "
        "fit rounds up to whole epochs of --checkpoint-every steps",
    )
    parser.add_argument(
        "--global-batch-size",
        type=_positive,
        default=64,
        help="examples per optimizer step across all replicas; the loss is averaged over this "
        "number (tf.nn.compute_average_loss). Under parameter_server each step runs on one "
        "worker, so this is that worker's batch (default: 64)",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=_positive,
        default=50,
        help="steps between checkpoints; the fit loop's steps per epoch (default: 50)",
    )
    parser.add_argument("--data", default="digits", help=DATA_HELP)
    parser.add_argument(
        "--learning-rate",
        type=_positive_float,
        default=None,
        help="the optimizer's learning rate, set on what the program's build_optimizer() returns "
        "(a schedule it had is replaced by this constant); what a sweep tunes (default: the "
        "program's own)",
    )
    parser.add_argument(
        "--max-checkpoints",
        type=_positive,
        default=10,
        help="checkpoints kept in <model dir>/checkpoints; older ones are deleted, so an "
        "evaluator slower than training skips some (default: 10)",
    )
    parser.add_argument(
        "--mixed-precision",
        action="store_true",
        help="compute in 16 bits, keep variables in float32: mixed_float16 on GPUs (with "
        "dynamic loss scaling), mixed_bfloat16 on CPUs (no loss scaling needed)",
    )
    parser.add_argument(
        "--collective",
        choices=COLLECTIVES,
        default="auto",
        help="multi_worker_mirrored all-reduce: auto (NCCL when this task sees a GPU, ring "
        "otherwise), ring or nccl (default: auto)",
    )
    parser.add_argument(
        DATA_SERVICE_FLAG,
        action="store_true",
        help="run the training input pipeline on the cluster's tf.data service (the spec's "
        "dataService; its dispatcher is TFK8S_DATA_SERVICE): sharding OFF, one job per input "
        "pipeline, so every trainer, also a restarted one, reads its own shard's endless stream "
        "(docs/data-service.md)",
    )
    return parser


def check(argv: list[str]) -> Options:
    """parse() for the launcher: a usage error raises UsageError, nothing is printed."""
    parser = build_parser()
    parser.raises = True
    return _options(parser.parse_args(argv))


def parse(argv: list[str] | None = None) -> Options:
    return _options(build_parser().parse_args(argv))


def _options(namespace: argparse.Namespace) -> Options:
    return Options(
        loop=namespace.loop,
        steps=namespace.steps,
        global_batch_size=namespace.global_batch_size,
        checkpoint_every=namespace.checkpoint_every,
        data=namespace.data,
        max_checkpoints=namespace.max_checkpoints,
        mixed_precision=namespace.mixed_precision,
        collective=namespace.collective,
        data_service=namespace.data_service,
        learning_rate=namespace.learning_rate,
    )


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def check_divisible(options: Options, replicas_in_sync: int) -> None:
    """Synchronous strategies split each global batch evenly over their replicas."""
    if options.global_batch_size % replicas_in_sync:
        raise errors.ConfigError(
            f"--global-batch-size {options.global_batch_size} does not divide evenly over "
            f"{replicas_in_sync} replicas; use a multiple of {replicas_in_sync}"
        )
