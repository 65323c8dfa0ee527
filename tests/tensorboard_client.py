"""Drive `python -m launcher tensorboard` as a user does: start it, read the URL it prints, ask
TensorBoard's HTTP API for the evaluator's scalars, stop it with Ctrl-C (SIGINT)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from support import REPO

# The built-in evaluator writes its summaries to <model dir>/eval/tensorboard (worker/model_dir/layout.py).
EVAL_RUN = "eval/tensorboard"


def _ctrl_c_reaches_it() -> None:
    # A test run started in the background (`nohup pytest &`) ignores SIGINT, and a child
    # inherits that: its Python would then never raise KeyboardInterrupt, and Ctrl-C would
    # hang the test (it did twice). The user's terminal gives it the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class TensorBoardSession:
    def __init__(self, args: list[str], log_path: Path, start_timeout: float):
        """`python -m launcher tensorboard *args`; returns once it printed its URL."""
        self.log_path = log_path
        self.log = log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "launcher", "tensorboard", *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            preexec_fn=_ctrl_c_reaches_it,
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(start_timeout)
        if not lines or not lines[0].strip():
            self.process.kill()
            raise AssertionError(
                f"tensorboard printed no URL within {start_timeout}s (rc="
                f"{self.process.poll()}): {log_path.read_text()[-3000:]}"
            )
        self.line = lines[0].strip()
        self.url = next(word for word in self.line.split() if word.startswith("http://"))

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=30) as response:
            assert response.status == 200
            return response.read().decode()

    def eval_scalars(self, timeout: float) -> dict:
        """The evaluation run's tags and accuracy points, once TensorBoard has loaded them
        (it scans the logdir in the background after it starts). Raw response texts too."""
        deadline = time.monotonic() + timeout
        while True:
            runs_text = self.get("/data/runs")
            tags_text = self.get("/data/plugin/scalars/tags")
            tags = json.loads(tags_text)
            if EVAL_RUN in json.loads(runs_text) and "accuracy" in tags.get(EVAL_RUN, {}):
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no {EVAL_RUN} run with accuracy after {timeout}s: runs {runs_text}, tags {tags_text}"
                )
            time.sleep(1.0)
        query = urllib.parse.urlencode({"run": EVAL_RUN, "tag": "accuracy"})
        points_text = self.get(f"/data/plugin/scalars/scalars?{query}")
        return {
            "runs_text": runs_text,
            "tags_text": tags_text,
            "tags": tags[EVAL_RUN],
            "points_text": points_text,
            "points": json.loads(points_text),
        }

    def interrupt(self, timeout: float) -> int:
        """Ctrl-C; the exit code once it has cleaned up."""
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"still running {timeout:.0f} s after Ctrl-C; its output:\n{self.output()[-3000:]}"
            ) from None
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self.log.close()

    def output(self) -> str:
        return self.log_path.read_text()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def connection_refused(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=5).close()
        return False
    except urllib.error.URLError as exc:
        return isinstance(exc.reason, ConnectionRefusedError)
