"""Python imports this at start-up when its dir is on PYTHONPATH, as --local puts it first for
the tasks of a command of your own (launcher/backends/local/tasks.py; the worker image uses its
.pth file instead): the Keras check (worker/keras_check.py), then the sitecustomize this one hides
(the code dir's or the interpreter's), so that one still runs. The dir holds no other module."""

import os
import sys

from worker import keras_check

keras_check.install()


def _run_the_hidden_sitecustomize() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = module
    spec.loader.exec_module(module)


_run_the_hidden_sitecustomize()
