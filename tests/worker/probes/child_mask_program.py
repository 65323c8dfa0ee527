"""The built-in program (worker/examples/fashion_mnist.py), whose build_dataset also starts a process
and reports the signals that process starts with blocked (its SigBlk, hex): a process the
program starts must get the pod's SIGTERM, so nothing may be blocked (the worker blocks SIGTERM
while TensorFlow sets up: worker/lifecycle/preemption.py)."""

import subprocess

from worker import progress
from worker.examples import fashion_mnist
from worker.examples.fashion_mnist import build_model, build_optimizer  # noqa: F401


def build_dataset(split: str, batch_size: int, input_context=None, data: str = "digits"):
    # the child reads its own status: `grep` is the process the program started
    status = subprocess.run(["grep", "SigBlk:", "/proc/self/status"], capture_output=True, text=True, check=True)
    progress.report("child_signal_mask", split=split, blocked=status.stdout.split()[1])
    return fashion_mnist.build_dataset(split, batch_size, input_context, data)
