"""The digits program, printing the cyclic GC's state when the worker builds the model: the
worker starts up without the GC and must train with it, start-up's objects frozen
(worker/__main__.py _collect_from_here)."""

import gc
import json

from worker.examples import digits
from worker.examples.digits import build_dataset, build_optimizer  # noqa: F401

GC_LINE = "gc-probe "


def build_model():
    print(GC_LINE + json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}), flush=True)
    return digits.build_model()
