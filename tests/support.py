"""What several test tiers share, written once: where the repository and its examples are,
whether this run is CI, where helm is, and waiting for a condition.

Importable as `support` from every test: tests/conftest.py's directory is on sys.path.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = REPO / "examples"
CACHE = Path(os.environ.get("TFK8S_CACHE") or Path.home() / ".cache" / "tfk8s")


def example_specs() -> list[Path]:
    """examples/*.yaml; an error when there are none (an empty parametrize tests nothing)."""
    found = sorted(EXAMPLES_DIR.glob("*.yaml"))
    if not found:
        raise FileNotFoundError(f"no example specs in {EXAMPLES_DIR}")
    return found


def in_ci() -> bool:
    """CI=1/true: a missing tool (Docker, helm) is a failure, not a skip."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def find_helm() -> str | None:
    """$HELM, else helm on PATH, else the one tests/kind/toolchain.sh built."""
    if os.environ.get("HELM"):
        return os.environ["HELM"]
    if shutil.which("helm"):
        return shutil.which("helm")
    candidate = CACHE / "bin" / "helm"
    return str(candidate) if os.access(candidate, os.X_OK) else None


def wait_until(condition, timeout: float, what: str, interval: float = 0.2):
    """condition()'s first truthy value; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
