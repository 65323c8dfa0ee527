"""The worker blocks SIGTERM in every thread from its start (worker/lifecycle/preemption.py), and
a process keeps its parent thread's signal mask through exec: a child started with SIGTERM
blocked ignores the pod's SIGTERM and lives on to the SIGKILL. Once TensorFlow's set-up is past,
the main thread unblocks it (`unblock_in_this_thread`), so the processes the worker or the
program starts from then on begin with an empty mask, and SIGTERM still ends the worker with
EXIT_PREEMPTED, also as PID 1 (where a SIGTERM with no handler and not blocked is dropped).

Plain Python processes with the worker's preemption module, no TensorFlow (the roles' calls are
checked in real trainings: test_preemption.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

from support import REPO

from worker.errors import EXIT_PREEMPTED

SIGTERM_BIT = 1 << (signal.SIGTERM - 1)

# Stands in for `python -m worker`: SIGTERM taken as at its start, then (argv[1] == "unblock")
# as once its strategy exists; a child from the main thread (the program's build_dataset) and
# one from a thread started after that; their masks printed, then it waits for SIGTERM.
TASK = textwrap.dedent(
    """
    import subprocess, sys, threading, time
    from worker.lifecycle import preemption

    def blocked_mask_of_a_child():  # the child reads its own: /proc/<pid> is the host's here
        status = subprocess.run(["grep", "SigBlk:", "/proc/self/status"], capture_output=True, text=True)
        return int(status.stdout.split()[1], 16)

    preemption.install()
    if sys.argv[1] == "unblock":
        preemption.unblock_in_this_thread()
    from_a_thread = []
    thread = threading.Thread(target=lambda: from_a_thread.append(blocked_mask_of_a_child()))
    thread.start()
    thread.join()
    print(f"masks {blocked_mask_of_a_child()} {from_a_thread[0]}", flush=True)
    while True:
        time.sleep(1)
    """
)


def run_task(mode: str) -> tuple[int, int, int, str]:
    """The task as PID 1 of a new PID namespace (as in a container) when this user can make
    one: (child's blocked mask from the main thread, from a thread, exit code after SIGTERM,
    output)."""
    command = [sys.executable, "-c", TASK, mode]
    as_pid_1 = os.geteuid() == 0 and shutil.which("unshare") is not None
    if as_pid_1:
        command = ["unshare", "--pid", "--fork", "--kill-child", *command]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        first = proc.stdout.readline()
        assert first.startswith("masks "), first + proc.stdout.read()
        from_main, from_thread = (int(word) for word in first.split()[1:])
        task = proc.pid
        if as_pid_1:
            import psutil

            [child] = psutil.Process(proc.pid).children()
            task = child.pid
        os.kill(task, signal.SIGTERM)
        code = proc.wait(timeout=20)
        return from_main, from_thread, code, proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_children_started_once_tensorflow_is_set_up_have_an_empty_mask_and_sigterm_still_exits_143():
    from_main, from_thread, code, output = run_task("unblock")
    assert (from_main, from_thread) == (0, 0), f"SigBlk {from_main:#x} and {from_thread:#x}, want 0"
    assert code == EXIT_PREEMPTED, output
    assert '"event": "preempted"' in output, output


def test_a_child_started_while_sigterm_is_blocked_inherits_the_block():
    """What the test above would see without the unblock: the mask is what it measures."""
    from_main, from_thread, code, output = run_task("blocked")
    assert from_main & SIGTERM_BIT and from_thread & SIGTERM_BIT, (from_main, from_thread)
    assert code == EXIT_PREEMPTED, output
