"""Which failures are the node's, not the program's (errors.NodeFault, exit 9: retried in a new
pod, counted against backoffLimit; docs/lifecycle.md): the rules, without TensorFlow.

- a shared library that does not load (`libcuda.so.1: cannot open shared object file`), at the
  program's import or TensorFlow's: the same ImportError as a program's typo otherwise;
- fewer GPUs than the role was given (TFK8S_GPUS, its nvidia.com/gpu limit), as TF sees them;
- a checkpoint trained with loss scaling (mixed_float16, which --mixed-precision picks on a GPU)
  meeting a node where TF sees no GPU, so --mixed-precision picked mixed_bfloat16 and the model
  has no loss scale to restore: without this rule, a "changed program" (exit 2, not retried);
- this task's own port taken by another process (worker/lifecycle/peers.py).
"""

from __future__ import annotations

import os
import re

from worker import contract, errors

# How the dynamic loader says a shared library is missing or unreadable (glibc and musl); the
# library's name comes first: `libcuda.so.1: cannot open shared object file: No such file ...`.
_SHARED_LIBRARY_NOT_LOADED = re.compile(
    r"([^\s:'\"]+\.so[.0-9]*): cannot open shared object file|Error loading shared library ([^\s:]+)"
)
# What a LossScaleOptimizer saves: Keras 3's `dynamic_scale`, tf_keras's `loss_scale/...`.
_LOSS_SCALE_KEY = re.compile(r"(^|/)(dynamic_scale|loss_scale)(/|$)")
POLICY_WITHOUT_A_GPU = "mixed_bfloat16"  # --mixed-precision without a GPU (roles/training.py)


def missing_shared_library(exc: ImportError) -> str | None:
    """The shared library an ImportError could not load (`libcuda.so.1`), None if it says no such
    thing."""
    found = _SHARED_LIBRARY_NOT_LOADED.search(str(exc))
    return None if found is None else found.group(1) or found.group(2)


def from_import_error(exc: ImportError, importing: str) -> errors.NodeFault | None:
    """A NodeFault for an ImportError of a shared library while importing `importing` (a phrase:
    "program module 'train'"); None for any other ImportError."""
    library = missing_shared_library(exc)
    if library is None:
        return None
    fault = errors.NodeFault(
        f"{importing} does not import: {errors.cause_line(exc)} (shared library {library} missing "
        "or unreadable on this node)"
    )
    fault.__cause__ = exc  # its traceback goes to the log
    return fault


def gpus_given(environ=os.environ) -> int:
    """How many GPUs the launcher gave this task (TFK8S_GPUS; unset: none)."""
    text = environ.get(contract.GPUS, "0")
    if not text.isdigit():
        raise errors.ConfigError(
            f"{contract.GPUS}={text!r} must be a whole number of GPUs (the role's nvidia.com/gpu limit)"
        )
    return int(text)


def missing_gpus(given: int, visible: int) -> errors.NodeFault | None:
    """A NodeFault when TensorFlow sees fewer GPUs than the task was given."""
    if visible >= given:
        return None
    return errors.NodeFault(
        f"this task was given {given} GPU(s) ({contract.GPUS}, the role's nvidia.com/gpu limit) and TensorFlow "
        f"sees {visible}: the node's GPU, its driver or the CUDA libraries are broken"
    )


def lost_loss_scale(only_in_checkpoint: list[str], policy: str, visible_gpus: int) -> errors.NodeFault | None:
    """A NodeFault when the checkpoint has a loss scale the model lacks (keys without the
    variable suffix) because this node has no GPU: the run trained mixed_float16 on a GPU."""
    if policy != POLICY_WITHOUT_A_GPU or visible_gpus > 0:
        return None
    scale = next((key for key in only_in_checkpoint if _LOSS_SCALE_KEY.search(key)), None)
    if scale is None:
        return None
    return errors.NodeFault(
        f"the checkpoint was trained with loss scaling ({scale}: mixed_float16, which --mixed-precision "
        f"picks on a GPU) and TensorFlow sees no GPU on this node, so this task would train {policy}"
    )
