"""Python imports this at start-up when its dir is on PYTHONPATH, as --local puts it first for
the tasks of a command of your own (launcher/backends/local/tasks.py; the worker image uses its
.pth file instead): the Keras check (worker/keras_check.py) and the exception check
(worker/exception_check.py), then the sitecustomize this one hides
(the code dir's or the interpreter's), so that one still runs. The dir holds no other module."""

import os
import sys

from worker import exception_check, keras_check

keras_check.install()
exception_check.install()


def _run_the_hidden_sitecustomize() -> None:
    from importlib.machinery import PathFinder

    here = os.path.dirname(os.path.abspath(__file__))
    spec = PathFinder.find_spec("sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != here])
    if spec is None:
        return
    import importlib.util  # only now: its imports would be most of this file's cost

    module = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = module
    spec.loader.exec_module(module)


_run_the_hidden_sitecustomize()
