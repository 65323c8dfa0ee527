"""A ClusterStatus as one line of text: what `status`, the API's events and the plain-line view
print."""

from __future__ import annotations

import re

from launcher.status.status import ClusterStatus

# What a task's output can carry to a terminal besides text: escape sequences (ECMA-48: CSI
# `ESC [ ... final`, OSC/DCS/APC/PM/SOS strings up to BEL or ST, two-byte `ESC x`), their
# one-byte C1 forms, and the other C0 controls. Whole sequences go, so an OSC 52 clipboard
# write leaves no base64 behind.
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # any other ESC sequence (or a lone ESC)
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but tab and newline, DEL, C1


def printable(text: str) -> str:
    """`text` without terminal control: escape sequences and control characters other than
    newline and tab removed (task output reaches `status` and `logs`; a program must not move
    the cursor, fake a line already printed or write the clipboard)."""
    return _CONTROL.sub("", _ESCAPE_SEQUENCE.sub("", text))


def tasks_summary(status: ClusterStatus) -> str:
    """`chief 1/1, worker 2/2, evaluator 0/1 (1 done)`: running of replicas per role."""

    def one(r) -> str:
        extra = [f"{n} {what}" for n, what in ((r.succeeded, "done"), (r.failed, "failed")) if n]
        return f"{r.role} {r.active}/{r.replicas}" + (f" ({', '.join(extra)})" if extra else "")

    return ", ".join(one(r) for r in status.roles)


def state_line(status: ClusterStatus) -> str:
    """`[Running] chief 1/1, worker 2/2, ps 1/1 - message`: what changes rarely."""
    line = f"[{status.phase}] {tasks_summary(status)}".rstrip()
    return line + (f" - {status.message}" if status.message else "")


def status_line(status: ClusterStatus) -> str:
    """The state line, then `| step 420/1000 (42%), 35 steps/s, ETA 0:00:16, loss 0.51; ...`"""
    line = state_line(status)
    if status.training is not None and (summary := status.training.summary()):
        line += " | " + summary
    return line
