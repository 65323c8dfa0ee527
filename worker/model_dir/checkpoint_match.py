"""Does a checkpoint fit the model about to restore it? Checked before every restore.

TensorFlow's restores are lenient where a user's edit needs them strict: `restore_or_initialize`
leaves a variable the checkpoint lacks at its initializer next to restored ones (a silently
different model), ignores checkpoint variables the model no longer has, and a changed shape
fails only deep inside the restore, as a traceback that every retry repeats (Keras 3's message
even ends in a tensor printout). So the worker compares the two itself, by the keys TensorFlow
saves under (`model/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE`), and a difference
is a deterministic failure (CheckpointMismatch, exit 2: no restart can cure it) that names the
variables and shapes and the two ways out.
"""

from __future__ import annotations

from collections import deque

import tensorflow as tf

from worker import errors, node_faults

VARIABLE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
# tf.train.Checkpoint's own counter: created at its first save, so a fresh root lacks it.
_CHECKPOINT_OWN = ("save_counter" + VARIABLE_SUFFIX,)
_SHOWN = 4  # differences named in the one-line message, per kind


def _escape(name: str) -> str:
    """How TensorFlow's object graph escapes a child's name in a checkpoint key."""
    return name.replace(".", "..").replace("/", ".S")


class ModelVariable:
    """A variable of the model about to restore: its shape, how users know it (its own path
    under Keras 3, its name under tf_keras), and whether the model holds it (Keras 3's optimizer
    tracks the model's variables too, on a shorter path, so TensorFlow keys them there)."""

    def __init__(self, variable, path: str):
        self.shape = tuple(variable.shape)
        own = getattr(variable, "path", None) or getattr(variable, "name", None) or path
        self.name = own.removesuffix(":0")
        self.in_model = path.startswith("model/")


def variables_of(root) -> dict[str, ModelVariable]:
    """{checkpoint key: variable} of every variable reachable from `root` (a
    tf.train.Checkpoint), keyed as TensorFlow keys them: by the first path a breadth-first walk
    finds."""
    view = tf.train.TrackableView(root)
    found: dict[str, ModelVariable] = {}
    key_of: dict[int, str] = {}
    seen = {id(root)}
    queue = deque([(root, "")])
    while queue:
        obj, path = queue.popleft()
        for name, child in view.children(obj).items():
            child_path = f"{path}/{_escape(name)}" if path else _escape(name)
            if id(child) in seen:
                # Keras 3's optimizer tracks the model's variables too, on a shorter path.
                if id(child) in key_of and child_path.startswith("model/"):
                    found[key_of[id(child)]].in_model = True
                continue
            seen.add(id(child))
            if hasattr(child, "shape") and hasattr(child, "dtype"):
                key_of[id(child)] = child_path + VARIABLE_SUFFIX
                found[child_path + VARIABLE_SUFFIX] = ModelVariable(child, child_path)
            queue.append((child, child_path))
    return found


def saved_variables(checkpoint_path: str) -> dict[str, tuple]:
    return {
        key: tuple(shape)
        for key, shape in tf.train.list_variables(checkpoint_path)
        if key.endswith(VARIABLE_SUFFIX) and key not in _CHECKPOINT_OWN
    }


def _short(key: str) -> str:
    return key[: -len(VARIABLE_SUFFIX)]


def differences(
    model_vars: dict[str, ModelVariable],
    saved_vars: dict[str, tuple],
    only_under: tuple[str, ...] = (),
    ignore_under: tuple[str, ...] = (),
) -> list[str]:
    """What differs, as short phrases, the model's own variables first; empty when the
    checkpoint fits. `only_under` limits the comparison to keys with those prefixes,
    `ignore_under` leaves prefixes out (state created lazily, such as a fit loop's optimizer
    before its first step)."""

    def kept(key: str) -> bool:
        return _compared(key, only_under, ignore_under)

    def in_order(keys) -> list[str]:  # the model's variables first
        return sorted(keys, key=lambda k: (not ours[k].in_model, ours[k].name))

    ours = {k: v for k, v in model_vars.items() if kept(k)}
    theirs = {k: v for k, v in saved_vars.items() if kept(k)}
    changed = _model_first(
        [
            (ours[k], f"{ours[k].name} is {_shape(ours[k].shape)} in the model, {_shape(theirs[k])} in the checkpoint")
            for k in in_order(ours)
            if k in theirs and ours[k].shape != theirs[k]
        ]
    )
    added = _model_first(
        [(ours[k], f"{ours[k].name} {_shape(ours[k].shape)}") for k in in_order(ours) if k not in theirs]
    )
    removed = [
        f"{_short(k)} {_shape(theirs[k])}"
        for k in sorted(theirs, key=lambda k: (not k.startswith("model/"), k))
        if k not in ours
    ]
    out = _listed(changed)
    if added:
        out.append("not in the checkpoint: " + "; ".join(_listed(added)))
    if removed:
        out.append("only in the checkpoint: " + "; ".join(_listed(removed)))
    return out


def _compared(key: str, only_under: tuple[str, ...], ignore_under: tuple[str, ...]) -> bool:
    return (not only_under or key.startswith(only_under)) and not (ignore_under and key.startswith(ignore_under))


def _model_first(found: list[tuple[ModelVariable, str]]) -> list[str]:
    """The model's own variables' phrases; the optimizer's slots, which follow from them, only
    counted (the line `status` keeps must show the model and the way out)."""
    model = [phrase for variable, phrase in found if variable.in_model]
    rest = len(found) - len(model)
    if not model:
        return [phrase for _, phrase in found]
    return model + ([f"{rest} optimizer variables too"] if rest else [])


def _listed(items: list[str]) -> list[str]:
    return items[:_SHOWN] + ([f"{len(items) - _SHOWN} more"] if len(items) > _SHOWN else [])


def _shape(shape: tuple) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def check(
    root,
    checkpoint_path: str | None,
    model_dir: str,
    only_under: tuple[str, ...] = (),
    ignore_under: tuple[str, ...] = (),
) -> None:
    """Raise CheckpointMismatch if the checkpoint at `checkpoint_path` (None: nothing to restore)
    does not fit the variables of `root`, or NodeFault if the difference is a loss scale that
    this node, without a GPU, cannot have (worker/node_faults.py)."""
    if checkpoint_path is None:
        return
    ours, saved = variables_of(root), saved_variables(checkpoint_path)
    found = differences(ours, saved, only_under, ignore_under)
    if found:
        # A run trained on a GPU (mixed_float16) meeting a node without one is the node's fault.
        fault = node_faults.lost_loss_scale(
            [_short(key) for key in saved if key not in ours and _compared(key, only_under, ignore_under)],
            tf.keras.mixed_precision.global_policy().name,
            len(tf.config.list_physical_devices("GPU")),
        )
        if fault is not None:
            raise fault
        # The differences first: `status` keeps the first MAX_CAUSE_CHARS of the line.
        raise errors.CheckpointMismatch(
            "the model does not fit its checkpoint: "
            + "; ".join(found)
            + ". The program changed since it was saved: train the changed model in a fresh "
            "model dir (checkpoint.dir), or resubmit the code that wrote "
            f"{checkpoint_path} (model dir {model_dir})"
        )
