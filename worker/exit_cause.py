"""Why a task exited, in one line, from what it printed (standard library only).

One rule for every task, the built-in worker's and a program of the user's, read by both
backends (`status`, `--wait`, the API) from a pod's termination message or a local task's log:

1. the built-in worker's own one-line error (`tfk8s <task>: error: ...`), unless a traceback
   follows it;
2. else the exception of the last Python traceback (from its first frame on, when the output
   read is a tail that lost the traceback's header): its type and the first line of its message that
   says something (`ValueError: Input 0 of layer ... is incompatible ...`), not the tail of a
   multi-line message (Keras' argument list, a tensor printout);
3. (before 2 when it comes after the last traceback) a fatal line: a FATAL log line (TF's C++
   `Check failed`, absl's `logging.fatal`), else faulthandler's `Fatal Python error: ...` (its
   dump's frames and `Extension modules:` line are no traceback);
4. else, for an exit status that is a signal's, the signal;
5. else the last line printed, or the last of the final three lines that says something went
   wrong (an error, then a cleanup line).

TensorFlow's info and warning logging, its C++ errors, its start-up notices and `tfk8s-progress`
lines are never a cause; absl's Python `E` lines and any `F` line are, as `file:line: message`.
"""

from __future__ import annotations

import re
import signal

from worker.contract import ERROR_LINE_PATTERN, FATAL_EXCEPTIONS, NOT_RETRIED, PROGRESS_PREFIX, RETRIED_EXCEPTIONS

# What `status` keeps of a cause (the kubelet keeps at most 4096 bytes of a termination message).
MAX_CAUSE_CHARS = 400
TRACEBACK_HEADER = "Traceback (most recent call last):"

# absl/glog-prefixed log lines, TF's C++ and absl's Python alike, e.g.
# `I0000 00:00:1732461234.567890   12 port.cc:153] ...`, `E1128 17:16:36.729163 1397 train.py:3] ...`
# and the older `2024-11-24 16:49:37.123456: W tensorflow/core/...cc:210] ...`.
_LOG_LINE = re.compile(
    r"^(?:(?P<level>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ (?P<file>\S+):(?P<line>\d+)\]"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<level2>[IWEF]) (?P<file2>\S+):(?P<line2>\d+)\])\s?(?P<message>.*)$"
)
FATAL_PYTHON_ERROR = "Fatal Python error:"  # faulthandler's dump (absl.app.run turns it on), Python's own
# A line that says something went wrong: among a program's last lines, it is the cause rather
# than a cleanup line printed after it.
_SAYS_ERROR = re.compile(
    r"\b(error|fatal|failed|failure|cannot|can't|unable|invalid|not found|no such|denied)\b", re.IGNORECASE
)
LAST_LINES_READ = 3  # how far back from the last line an error line is looked for
# Continuation lines of TF's multi-line start-up notices, which carry no prefix of their own.
_TF_NOTICES = (
    "To enable the following instructions:",
    "rebuild TensorFlow with the appropriate compiler flags",
    "oneDNN custom operations are on",
    "TF_ENABLE_ONEDNN_OPTS",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "This TensorFlow binary is optimized to use available CPU instructions",
)
# Opening lines of TF's and Keras' messages that only announce the informative line after them.
_ANNOUNCEMENTS = (
    "Graph execution error",
    "Detected at node",
    "Additional GRPC",
    "Exception encountered when calling",  # Keras 3 wraps a layer's error in this
)
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # Keras 3 prints the informative line in bold
# A traceback's frame as Python prints it. A tail that lost the header begins at its first frame
# (frames a TF message lists, "defined at", come after the exception line).
_FRAME = re.compile(r'^  File ".*", line \d+')
_EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")
# A nested exception inside a message (tf_keras' "in user code:" repeats the real one, indented).
_NESTED_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit): \S")
_OPENING, _CLOSING = "([{", ")]}"


def _log_level(line: str) -> tuple[str, str] | None:
    """(level, file) of an absl/glog-prefixed log line, or None."""
    match = _LOG_LINE.match(line.strip())
    if match is None:
        return None
    return match["level"] or match["level2"], match["file"] or match["file2"]


def is_tf_log_noise(line: str) -> bool:
    """Log lines that never say why a task ended: info and warnings, TF's C++ errors (its
    start-up `cuInit` error on every CPU-only host; a real one raises a Python exception too) and
    TF's start-up notices. Not FATAL lines (a `Check failed` aborts the process), nor absl's
    Python errors (a program's own `logging.error`)."""
    line = line.strip()
    logged = _log_level(line)
    if logged is not None:
        level, file = logged
        return level in "IW" or (level == "E" and not file.endswith(".py"))
    return any(notice in line for notice in _TF_NOTICES)


def _said(line: str) -> str:
    """A line as a cause: a log line as `file:line: message`, without its time and thread."""
    match = _LOG_LINE.match(line.strip())
    if match is None:
        return line.strip()
    return f"{match['file'] or match['file2']}:{match['line'] or match['line2']}: {match['message'].strip()}"


def _is_fatal(line: str) -> bool:
    return line.startswith(FATAL_PYTHON_ERROR) or (_log_level(line) or ("",))[0] == "F"


def _last_words(lines: list[str]) -> str:
    """The last line, or the last of the final few that says something went wrong (a program
    that prints its error, then a cleanup line)."""
    for line in reversed(lines[-LAST_LINES_READ:]):
        if _SAYS_ERROR.search(line) and not line.lstrip().lower().startswith("warning"):
            return _said(line)
    return _said(lines[-1])


def first_informative_line(message: str) -> str:
    """The line of an exception's message that says what went wrong: not an announcement
    ("Graph execution error:", "in user code:"), not a stack frame or its source line, and
    with a value printout that spans lines (`PerReplica:{ ... }`) elided."""
    lines = [_ANSI_ESCAPE.sub("", line).rstrip() for line in message.splitlines()]
    frame_indent: int | None = None  # inside a `File "...", line N` frame: its source lines follow
    for at, line in enumerate(lines):
        text = line.strip()
        indent = len(line) - len(line.lstrip())
        if frame_indent is not None and indent > frame_indent:
            continue
        frame_indent = indent if text.startswith("File ") else None
        if not text or text.endswith(":") or frame_indent is not None or text.startswith(_ANNOUNCEMENTS):
            continue
        return _elide_printout(text, lines[at + 1 :])[:300]
    return message.strip()[:300]


def _elide_printout(line: str, following: list[str]) -> str:
    """`Attempt to convert a value (PerReplica:{` + its printout + `}) with an unsupported
    type ...`: the line with the printout between its brackets left out."""
    depth = sum(line.count(c) for c in _OPENING) - sum(line.count(c) for c in _CLOSING)
    if depth <= 0:
        return line
    for later in following:
        for at, char in enumerate(later):
            depth += (char in _OPENING) - (char in _CLOSING)
            if depth == 0:  # from the brackets that close it on: `}) with an unsupported type ...`
                start = len(later[: at + 1].rstrip(_CLOSING))
                return f"{line}...{later[start:].strip()}"
    return line


def exception_of(traceback_body: list[str]) -> str | None:
    """The exception that ends a traceback (the lines after its header) as one line."""
    at = next((i for i, line in enumerate(traceback_body) if line.strip() and not line[:1].isspace()), None)
    if at is None:
        return None
    match = _EXCEPTION_LINE.match(traceback_body[at].strip())
    if match is None:
        return traceback_body[at].strip()
    kind = match["type"].rsplit(".", 1)[-1]  # `InvalidArgumentError`, not its module path
    return exception_line(kind, "\n".join([match["message"] or "", *traceback_body[at + 1 :]]))


def exception_line(kind: str, message: str) -> str:
    """An exception as one line: its type and the first informative line of its message, or
    the exception its message repeats (tf_keras' "in user code:" ends with the real one)."""
    if not message.strip():
        return kind
    said = first_informative_line(message)
    if not _NESTED_EXCEPTION.match(said):
        return f"{kind}: {said}"
    # The repeated exception's own message may open with an announcement too (Keras 3's layer
    # error inside a tf.function step): its first informative line, from the lines after it on.
    nested_kind, _, first = said.partition(": ")
    lines = message.splitlines()
    at = next((i for i, line in enumerate(lines) if said in _ANSI_ESCAPE.sub("", line)), None)
    if at is None:
        return said
    return exception_line(nested_kind.rsplit(".", 1)[-1], "\n".join([first, *lines[at + 1 :]]))


# --- what an uncaught exception of a program of your own means ----------------------------
# By class name (the nearest class of the exception's own MRO that is named wins): a kind a
# retry fails alike fails the cluster at once (worker/exception_check.py exits
# EXIT_DETERMINISTIC_EXCEPTION), a kind that may pass is retried; a kind named nowhere is
# retried as any exit is. The spec's fatalExceptions and retriedExceptions come first: a class
# they name decides for its subclasses (`retriedExceptions: [Exception]`: every one retried).
FATAL, RETRIED = "fatal", "retried"
EXCEPTION_KINDS: dict[str, str] = {
    # a program's bug or a wrong input, shape or argument: the same code meets the same data
    "ValueError": FATAL,  # shapes (`Shapes (None, 10) and (None, 1) are incompatible`), json
    "TypeError": FATAL,
    "KeyError": FATAL,
    "IndexError": FATAL,
    "AttributeError": FATAL,  # a Keras 2 API under Keras 3 too
    "NameError": FATAL,  # UnboundLocalError
    "ZeroDivisionError": FATAL,
    "AssertionError": FATAL,
    "NotImplementedError": FATAL,
    "ImportError": FATAL,  # ModuleNotFoundError: the image lacks a package
    "SyntaxError": FATAL,
    "InvalidArgumentError": FATAL,  # tf.errors: a shape or dtype that does not fit
    "UnimplementedError": FATAL,  # tf.errors: an op this TensorFlow has no kernel for
    # the network, a file system, a peer: a new attempt may meet them mended
    "OSError": RETRIED,  # ConnectionError, TimeoutError, FileNotFoundError (a mount not yet there)
    "UnavailableError": RETRIED,  # tf.errors: a peer or service that does not answer
    "DeadlineExceededError": RETRIED,
    "AbortedError": RETRIED,  # tf.errors: a collective aborted by a lost peer
    "CancelledError": RETRIED,
}
EXCEPTIONS_SPEC_KEYS = {FATAL: "fatalExceptions", RETRIED: "retriedExceptions"}


def exception_verdict(
    classes: list[str], fatal: tuple[str, ...] = (), retried: tuple[str, ...] = ()
) -> tuple[str | None, str]:
    """(FATAL, RETRIED or None, the rule as the cause line says it) for an exception whose MRO
    has the class names `classes` (its own first), under the spec's fatalExceptions and
    retriedExceptions (class names; a dotted prefix such as `tf.errors.` is ignored)."""
    spec = {name.rsplit(".", 1)[-1]: RETRIED for name in retried} | {name.rsplit(".", 1)[-1]: FATAL for name in fatal}
    kind = classes[0]
    for cls in classes:  # the spec's lists first, the nearest class they name
        if cls in spec:
            verdict = spec[cls]
            return verdict, f"{cls} is in {EXCEPTIONS_SPEC_KEYS[verdict]}: " + (
                NOT_RETRIED if verdict == FATAL else "retried"
            )
    for cls in classes:
        verdict = EXCEPTION_KINDS.get(cls)
        if verdict == FATAL:
            return FATAL, f"{_a(cls)} {cls} is deterministic: {NOT_RETRIED}; retriedExceptions: [{kind}] retries it"
        if verdict == RETRIED:
            return RETRIED, f"{_a(cls)} {cls} may pass: retried"
    return None, f"retried; fatalExceptions: [{kind}] fails the training at once"


def spec_exception_lists(environ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The spec's (fatalExceptions, retriedExceptions) as the launcher passes them to a task
    (TFK8S_FATAL_EXCEPTIONS, TFK8S_RETRIED_EXCEPTIONS: comma-separated class names)."""

    def listed(name: str) -> tuple[str, ...]:
        return tuple(filter(None, (n.strip() for n in environ.get(name, "").split(","))))

    return listed(FATAL_EXCEPTIONS), listed(RETRIED_EXCEPTIONS)


def _a(word: str) -> str:
    return "an" if word[:1] in "AEIOU" else "a"


# Keras 2 APIs a program written for Keras 2 meets under Keras 3 (TensorFlow 2.16 on): a part of
# the exception's message -> the one-line fix the cause line ends with (docs/keras.md).
KERAS_2_UNDER_KERAS_3 = (
    "has no attribute 'reset_states'",  # Model/metric.reset_states(): Keras 3 has reset_state()
    "The filename must end in `.weights.h5`",  # save_weights() to a TF checkpoint path
    "Keras 3 only supports V3 `.keras`",  # load_weights() of a TF checkpoint
    "Invalid filepath extension for saving",  # model.save() to a SavedModel dir
)
KERAS_2_FIX = (
    "Keras 2 code under Keras 3: pip install --no-deps tf-keras==<TF major.minor>.* and set "
    "TF_USE_LEGACY_KERAS=1 before TensorFlow is imported (docs/keras.md)"
)


def keras_2_hint(cause: str) -> str | None:
    """The fix for a Keras 2 API error under Keras 3, or None."""
    return KERAS_2_FIX if any(said in cause for said in KERAS_2_UNDER_KERAS_3) else None


def with_rule(cause: str, rule: str) -> str:
    """`cause (rule)`, the cause shortened so that the rule survives MAX_CAUSE_CHARS."""
    room = MAX_CAUSE_CHARS - len(rule) - 3
    if len(cause) > room:
        cause = cause[: max(room - 3, 0)] + "..."
    return f"{cause} ({rule})"


def signal_of(exit_code: int | None) -> str | None:
    """'killed by SIGKILL (signal 9)' for an exit status that is a signal's: Popen's -N, or a
    shell's and a container's 128 + N; None for any other."""
    if exit_code is None:
        return None
    number = -exit_code if exit_code < 0 else exit_code - 128
    try:
        name = signal.Signals(number).name
    except ValueError:
        return None
    return f"killed by {name} (signal {number})"


def exit_cause(output: str, exit_code: int | None = None) -> str | None:
    """The one line that says why a task exited, from its output (or the tail of it) and its
    exit status (the module's rule), shortened to MAX_CAUSE_CHARS; None if it printed nothing."""
    lines = [
        line.rstrip()
        for line in output.splitlines()
        if line.strip() and not line.startswith(PROGRESS_PREFIX) and not is_tf_log_noise(line)
    ]
    traceback_starts = [i + 1 for i, line in enumerate(lines) if line.strip() == TRACEBACK_HEADER]
    if not traceback_starts:  # a tail (a pod's termination message) may begin inside the traceback
        traceback_starts = [i for i, line in enumerate(lines) if _FRAME.match(line)][:1]
    own_errors = [i for i, line in enumerate(lines) if re.match(ERROR_LINE_PATTERN, line.strip())]
    # A fatal line ends the process (a FATAL log line's abort, faulthandler's dump of a crash,
    # whose stack frames are no traceback): the cause, unless a traceback was printed after it.
    headers = [i for i, line in enumerate(lines) if line.strip() == TRACEBACK_HEADER]
    fatal = [i for i, line in enumerate(lines) if _is_fatal(line) and (not headers or i > headers[-1])]
    cause = None
    if (
        own_errors
        and (not traceback_starts or own_errors[-1] > traceback_starts[-1])
        and (not fatal or own_errors[-1] > fatal[-1])
    ):
        cause = re.sub(ERROR_LINE_PATTERN, "", lines[own_errors[-1]].strip())
    elif fatal:
        # the FATAL log line says why; faulthandler's `Fatal Python error: Aborted` after it only how
        logged = [i for i in fatal if not lines[i].startswith(FATAL_PYTHON_ERROR)]
        cause = _said(lines[(logged or fatal)[-1]])
    elif traceback_starts:
        cause = exception_of(lines[traceback_starts[-1] :])
    cause = cause or signal_of(exit_code) or (_last_words(lines) if lines else None)
    if cause is None:
        return None
    hint = keras_2_hint(cause)
    if hint is not None and hint not in cause:
        cause = with_rule(cause, hint)
    return cause if len(cause) <= MAX_CAUSE_CHARS else cause[: MAX_CAUSE_CHARS - 3] + "..."
