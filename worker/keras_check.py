"""Keras 3 where it cannot train multi-worker, caught when a program of your own first uses it.

Keras 3 has no ParameterServerStrategy path (its Model.fit fails there, and its custom-loop
updates are not atomic across workers: `optimizer.iterations` ends short of the steps, exit 0)
and its Model.fit fails under MultiWorkerMirroredStrategy with more than one replica (keras#20585).
A task that does either exits 78 at once (never retried) with one line naming the fix
(docs/keras.md); a Keras 3 optimizer under MultiWorkerMirroredStrategy, which trains in a custom
loop, gets a one-line warning. MultiWorkerMirroredStrategy with one replica in the whole cluster
(one worker of one device) has no all-reduce to get wrong: Keras 3 trains there, fit included,
and is neither refused nor warned about.

`install()` runs at every start of a task's Python (the worker image's .pth file; --local:
worker/startup/sitecustomize.py), so it imports nothing but `os` and `sys`, never TensorFlow or
Keras: it only adds an import hook that patches three Keras 3 methods when the program itself
imports Keras 3. The same hook gives Model.fit (tf_keras's, TF_USE_LEGACY_KERAS=1, and Keras 3's)
a callback that prints the built-in worker's progress lines (below); nothing else of tf_keras is
touched. The built-in worker (TFK8S_PROGRAM set) picks its Keras itself; TFK8S_KERAS_CHECK=0
turns all of it off.
"""

import os
import sys

OPT_OUT = "TFK8S_KERAS_CHECK"  # "0": no check
# worker/contract.py's names, spelled here so that a task's start imports none of the worker
TF_CONFIG = "TF_CONFIG"
PROGRAM = "TFK8S_PROGRAM"
EXIT_REFUSED = 78  # contract.EXIT_KERAS_REFUSED: fails the cluster at once (launcher/plan/job_failure.py)

PARAMETER_SERVER, MULTI_WORKER = "ParameterServerStrategy", "MultiWorkerMirroredStrategy"
MULTI_WORKER_FIT = "Model.fit under MultiWorkerMirroredStrategy"  # the other refusal
# The strategies' classes in TensorFlow (MultiWorkerMirroredStrategy is a subclass of the second)
_STRATEGY_CLASSES = {"ParameterServerStrategyV2": PARAMETER_SERVER, "CollectiveAllReduceStrategy": MULTI_WORKER}
_TF_KERAS_FIX = (
    "use tf_keras: `pip install --no-deps tf-keras==<TF major.minor>.*`, set TF_USE_LEGACY_KERAS=1 "
    "before TensorFlow is imported and build with tf.keras (docs/keras.md; TFK8S_KERAS_CHECK=0 skips this check)"
)
REFUSALS = {
    PARAMETER_SERVER: (
        "Keras 3 cannot train under ParameterServerStrategy (Model.fit fails, a custom loop loses "
        "updates on the ps): " + _TF_KERAS_FIX
    ),
    MULTI_WORKER_FIT: "Keras 3's Model.fit cannot train under MultiWorkerMirroredStrategy (keras#20585): "
    "write a custom loop, or " + _TF_KERAS_FIX,
}
WARNING = (
    "Keras 3 under MultiWorkerMirroredStrategy: a custom loop trains, but Keras 3's callbacks and "
    "model.save() write one path from every worker; save with tf.train.CheckpointManager, worker 0 "
    "to the model dir and the others elsewhere (docs/keras.md)"
)

_TRAINER = "keras.src.backend.tensorflow.trainer"  # TensorFlowTrainer: Keras 3's Model.fit
_OPTIMIZER = "keras.src.optimizers.base_optimizer"  # BaseOptimizer: build() and apply()


def install() -> None:
    """Watch for Keras 3 in this process, if it is a task of a program of your own."""
    if os.environ.get(OPT_OUT) == "0" or TF_CONFIG not in os.environ or PROGRAM in os.environ:
        return
    if not any(isinstance(finder, _KerasImports) for finder in sys.meta_path):
        sys.meta_path.insert(0, _KerasImports())


class _KerasImports:
    """A meta path finder that finds nothing itself: for the two Keras 3 modules it watches, it
    takes the spec the other finders give and patches the module once it has run."""

    patches = {}  # module name -> patch(module), filled below

    def find_spec(self, name, path=None, target=None):
        patch = self.patches.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader_run = spec.loader.exec_module

        def exec_module(module):
            loader_run(module)
            try:
                patch(module)
            except AttributeError:  # a Keras whose classes moved: train unchecked, and say so
                warn(f"the Keras check does not know this Keras ({name} changed): not checked; see docs/keras.md")

        spec.loader.exec_module = exec_module
        return spec


def strategy_of(*candidates):
    """PARAMETER_SERVER or MULTI_WORKER for the first of the strategies given (None: the one in
    effect) that is one of them, by class name (TensorFlow is already imported by Keras then);
    None for a MultiWorkerMirroredStrategy of one replica in the whole cluster (one worker of one
    device), which has no all-reduce to get wrong: Keras 3 trains there, fit included."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return None
    for strategy in (*candidates, tf.distribute.get_strategy()):
        for cls in type(strategy).__mro__ if strategy is not None else ():
            if cls.__name__ in _STRATEGY_CLASSES:
                kind = _STRATEGY_CLASSES[cls.__name__]
                if kind == MULTI_WORKER and getattr(strategy, "num_replicas_in_sync", None) == 1:
                    return None
                return kind
    return None


def refuse(message: str) -> None:
    """The task's one line (the cause `status` shows), then exit: not an exception the program
    could catch and train on regardless."""
    from worker import contract, errors  # only now: a refusal's cost does not matter

    line = contract.ERROR_LINE.format(task=_task(), message=message)
    errors.write_termination_message(message)
    sys.stdout.flush()
    print(line, file=sys.stderr, flush=True)
    os._exit(EXIT_REFUSED)


_warned = set()


def warn(message: str) -> None:
    """One line in the task's log, once per process."""
    if message not in _warned:
        _warned.add(message)
        print(f"tfk8s {_task()}: warning: {message}", file=sys.stderr, flush=True)


def _task() -> str:
    import json

    task = json.loads(os.environ.get(TF_CONFIG) or "{}").get("task", {})
    return f"{task.get('type', 'task')}-{task.get('index', 0)}"


def _patch_trainer(module) -> None:
    trainer = module.TensorFlowTrainer
    fit = trainer.fit

    def checked_fit(self, *args, **kwargs):
        strategy = strategy_of(self.distribute_strategy)
        if strategy is not None:
            refuse(REFUSALS[PARAMETER_SERVER if strategy == PARAMETER_SERVER else MULTI_WORKER_FIT])
        return fit(self, *args, **kwargs)

    trainer.fit = checked_fit


def _patch_optimizer(module) -> None:
    optimizer = module.BaseOptimizer
    for name in ("build", "apply"):
        setattr(optimizer, name, _checked_update(getattr(optimizer, name)))


def _checked_update(method):
    """An optimizer's build() or apply(): refused under PS, a warning under MWMS."""

    def checked(self, *args, **kwargs):
        strategy = strategy_of(getattr(self, "_distribution_strategy", None))
        if strategy == PARAMETER_SERVER:
            refuse(REFUSALS[PARAMETER_SERVER])
        elif strategy == MULTI_WORKER:
            warn(WARNING)
        return method(self, *args, **kwargs)

    return checked


# --- progress of Model.fit ------------------------------------------------------------------
# A program of your own that trains with tf_keras's Model.fit (or Keras 3's, where it trains)
# gets the built-in worker's `step` progress lines without a change: fit is given one more
# callback, on the task whose log `status` reads (the chief; worker 0 where there is none). It
# reads the loss only when a line is due (no per-step synchronisation), never changes the
# callbacks you pass (a list is copied), and, if anything of it fails, says so once and stops
# reporting: it never stops training. TFK8S_KERAS_PROGRESS=0 turns it off.
PROGRESS_OPT_OUT = "TFK8S_KERAS_PROGRESS"
PROGRESS_PREFIX = "tfk8s-progress "  # contract.PROGRESS_PREFIX
PROGRESS_SECONDS, DEFAULT_PROGRESS_SECONDS = "TFK8S_PROGRESS_SECONDS", 5.0  # contract's
_TF_KERAS_TRAINING = "tf_keras.src.engine.training"  # tf_keras's Model (fit)
_FIT_CALLBACKS_POSITION = 5  # fit(x, y, batch_size, epochs, verbose, callbacks, ...)


def reports_fit_progress() -> bool:
    """This task's log is the one `status` reads: the chief's, or worker 0's without a chief."""
    import json

    if os.environ.get(PROGRESS_OPT_OUT) == "0":
        return False
    config = json.loads(os.environ.get(TF_CONFIG) or "{}")
    task, cluster = config.get("task") or {}, config.get("cluster") or {}
    if task.get("type") == "chief":
        return True
    return task.get("type") == "worker" and int(task.get("index", 0)) == 0 and "chief" not in cluster


def _with_progress(fit, callback_base):
    """`fit` that adds a progress callback (subclassing `callback_base()`) to the ones given."""

    def fit_with_progress(self, *args, **kwargs):
        given = kwargs.get("callbacks")
        if (
            len(args) <= _FIT_CALLBACKS_POSITION
            and isinstance(given, (list, tuple, type(None)))
            and reports_fit_progress()
        ):
            try:
                kwargs["callbacks"] = [*(given or ()), _progress_callback(callback_base())]
            except Exception as exc:  # noqa: BLE001 - never in training's way
                warn(f"no progress lines from Model.fit: {type(exc).__name__}: {exc}")
        return fit(self, *args, **kwargs)

    fit_with_progress.__wrapped__ = fit
    return fit_with_progress


def _progress_callback(base):
    import json
    import time

    try:
        every = float(os.environ.get(PROGRESS_SECONDS) or DEFAULT_PROGRESS_SECONDS)
    except ValueError:
        every = DEFAULT_PROGRESS_SECONDS

    class FitProgress(base):
        """`step` events: the first batch's, every `every` seconds, and the last one."""

        def __init__(self):
            super().__init__()
            self._supports_tf_logs = True  # the loss stays a tensor until a line is due
            self.steps, self.target, self.step, self.epoch = None, None, 0, 0
            self.since, self.since_step, self.loss, self.broken = None, 0, None, False

        def _safely(self, report):
            if self.broken:
                return
            try:
                report()
            except Exception as exc:  # noqa: BLE001 - never in training's way
                self.broken = True
                warn(f"progress lines from Model.fit stopped: {type(exc).__name__}: {exc}")

        def on_train_begin(self, logs=None):
            def begin():
                params = self.params or {}
                self.steps, epochs = params.get("steps"), params.get("epochs")
                self.target = self.steps * epochs if self.steps and epochs else None

            self._safely(begin)

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            def batch_end():
                self.step = self.epoch * self.steps + batch + 1 if self.steps else self.step + 1
                self.loss = (logs or {}).get("loss", self.loss)
                now = time.monotonic()
                if self.since is None or now - self.since >= every:
                    self._report(now)

            self._safely(batch_end)

        def on_epoch_end(self, epoch, logs=None):
            def epoch_end():
                if self.steps:  # batch callbacks may not run (parameter-server fit): the epoch's end
                    self.step = (epoch + 1) * self.steps
                self.loss = (logs or {}).get("loss", self.loss)

            self._safely(epoch_end)

        def on_train_end(self, logs=None):
            self._safely(lambda: self._report(time.monotonic()))

        def _report(self, now):
            fields = {"step": self.step}
            if self.target:
                fields["target"] = self.target
            loss = _number(self.loss)
            if loss is not None:
                fields["loss"] = round(loss, 5)
            if self.since is not None and now > self.since and self.step > self.since_step:
                fields["steps_per_s"] = round((self.step - self.since_step) / (now - self.since), 3)
            record = {"event": "step", "wall": round(time.time(), 3), **fields}
            print(PROGRESS_PREFIX + json.dumps(record, sort_keys=True), flush=True)
            self.since, self.since_step = now, self.step

    return FitProgress()


def _number(value):
    """A loss as a float: a number, a NumPy value or an eager tensor; None for what would block
    or is not one (a RemoteValue of parameter-server training)."""
    if value is None:
        return None
    if hasattr(value, "numpy"):
        value = value.numpy()
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _patch_tf_keras_fit(module) -> None:
    def base():
        from tf_keras.src.callbacks import Callback

        return Callback

    module.Model.fit = _with_progress(module.Model.fit, base)


def _patch_trainer_fit_progress(module) -> None:
    """Keras 3's fit, where it trains (no multi-worker strategy of more than one replica: the
    check refuses those)."""

    def base():
        from keras.src.callbacks import Callback

        return Callback

    module.TensorFlowTrainer.fit = _with_progress(module.TensorFlowTrainer.fit, base)


def _patch_keras3_trainer(module) -> None:
    _patch_trainer(module)
    _patch_trainer_fit_progress(module)


_KerasImports.patches = {
    _TRAINER: _patch_keras3_trainer,
    _OPTIMIZER: _patch_optimizer,
    _TF_KERAS_TRAINING: _patch_tf_keras_fit,
}
