"""Which failures are the node's, not the program's or the image's (errors.NodeFault, exit 9:
retried in a new pod, counted against backoffLimit; docs/lifecycle.md): the rules, without
TensorFlow. Only what the node itself puts into the task is its fault; what the image lacks
fails alike on every node, so it is a configuration error (exit 2, not retried).

- a shared library that does not load, at the program's import or TensorFlow's (or later, at
  an import inside the program's code): the node's fault only for a library the node provides
  (NODE_PROVIDED_LIBRARIES: the NVIDIA container toolkit mounts the host driver's libcuda.so.1,
  libnvidia-ml.so.1, ... into a GPU container); any other (`libGL.so.1` for `import cv2`, the
  CUDA runtime's libcudart/libcublas/libcudnn, which come with the image) is the image's;
- fewer GPUs than the role was given (TFK8S_GPUS, its nvidia.com/gpu limit), as TF sees them,
  when TensorFlow is built with CUDA; a TensorFlow built without it (tensorflow-cpu) sees no GPU
  on any node: the image's;
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


# Libraries the node provides into a GPU container, by name prefix: the host driver's user-space
# libraries, which the NVIDIA container toolkit (libnvidia-container's utility, compute, video and
# graphics lists) mounts in, so that an image need not match the node's driver. One of these that
# does not load is the node's (its driver, or the toolkit's setup), and another node may have it.
NODE_PROVIDED_LIBRARIES = (
    "libcuda.so",  # the CUDA driver API (not libcudart, the runtime, which the image brings)
    "libcudadebugger.so",
    "libnvidia-",  # libnvidia-ml, -ptxjitcompiler, -nvvm, -gpucomp, -allocator, -opencl, ...
    "libnvcuvid.so",
    "libvdpau_nvidia.so",
    "libnvoptix.so",
    "libEGL_nvidia.so",
    "libGLX_nvidia.so",
    "libGLESv2_nvidia.so",
    "libGLESv1_CM_nvidia.so",
)
# CUDA's runtime libraries: the image's, from TensorFlow's pip wheels (tensorflow[and-cuda] pulls
# nvidia-cuda-runtime-cu12, nvidia-cudnn-cu12, ...) or a CUDA base image, never the node's.
CUDA_RUNTIME_LIBRARIES = (
    "libcudart.so",
    "libcublas",  # libcublas.so, libcublasLt.so
    "libcudnn",
    "libcufft.so",
    "libcurand.so",
    "libcusolver.so",
    "libcusparse.so",
    "libcupti.so",
    "libnccl.so",
    "libnvrtc.so",
    "libnvJitLink.so",
)

# The fix for a few libraries the image lacks that programs often meet.
IMAGE_LIBRARY_FIXES = {
    "libGL.so.1": "install libgl1 in the image (apt-get install libgl1), or opencv-python-headless instead of "
    "opencv-python, which needs no libGL",
}


def missing_shared_library(exc: ImportError) -> str | None:
    """The shared library an ImportError could not load (`libcuda.so.1`), None if it says no such
    thing."""
    found = _SHARED_LIBRARY_NOT_LOADED.search(str(exc))
    return None if found is None else found.group(1) or found.group(2)


def is_node_provided(library: str) -> bool:
    """Whether the node, not the image, provides this library (`libcuda.so.1`, or a path to it)."""
    return os.path.basename(library).startswith(NODE_PROVIDED_LIBRARIES)


def image_remedy(library: str) -> str:
    """How to get a library the image lacks into it."""
    name = os.path.basename(library)
    if name.startswith(CUDA_RUNTIME_LIBRARIES):
        return (
            f"{name} is a CUDA runtime library, which comes with the image, not the node: install "
            "TensorFlow with its CUDA wheels (tensorflow[and-cuda]) or build on a CUDA base image "
            "(nvidia/cuda:*-cudnn-runtime)"
        )
    known = IMAGE_LIBRARY_FIXES.get(name)
    return known or (
        f"install the system package that provides {name} in the image "
        f"(Debian/Ubuntu: `apt-file search {name}` names it)"
    )


def from_import_error(exc: ImportError, what: str) -> errors.NodeFault | errors.ConfigError | None:
    """The verdict on an ImportError of a shared library, `what` saying which import failed
    ("program module 'train' does not import"): a NodeFault for a library the node provides, a
    ConfigError for one the image lacks (a retry fails alike on every node); None for any other
    ImportError."""
    library = missing_shared_library(exc)
    if library is None:
        return None
    said = f"{what}: {errors.cause_line(exc)}"
    if is_node_provided(library):
        verdict = errors.NodeFault(
            f"{said} (shared library {library}, which the node's GPU driver provides, missing or unreadable "
            "on this node)"
        )
    else:
        verdict = errors.ConfigError(
            f"{said} (shared library {library} is not in the image: a retry fails alike on every node); "
            f"{image_remedy(library)}"
        )
    verdict.__cause__ = exc  # its traceback goes to the log
    return verdict


def gpus_given(environ=os.environ) -> int:
    """How many GPUs the launcher gave this task (TFK8S_GPUS; unset: none)."""
    text = environ.get(contract.GPUS, "0")
    if not text.isdigit():
        raise errors.ConfigError(
            f"{contract.GPUS}={text!r} must be a whole number of GPUs (the role's nvidia.com/gpu limit)"
        )
    return int(text)


def missing_gpus(given: int, visible: int, built_with_cuda: bool) -> errors.NodeFault | errors.ConfigError | None:
    """The verdict when TensorFlow sees fewer GPUs than the task was given: the node's fault
    (NodeFault) if this TensorFlow is built with CUDA (tf.test.is_built_with_cuda()), else the
    image's (ConfigError): a TensorFlow without CUDA sees no GPU on any node."""
    if visible >= given:
        return None
    given_said = f"this task was given {given} GPU(s) ({contract.GPUS}, the role's nvidia.com/gpu limit)"
    if not built_with_cuda:
        return errors.ConfigError(
            f"{given_said} and the image's TensorFlow is built without CUDA (tf.test.is_built_with_cuda() is "
            "False: tensorflow-cpu?), so it sees no GPU on any node: use a GPU image, with "
            "tensorflow[and-cuda] installed (this repo's Dockerfile: "
            "--build-arg 'TF_PACKAGE=tensorflow[and-cuda]...'), or drop the role's nvidia.com/gpu limit"
        )
    return errors.NodeFault(
        f"{given_said} and TensorFlow sees {visible}: the node's GPU, its driver or the CUDA libraries are broken"
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
