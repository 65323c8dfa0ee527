"""An uncaught exception of a program of your own: fatal at once when a retry would fail alike.

Python exits 1 after any uncaught exception, and a Job retries exit 1 backoffLimit times: a
ValueError at step 3 cost 7 attempts. `install()` (the worker image's .pth file; --local:
worker/startup/sitecustomize.py) sets sys.excepthook in a task of a program of your own: after
Python's own traceback it prints one line, `tfk8s <task>: error: <exception> (<rule>)`, and
writes it as the termination message (the cause `status` shows), and for an exception of a
deterministic kind (worker/exit_cause.py EXCEPTION_KINDS, under the spec's fatalExceptions and
retriedExceptions) runs the atexit handlers and exits EXIT_DETERMINISTIC_EXCEPTION, which the
Jobs' podFailurePolicy fails at once (launcher/plan/job_failure.py). Any other exception keeps
Python's exit 1, retried as before.

Like the Keras check it imports only `os` and `sys` at start-up; the built-in worker (TFK8S_PROGRAM
set) catches its own exceptions; TFK8S_EXCEPTION_CHECK=0 turns it off.
"""

import os
import sys

from worker.keras_check import PROGRAM, TF_CONFIG, _task  # stdlib only, as a task's start needs

OPT_OUT = "TFK8S_EXCEPTION_CHECK"  # "0": Python's own exit 1 for every exception


def install() -> None:
    """Judge this process's uncaught exception, if it is a task of a program of your own."""
    if os.environ.get(OPT_OUT) == "0" or TF_CONFIG not in os.environ or PROGRAM in os.environ:
        return
    if getattr(sys.excepthook, "tfk8s_exception_check", False):
        return
    python_hook = sys.excepthook

    def judged(kind, value, traceback):
        python_hook(kind, value, traceback)  # the traceback, as Python prints it
        if issubclass(kind, Exception) and judge(kind, value):
            exit_at_once()

    judged.tfk8s_exception_check = True
    sys.excepthook = judged


def judge(kind, value) -> bool:
    """Say the exception's cause line with its rule; whether it is fatal."""
    from worker import contract, errors, exit_cause  # only now: an exception's cost does not matter

    verdict, rule = exit_cause.exception_verdict(
        [cls.__name__ for cls in kind.__mro__], *exit_cause.spec_exception_lists(os.environ)
    )
    cause = exit_cause.exception_line(kind.__name__, str(value))
    hint = exit_cause.keras_2_hint(cause)
    line = exit_cause.with_rule(cause, f"{rule}; {hint}" if hint else rule)
    errors.write_termination_message(line)
    sys.stdout.flush()
    print(contract.ERROR_LINE.format(task=_task(), message=line), file=sys.stderr, flush=True)
    return verdict == exit_cause.FATAL


def exit_at_once() -> None:
    """Exit EXIT_DETERMINISTIC_EXCEPTION after what Python's own exit would run (the atexit
    handlers: TF's, a program's), not waiting for the program's other threads."""
    import atexit

    from worker import contract

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(contract.EXIT_DETERMINISTIC_EXCEPTION)
