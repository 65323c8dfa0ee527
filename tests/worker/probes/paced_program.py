"""The small digits program (worker/examples/digits.py) at a fixed time per training step: each
training batch waits PACED_STEP_SECONDS (default 0.05) in its input pipeline before it is handed
to the step. For fault tests, whose subject is what a cluster does around a kill, not the model:
the CNN's step time depends on the CPU (and on what else runs beside it), so a kill "before the
end" needed hundreds of steps of margin; here the steps' pace is set, and the waiting costs no
CPU. The sleep is a dataset op (SleepDataset), so it runs wherever the dataset does: on the
parameter-server workers too, where a Python callback could not. Evaluation is not paced."""

import os

from tensorflow.python.data.experimental.ops import testing

from worker.examples import digits
from worker.examples.digits import build_model, build_optimizer  # noqa: F401

STEP_SECONDS = float(os.environ.get("PACED_STEP_SECONDS", "0.05"))


def build_dataset(split: str, batch_size: int, input_context=None, data: str = "digits"):
    dataset = digits.build_dataset(split, batch_size, input_context, data)
    if split != "train":
        return dataset
    # after the pipeline's prefetch: the wait is on the step's own fetch, one per batch
    return dataset.apply(testing.sleep(int(STEP_SECONDS * 1_000_000)))
