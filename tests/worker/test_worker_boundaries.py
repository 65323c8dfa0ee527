"""The worker stands alone: `python -m worker` imports nothing of the launcher or its stack
(the worker image does not install pydantic, jinja2 or the kubernetes client), and its modules
stay small enough to read (plain processes and file reads, fast)."""

from __future__ import annotations

import os
import subprocess
import sys

from support import REPO as REPO_ROOT

# Top-level packages the worker must never import: the launcher, and what only it depends on.
LAUNCHER_ONLY_PACKAGES = ("launcher", "pydantic", "pydantic_core", "jinja2", "kubernetes")


def imported_modules(*args: str) -> list[str]:
    """Every module `python -X importtime -m worker ARGS` imports, from its stderr report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TFK8S_", "TF_CONFIG"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "worker", *args],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # Lines read "import time: <self us> | <cumulative us> | <indented module name>".
    return [
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    ]


def test_worker_cli_imports_nothing_of_the_launcher():
    modules = imported_modules("--help")
    assert "worker.args" in modules, "the importtime report was not parsed"
    forbidden = sorted(m for m in modules if m.split(".", 1)[0] in LAUNCHER_ONLY_PACKAGES)
    assert forbidden == []
