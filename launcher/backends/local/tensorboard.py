"""`tensorboard NAME --local`: TensorBoard as a child process on the run's model dir.

The model dir is `<workdir>/<name>/model` (or the spec's gs:// dir), the one the tasks were
given as TFK8S_MODEL_DIR; the built-in evaluator writes its summaries under it. TensorBoard
listens on 127.0.0.1 only and writes its output to `<workdir>/<name>/tensorboard.log`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

from launcher.backends.local.files import private_opener
from launcher.errors import LauncherError
from launcher.render.tensorboard import local_listener

START_TIMEOUT_SECONDS = 120.0
STOP_GRACE_SECONDS = 10.0


@contextlib.contextmanager
def serve(model_dir: str, port: int, log_path: Path) -> Iterator[str]:
    """Run TensorBoard on `model_dir` at 127.0.0.1:port; yields its URL while it runs."""
    if importlib.util.find_spec("tensorboard") is None:
        raise LauncherError(
            f"TensorBoard is not installed in this Python ({sys.executable}): "
            "pip install 'tensorboard>=2.21,<2.22' (the same minor as TensorFlow)"
        )
    if "://" not in model_dir and not Path(model_dir).is_dir():
        raise LauncherError(
            f"model dir {model_dir} does not exist: the run has not written anything yet (has it started?)"
        )
    # Free now, else the readiness check below could be answered by someone else.
    local_listener(port).close()
    url = f"http://127.0.0.1:{port}/"
    with open(log_path, "ab", opener=private_opener) as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tensorboard.main",
                "--logdir",
                model_dir,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # Ctrl-C reaches us only; we stop it in order
    try:
        _wait_serving(process, url, log_path)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_serving(process: subprocess.Popen, url: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
            raise LauncherError(
                f"TensorBoard exited with code {process.returncode}: " + " / ".join(tail) + f" (full log: {log_path})"
            )
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise LauncherError(f"TensorBoard not serving at {url} after {START_TIMEOUT_SECONDS:.0f}s (log: {log_path})")
