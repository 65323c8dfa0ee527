"""The files of one local run, under `<workdir>/<name>/` (layout in the package docstring)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Iterator

from launcher.cluster_spec import names
from launcher.cluster_spec.spec import SHARED_DISK, ClusterSpec
from launcher.errors import ClusterNotFound, NotAClusterName, SubmitRefused
from launcher.status import progress
from worker.contract import task_name

# The pods' mount paths in a run (tasks.py maps them here).
MOUNTS_DIR = "mounts"

# Each attempt's output in a task's log starts behind a line that begins so.
ATTEMPT_HEADER_START = "=== tfk8s: "

# A run's files hold the spec's env values (secrets among them) and its tasks' output: its
# user's alone, whatever the umask.
PRIVATE_FILE, PRIVATE_DIR = 0o600, 0o700


def private_opener(path: str, flags: int) -> int:
    """open(..., opener=private_opener): a file it creates is PRIVATE_FILE."""
    return os.open(path, flags, PRIVATE_FILE)


def write_private(path: Path, data: str | bytes) -> None:
    with open(path, "wb" if isinstance(data, bytes) else "w", opener=private_opener) as out:
        out.write(data)


def private_dir(path: Path) -> Path:
    """`path` and the dirs above it that do not exist yet, created PRIVATE_DIR; `path` made so
    if it was there already (an earlier run's)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=PRIVATE_DIR, exist_ok=True)
    path.chmod(PRIVATE_DIR)
    return path


# --- the run's code copy: read-only, as a pod's /opt/tfk8s/code ---------------------------
# A pod's code dir is read-only (the init container unpacks it, the task container mounts it
# read-only). Here the copy loses every write bit, so a write fails with PermissionError as in
# the pod, except for root, whom file modes do not stop (that would take a mount namespace):
# code_changes() finds such writes after the run and the supervisor names them in a note.
# Python's own bytecode cache is left out: a pod's Python skips it silently.
BYTECODE_CACHE = "__pycache__"


def make_read_only(root: Path) -> None:
    """chmod a-w every file and dir under `root` and `root` itself (links are left alone)."""
    for path in (*(p for p in root.rglob("*") if not p.is_symlink()), root):
        path.chmod(path.stat().st_mode & ~0o222)


def remove_tree(path: Path) -> None:
    """rmtree `path`, its dirs given their owner's write bit back first (make_read_only's)."""
    for directory in (path, *(p for p in path.rglob("*") if p.is_dir() and not p.is_symlink())):
        directory.chmod(directory.stat().st_mode | 0o200)
    shutil.rmtree(path)


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """{path under root: (size, mtime_ns)} of every file and link, the bytecode cache left out."""
    state = {}
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if BYTECODE_CACHE in relative.parts or (path.is_dir() and not path.is_symlink()):
            continue
        stat = path.lstat()
        state[str(relative)] = (stat.st_size, stat.st_mtime_ns)
    return state


def code_changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """'a.txt (new)', 'b.py (changed)', 'c.py (removed)': what differs, by path."""
    said = {"new": sorted(after.keys() - before.keys()), "removed": sorted(before.keys() - after.keys())}
    said["changed"] = sorted(path for path in before.keys() & after.keys() if before[path] != after[path])
    return sorted(f"{path} ({how})" for how, paths in said.items() for path in paths)


def check_cluster_name(name: str) -> str:
    """`name` if a spec could have it (its `name` rule: a DNS-1035 label), else NotAClusterName:
    a run's dir is `<workdir>/<name>`, so only such a name keeps every command (delete above
    all) inside that one dir; "", ".", "../x" or "/x" would reach the workdir or beyond it."""
    problem = names.dns1035_problem(name) if isinstance(name, str) else "not a string"
    if problem:
        raise NotAClusterName(f"{name!r} is not a cluster name ({problem}); give the `name` of the cluster's spec")
    return name


class RunFiles:
    def __init__(self, workdir: Path, name: str):
        """Refuses a name no spec could have (check_cluster_name)."""
        self.workdir = workdir
        self.name = check_cluster_name(name)
        self.dir = workdir / name

    @property
    def spec_path(self) -> Path:
        return self.dir / "spec.json"

    @property
    def status_path(self) -> Path:
        return self.dir / "status.json"

    @property
    def supervisor_log(self) -> Path:
        return self.dir / "supervisor.log"

    @property
    def default_model_dir(self) -> Path:
        return self.dir / "model"

    def model_dir(self, spec: ClusterSpec) -> str:
        """TFK8S_MODEL_DIR of the run: the spec's gs:// dir, else model/ here."""
        return spec.checkpoint.dir if spec.checkpoint.is_remote else str(self.default_model_dir)

    def newest_checkpoint(self, model_dir: str, most_entries: int = 5000) -> tuple[int, str, float] | None:
        """(step, path, written at) of the newest TF checkpoint under the model dir and the pods'
        mount paths (mounts/): what a TF checkpoint state file names, else a `<prefix>-<N>.index`;
        None if there is none. At most `most_entries` entries are looked at (a dataset under a mount)."""
        newest = None
        seen = 0
        for top in (Path(model_dir), self.dir / MOUNTS_DIR):
            for root, dirs, files in os.walk(top):
                seen += len(dirs) + len(files)
                if seen > most_entries:
                    return newest
                for name in files:
                    found = _checkpoint_in(Path(root), name)
                    if found is not None and (newest is None or found[2] > newest[2]):
                        newest = found
        return newest

    def log_path(self, role: str, index: int) -> Path:
        return self.dir / "logs" / f"{task_name(role, index)}.log"

    @property
    def combined_log(self) -> Path:
        """Every task's output in the order it came, each line behind its task's name."""
        return self.dir / "logs" / "all.log"

    def log_tail(self, role: str, index: int, max_bytes: int) -> list[str]:
        """The last lines of a task's log (up to max_bytes of it); none if it has no log yet."""
        text, cut = _read_end(self.log_path(role, index), max_bytes)
        lines = text.splitlines()
        return lines[1:] if cut else lines  # a cut first line is a part of one

    def last_attempt_tail(self, role: str, index: int, max_bytes: int = 4096) -> str:
        """The end of the task's latest attempt in its log (after its ATTEMPT_HEADER line)."""
        tail, _ = _read_end(self.log_path(role, index), max_bytes)
        if ATTEMPT_HEADER_START not in tail:
            return tail
        return tail.rsplit(ATTEMPT_HEADER_START, 1)[-1].partition("\n")[2]

    def pid_path(self, role: str, index: int) -> Path:
        return self.dir / "pids" / f"{task_name(role, index)}.pid"

    @property
    def metrics_path(self) -> Path:
        """{task: its Prometheus endpoint}, written by the supervisor once it chose the ports."""
        return self.dir / "metrics.json"

    def read_metrics(self) -> dict[str, str] | None:
        try:
            return json.loads(self.metrics_path.read_text())
        except (FileNotFoundError, ValueError):
            return None

    # --- spec ------------------------------------------------------------------------------

    @property
    def code_archive(self) -> Path:
        """`code:` as packed at submit: the detached supervisor's source, whatever the dir
        holds by then."""
        return self.dir / "code.tar.gz"

    @property
    def code_dir(self) -> Path:
        """`code:` unpacked, as the pods' init container unpacks it: the tasks' working dir."""
        return self.dir / "code"

    def prepare(self, spec: ClusterSpec, spec_hash: str) -> None:
        """Create logs/ and pids/ and record the spec and its hash (the plan's spec_hash: the code
        archive's digest included, which spec.json does not hold)."""
        for sub in ("logs", "pids"):
            private_dir(self.dir / sub)
        self.metrics_path.unlink(missing_ok=True)  # the ports of an earlier run
        self.spec_path.unlink(missing_ok=True)  # an earlier run's, maybe readable by others
        write_private(self.spec_path, json.dumps(spec.model_dump(mode="json", by_alias=True), indent=2) + "\n")
        (self.dir / SPEC_HASH_FILE).unlink(missing_ok=True)
        write_private(self.dir / SPEC_HASH_FILE, spec_hash + "\n")

    def recorded_spec_hash(self) -> str | None:
        try:
            return (self.dir / SPEC_HASH_FILE).read_text().strip()
        except FileNotFoundError:
            return None

    def read_spec(self) -> ClusterSpec:
        try:
            # a local run's spec: its tasks share this disk (spec.SHARED_DISK)
            return ClusterSpec.model_validate(json.loads(self.spec_path.read_text()), context={SHARED_DISK: True})
        except FileNotFoundError:
            raise ClusterNotFound(f"no local cluster {self.name!r} in {self.workdir}") from None

    def recorded_stop_grace(self) -> float:
        """The terminationGracePeriodSeconds of the spec the run recorded."""
        return float(self.read_spec().termination_grace_period_seconds)

    # --- one submit at a time --------------------------------------------------------------

    @property
    def submit_lock_path(self) -> Path:
        """Locked (fcntl) by the submit that prepares the run, holding its pid; never removed,
        so every submit locks the same file."""
        return self.dir / SUBMIT_LOCK_FILE

    @contextlib.contextmanager
    def submit_lock(self) -> Iterator[None]:
        """Held while a submit checks and starts the run: a second submit of the name
        meanwhile is refused (two would start two clusters in one dir)."""
        private_dir(self.workdir)
        private_dir(self.dir)
        with open(self.submit_lock_path, "a+", opener=private_opener) as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                holder = lock.read().strip() or "unknown"
                raise SubmitRefused(
                    f"local cluster {self.name!r} is being submitted by another launcher "
                    f"(pid {holder}, lock {self.submit_lock_path}); wait for that submit to "
                    "return, then see `status`"
                ) from None
            lock.truncate(0)
            lock.write(f"{os.getpid()}\n")
            lock.flush()
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    # --- status ----------------------------------------------------------------------------

    def has_status(self) -> bool:
        return self.status_path.exists()

    def read_status(self) -> dict:
        try:
            return json.loads(self.status_path.read_text())
        except FileNotFoundError:
            raise ClusterNotFound(f"no local cluster {self.name!r} in {self.workdir}") from None

    def write_status(self, record: dict) -> None:
        """Only for a cluster that exists (its spec recorded): never brings a deleted one's
        status back without its spec."""
        if not self.spec_path.exists():
            raise ClusterNotFound(
                f"local cluster {self.name!r} in {self.workdir} was deleted "
                "while its supervisor still ran; nothing recorded"
            )
        write_json(self.status_path, record)

    # --- pids ------------------------------------------------------------------------------

    def write_pid(self, role: str, index: int, pid: int) -> None:
        path = self.pid_path(role, index)
        private_dir(path.parent)
        write_private(path, f"{pid}\n")

    def read_pid(self, role: str, index: int) -> int | None:
        try:
            return int(self.pid_path(role, index).read_text())
        except (FileNotFoundError, ValueError):
            return None

    def remove_pid(self, role: str, index: int) -> None:
        self.pid_path(role, index).unlink(missing_ok=True)


def _checkpoint_in(directory: Path, name: str) -> tuple[int, str, float] | None:
    """(step, path, written at) of the checkpoint a file names, if it names one."""
    path = directory / name
    try:
        if name == progress.CHECKPOINT_STATE_FILE:
            newest = progress.state_file_checkpoint(path.read_text(errors="replace")[:65536])
            if newest is None or progress.checkpoint_step(newest) is None:
                return None
            index = directory / (newest + ".index")
            written = index.stat().st_mtime if index.exists() else path.stat().st_mtime
            return progress.checkpoint_step(newest), str(directory / newest), written
        if name.endswith(".index") and progress.checkpoint_step(name) is not None:
            return progress.checkpoint_step(name), str(path.with_suffix("")), path.stat().st_mtime
    except OSError:  # removed meanwhile (a CheckpointManager keeps a few), unreadable
        return None
    return None


SPEC_HASH_FILE = "spec.sha256"
SUBMIT_LOCK_FILE = "submit.lock"


def write_json(path: Path, data: dict) -> None:
    """Atomically: a reader sees the old record or the new one, never half of one."""
    temporary = path.with_suffix(".tmp")
    temporary.unlink(missing_ok=True)
    write_private(temporary, json.dumps(data, indent=2) + "\n")
    os.replace(temporary, path)


def _read_end(path: Path, max_bytes: int) -> tuple[str, bool]:
    """The last max_bytes of a file as text ("" if it does not exist), and whether that cut it."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(size - max_bytes, 0))
            return f.read().decode("utf-8", errors="replace"), size > max_bytes
    except FileNotFoundError:
        return "", False
