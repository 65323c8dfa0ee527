"""A foreground run: its supervisor in a thread of this process, waited for by the caller.

The tasks start in that thread and PR_SET_PDEATHSIG ties them to it (runner.py), so they end
with this process whatever happens; submit() returns once they have started. Signals belong to
the main thread: while it waits, a Ctrl-C, SIGTERM or SIGHUP (its terminal closed) is passed on to
the supervisor, which stops every task with SIGTERM, as a pod's are stopped (the built-in worker
saves a checkpoint then), and ends the run as failed (exit 128 + the signal), as the detached
supervisor does. A second one SIGKILLs at once the tasks that have not exited yet (a program that
ignores SIGTERM), naming them.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable, Iterator

from launcher.backends.local.supervisor import STOP_SIGNALS, Supervisor


class ForegroundRun:
    def __init__(self, supervisor: Supervisor):
        self.supervisor = supervisor
        self.exit_code: int | None = None
        self.error: BaseException | None = None
        # A daemon: a caller that exits without wait() is not held up; its tasks die with it.
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"tfk8s-supervisor-{supervisor.spec.name}")

    def start(self) -> None:
        """Start the supervisor; return once every task has started (or raise why not)."""
        self.thread.start()
        self.supervisor.started.wait()
        if self.error is not None:
            self.thread.join()
            raise self.error

    def _run(self) -> None:
        try:
            self.exit_code = self.supervisor.run()
        except BaseException as exc:  # raised again by start() or wait(), in the caller's thread
            self.error = exc
        finally:
            self.supervisor.started.set()

    def wait(self, show: Callable[[], None] | None, every_seconds: float) -> int:
        """Until the run ends, calling show() every `every_seconds`; the chief's exit code."""
        with _signals_passed_to(self.supervisor):
            while self.thread.is_alive():
                if show is not None:
                    try:
                        show()
                    except Exception as exc:  # the run goes on; say why its view froze
                        show = None
                        self.supervisor.output.say(f"warning: the progress view stopped: {exc!r}")
                self.thread.join(every_seconds)
        if self.error is not None:
            raise self.error
        return self.exit_code

    def stop(self) -> None:
        """Stop every task (as a SIGTERM would) and wait for the supervisor to finish."""
        self.supervisor.interrupt(signal.SIGTERM)
        self.thread.join()


@contextlib.contextmanager
def _signals_passed_to(supervisor: Supervisor) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives signals; its owner decides
        return

    interrupted = []

    def interrupt(signum, frame):
        # The first stops every task with SIGTERM; a later one SIGKILLs the ones still stopping
        # (a program that ignores SIGTERM), never cutting the supervisor's cleanup short.
        if interrupted:
            supervisor.kill_now(signum)
        else:
            interrupted.append(signum)
            supervisor.interrupt(signum)

    previous = {sig: signal.signal(sig, interrupt) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
