"""MultiWorkerMirroredStrategy(...) waits for its peers without holding Python's GIL.

The constructor's wait is one C call, TFE_EnableCollectiveOps (the coordination service waits
there until every worker has registered), and TensorFlow's Python binding of it keeps the GIL.
So while a peer is late, no other Python thread runs: not the thread that takes SIGTERM
(worker/lifecycle/preemption.py), which then ended the task only once the peer came, and with
a peer that never comes (a whole cluster drained, a peer's replacement Pending on GPUs) never,
until the SIGKILL at the end of the pod's grace (exit 137, counted against backoffLimit).

`without_the_gil()` makes that call through ctypes, which releases the GIL for the C call's
duration: the same function of TensorFlow's C API, on the same context, with the same bytes.
"""

from __future__ import annotations

import ctypes
import os
from contextlib import contextmanager
from typing import Iterator

import tensorflow as tf
from tensorflow.python import pywrap_tfe
from tensorflow.python.framework import errors_impl

# The wheel's library that exports TensorFlow's C API (and TF_Status's functions, through its
# dependency libtensorflow_framework).
C_API_LIBRARY = "libtensorflow_cc.so.2"


@contextmanager
def without_the_gil() -> Iterator[None]:
    """Within the block, TensorFlow enables collective ops (the MWMS constructor's peer wait)
    with the GIL released."""
    enable = _c_enable_collective_ops()
    original = pywrap_tfe.TFE_EnableCollectiveOps
    pywrap_tfe.TFE_EnableCollectiveOps = enable
    try:
        yield
    finally:
        pywrap_tfe.TFE_EnableCollectiveOps = original


def _c_enable_collective_ops():
    path = os.path.join(os.path.dirname(tf.__file__), C_API_LIBRARY)
    try:
        library = ctypes.CDLL(path)
        enable = library.TFE_EnableCollectiveOps
    except (OSError, AttributeError) as exc:
        raise RuntimeError(
            f"cannot call TFE_EnableCollectiveOps of TensorFlow {tf.__version__} through ctypes "
            f"({exc}): the MWMS peer wait would hold the GIL and miss a SIGTERM; install the "
            f"TensorFlow the worker image pins, whose wheel has {C_API_LIBRARY}"
        ) from None
    enable.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p]
    enable.restype = None
    library.TF_NewStatus.restype = ctypes.c_void_p
    library.TF_GetCode.argtypes = [ctypes.c_void_p]
    library.TF_GetCode.restype = ctypes.c_int
    library.TF_Message.argtypes = [ctypes.c_void_p]
    library.TF_Message.restype = ctypes.c_char_p
    library.TF_DeleteStatus.argtypes = [ctypes.c_void_p]
    context_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    context_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    context_pointer.restype = ctypes.c_void_p

    def enable_collective_ops(context_handle, server_def: bytes) -> None:
        """pywrap_tfe.TFE_EnableCollectiveOps, GIL released: the handle is the PyCapsule of a
        TFE_Context (unnamed), the server_def a serialized ServerDef."""
        status = library.TF_NewStatus()
        try:
            enable(context_pointer(context_handle, None), server_def, len(server_def), status)
            code = library.TF_GetCode(status)
            if code != 0:
                message = library.TF_Message(status).decode("utf-8", "replace")
                raise errors_impl.exception_type_from_error_code(code)(None, None, message)
        finally:
            library.TF_DeleteStatus(status)

    return enable_collective_ops
