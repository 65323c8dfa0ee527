"""Task processes: start one in its own process group, copy its output, stop groups, check pids.

Mechanics only: which task starts or stops when is decided in policy.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Callable

from launcher.backends.local.files import private_opener

STOP_POLL_SECONDS = 0.1  # how often stop() looks whether its tasks have exited

# Runs before the task's command: asks Linux to SIGKILL the task when the supervising thread
# dies, then execs the command (so `pgrep -f "python -m worker"` sees the task itself).
_EXEC_WITH_PARENT_DEATH_SIGNAL = """\
import ctypes, os, signal, sys
PR_SET_PDEATHSIG = 1
if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
    sys.exit("tfk8s: prctl(PR_SET_PDEATHSIG) failed: errno %d" % ctypes.get_errno())
if os.getppid() != int(sys.argv[1]):
    sys.exit("tfk8s: the launcher exited before this task started")
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write("tfk8s: cannot run %r: %s\\n" % (sys.argv[2], exc))
    sys.exit(127)
"""


class Output:
    """Where task output goes, besides each task's own log: every line, prefixed with its task,
    to the run's combined log (`logs --all`) and, when echoing, to one shared stream; the
    launcher's own notices always to the stream."""

    def __init__(self, stream: IO[str], combined_log: Path | None = None, echo_tasks: bool = True):
        self.stream: IO[str] | None = stream
        self.echo_tasks = echo_tasks
        self.lock = threading.Lock()
        self.combined = open(combined_log, "a", encoding="utf-8", opener=private_opener) if combined_log else None

    def say(self, text: str) -> None:
        self._write(f"[tfk8s] {text}", echo=True)

    def task_line(self, text: str) -> None:
        self._write(text, echo=self.echo_tasks)

    def _write(self, text: str, echo: bool) -> None:
        with self.lock:
            if self.combined is not None:
                self.combined.write(text + "\n")
                self.combined.flush()
            if echo and self.stream is not None:
                try:
                    self.stream.write(text + "\n")
                    self.stream.flush()
                except OSError:
                    # The terminal is gone (closed: EIO): no one reads it any more, and the
                    # run's stopping must go on; the combined log has every line.
                    self.stream = None

    def close(self) -> None:
        with self.lock:
            if self.combined is not None:
                self.combined.close()
                self.combined = None


def start(
    argv: list[str],
    env: dict[str, str],
    *,
    name: str,
    log_path: Path,
    header: Callable[[int], str],
    output: Output,
    cwd: str | None = None,
) -> tuple[subprocess.Popen, threading.Thread]:
    """Start `argv` in a new session (its own process group); a thread copies its output to
    `log_path`, behind the line header(pid), and to `output` prefixed with `[name] `. The
    header is written before this returns: once a run's tasks have started (submit returned),
    each task's log exists and `logs` can read it (seen: a test that read it right after
    submit found no file while the copying thread had not run yet)."""
    argv = launch_argv(argv)
    log = open(log_path, "a", encoding="utf-8", opener=private_opener)  # first: a log that cannot open starts nothing
    try:
        process = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=cwd,
        )
    except BaseException:
        log.close()
        raise
    log.write(header(process.pid) + "\n")
    log.flush()
    reader = threading.Thread(
        target=_copy_output,
        args=(process, log, f"[{name}] ", output),
        name=f"log-{name}",
        daemon=True,
    )
    reader.start()
    return process, reader


def launch_argv(argv: list[str]) -> list[str]:
    """What start() executes for a task's `argv` (Linux: behind the parent-death wrapper)."""
    if sys.platform.startswith("linux"):
        return [sys.executable, "-c", _EXEC_WITH_PARENT_DEATH_SIGNAL, str(os.getpid()), *argv]
    return argv


def _copy_output(process: subprocess.Popen, log: IO[str], prefix: str, output: Output) -> None:
    with log:
        for raw in process.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            log.write(line + "\n")
            log.flush()
            output.task_line(prefix + line)
    process.stdout.close()


def stop(processes: dict[str, subprocess.Popen], grace: float, kill_now: threading.Event | None = None) -> list[str]:
    """SIGTERM each process group (by task name); once every one has exited, or `grace` s have
    passed, or `kill_now` is set (a second Ctrl-C), SIGKILL every group at once. The names of the
    tasks that still ran then, in order: they ignored SIGTERM."""
    for process in processes.values():
        signal_group(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    kill_now = kill_now or threading.Event()
    while any(process.poll() is None for process in processes.values()):
        left = deadline - time.monotonic()
        if left <= 0 or kill_now.wait(min(STOP_POLL_SECONDS, left)):
            break
    ignored = [name for name, process in processes.items() if process.poll() is None]
    for process in processes.values():  # anything a task started in its group goes too
        signal_group(process.pid, signal.SIGKILL)
    for process in processes.values():
        process.wait()
    return ignored


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # the whole group is gone already


def alive(pid) -> bool:
    """Whether `pid` runs; a zombie (exited, not yet reaped by its parent) does not."""
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        # No /proc (macOS): trust kill(0). On Linux, the process has just gone.
        return not sys.platform.startswith("linux")
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks after boot, /proc/<pid>/stat field 22): with the pid, what
    tells this process from a later one that got the same pid. None without /proc (macOS) or
    once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # fields 3.. follow the command's ")"


def runs(pid, started: int | None) -> bool:
    """Whether the process that was `pid` when start_time() gave `started` still runs; a pid
    now another process's (or one recorded without its start time, on Linux) does not."""
    return alive(pid) and start_time(pid) == started


def pythonpath() -> str:
    """Tasks import `worker` and `launcher` from the same checkout as this launcher."""
    root = str(Path(__file__).resolve().parents[3])
    existing = os.environ.get("PYTHONPATH")
    return root + (os.pathsep + existing if existing else "")


def start_detached(argv: list[str], log_path: Path) -> int:
    """A process in its own session that outlives this one; returns its pid."""
    with open(log_path, "ab", opener=private_opener) as log:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": pythonpath()},
        )
    return process.pid
