"""Who holds a TCP port on this machine, for the one line that says why a server could not bind it.

Read from /proc without privileges: /proc/net/tcp and tcp6 list the sockets on the port (with
their state and inode), /proc/<pid>/fd links each socket inode to its process. A process of
another user (or outside this PID namespace) shows its socket but not its pid.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from worker import errors

TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
LISTEN, TIME_WAIT = "0A", "06"
COMMAND_CHARS = 120  # of a holder's command line in the message
# TF's message when its gRPC server cannot bind its port (tf.distribute.Server, and the PS
# coordinator's and MWMS workers' own servers); the port itself is only in gRPC's log line.
GRPC_BIND_FAILURE = "Could not start gRPC server"


@dataclass(frozen=True)
class Holder:
    state: str  # /proc/net/tcp's hex state: LISTEN, ESTABLISHED, ...
    uid: int
    pid: int | None  # None: its process is not visible from here
    command: str = ""

    def describe(self) -> str:
        who = f"pid {self.pid} ({self.command})" if self.pid is not None else f"a process of uid {self.uid}"
        if self.state == LISTEN:
            return f"{who} listens on it"
        if self.state == TIME_WAIT:
            return "a closed connection in TIME_WAIT"
        return f"{who} uses it as a connection's local port"


def holders(port: int) -> list[Holder]:
    """The sockets bound to local `port` (listeners first), with their processes where visible."""
    sockets = []  # (state, uid, inode)
    for table in TCP_TABLES:
        try:
            with open(table, encoding="ascii") as lines:
                next(lines, None)  # the header
                for line in lines:
                    fields = line.split()
                    if int(fields[1].rsplit(":", 1)[1], 16) == port:
                        sockets.append((fields[3], int(fields[7]), int(fields[9])))
        except FileNotFoundError:
            continue  # no IPv6 (or no /proc: not Linux)
    pids = _pids_of({inode for _, _, inode in sockets if inode})
    found = [
        Holder(state, uid, pids.get(inode), _command(pids[inode]) if inode in pids else "")
        for state, uid, inode in sockets
    ]
    return sorted(set(found), key=lambda h: (h.state != LISTEN, h.pid is None, h.pid or 0))


def describe(port: int) -> str:
    """Who holds `port`, in a few words for an error message."""
    found = holders(port)
    if not found:
        return (
            "no listening or connected socket holds it now (a connection since closed, a process "
            "since exited, or a socket bound without listening)"
        )
    return "; ".join(h.describe() for h in found)


def bind_failure(exc: BaseException, port: int | None) -> errors.WorkerError | None:
    """TF's server failing to bind this task's own `port`, as one line naming the port and who
    holds it; None for any other exception."""
    if port is None or GRPC_BIND_FAILURE not in str(exc):
        return None
    taken = PortTaken(
        f"cannot serve gRPC on this task's port {port} from TF_CONFIG: {describe(port)}; "
        "end that process (a restart binds the port again) or give the cluster other ports"
    )
    taken.__cause__ = exc  # TF's traceback goes to the log first
    return taken


class PortTaken(errors.WorkerError):
    """Another process holds the port: restarting may help once it is gone, so it is counted
    like any crash rather than failing the job at once."""

    exit_code = errors.EXIT_UNEXPECTED


def _pids_of(inodes: set[int]) -> dict[int, int]:
    """{socket inode: pid} for the inodes whose process this one may look into."""
    if not inodes:
        return {}
    wanted = {f"socket:[{inode}]": inode for inode in inodes}
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fd_dir = f"/proc/{entry}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # another user's, or gone
            continue
        for fd in fds:
            try:
                inode = wanted.get(os.readlink(f"{fd_dir}/{fd}"))
            except OSError:
                continue
            if inode is not None:
                found.setdefault(inode, int(entry))
        if len(found) == len(wanted):
            break
    return found


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = " ".join(f.read().decode(errors="replace").replace("\0", " ").split())  # one line
    except OSError:
        return "exited"
    return text if len(text) <= COMMAND_CHARS else text[: COMMAND_CHARS - 3] + "..."
