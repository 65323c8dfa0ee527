"""What several test tiers share, written once: where the repository and its examples are,
whether this run is CI, where helm is, waiting for a condition, and a tier's cluster released
when the tier ends.

Importable as `support` from every test: tests/conftest.py's directory is on sys.path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from pathlib import Path

import pytest

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


def assert_pod_security_restricted(pod_spec: dict) -> None:
    """What Pod Security `restricted` checks of a pod: non-root, RuntimeDefault seccomp, no
    privilege escalation, every capability dropped, and only its allowed volume types."""
    allowed_volumes = {
        *("configMap", "emptyDir", "persistentVolumeClaim", "secret"),
        *("projected", "downwardAPI", "csi", "ephemeral"),
    }
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert pod_spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in pod_spec["containers"] + pod_spec.get("initContainers", []):
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False, container["name"]
        assert sc["capabilities"]["drop"] == ["ALL"], container["name"]
    for volume in pod_spec.get("volumes", []):
        assert set(volume) - {"name"} <= allowed_volumes, volume


def skip_unless_ci(why: str) -> None:
    """Skip for a precondition a developer's cluster may lack (a reused cluster, another image);
    in CI, whose cluster is fresh and built here, the same precondition missing is a failure,
    so no test drops out of CI unseen."""
    if in_ci():
        pytest.fail(f"{why}, and CI is set: this test must run in CI", pytrace=False)
    pytest.skip(why)


# `scripts/setup.sh --toolchain-in-background` (CI's cold path) leaves the toolchain building
# while the tests start: the process tier needs none of it. What does waits here for it. The build
# holds an exclusive flock on toolchain.lock for its whole life (scripts/toolchain_background.sh;
# a foreground `scripts/setup.sh` holds it too); toolchain-background.exit says how a background
# build ended (`running`: it was killed).
TOOLCHAIN_LOCK, TOOLCHAIN_EXIT, TOOLCHAIN_LOG = (
    "toolchain.lock",
    "toolchain-background.exit",
    "logs/toolchain-background.log",
)


def wait_for_the_toolchain(cache: Path = CACHE) -> None:
    """Returns once no toolchain build holds `cache`'s lock (at once when none was started);
    fails the test if the background build that ran there failed."""
    lock, state, log = cache / TOOLCHAIN_LOCK, cache / TOOLCHAIN_EXIT, cache / TOOLCHAIN_LOG
    if not lock.is_file():
        return
    started = time.monotonic()
    with lock.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_SH)  # blocks while a build holds it exclusively
    if time.monotonic() - started > 1:
        print(f"[toolchain] waited {time.monotonic() - started:.0f}s for the toolchain build (log: {log})")
    code = state.read_text().strip() if state.is_file() else "0"  # none ran in the background
    if code != "0":
        said = "unknown: it was killed" if code == "running" else code
        tail = log.read_text()[-2000:] if log.is_file() else ""
        pytest.fail(f"the background toolchain build failed, exit {said} (log: {log}):\n{tail}", pytrace=False)


def find_helm() -> str | None:
    """$HELM, else helm on PATH, else the one tests/kind/toolchain.sh built (waited for when
    it is being built in the background)."""
    wait_for_the_toolchain()
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


class TierResource:
    """A tier's session resource (its kind cluster), deleted as soon as the tier's last test has
    torn down, not at the end of the session: the tiers after it then run without an idle
    control plane beside them (tests/conftest.py runs the tiers in order).

    The fixture returns `resource.open(context_manager)`; the tier's conftest takes its hooks
    from `hooks()`: `release_after(nextitem)` after each test's teardown, `close()` at the end.
    """

    def __init__(self, marker: str):
        self.marker = marker
        self._stack = contextlib.ExitStack()
        self._released = False

    def open(self, manager):
        if self._released:
            raise RuntimeError(
                f"the {self.marker} tier's cluster was already deleted: a "
                f"{self.marker} test was ordered after another tier's test "
                f"(tests/conftest.py sorts the tests by tier)"
            )
        return self._stack.enter_context(manager)

    def release_after(self, nextitem) -> None:
        if nextitem is None or nextitem.get_closest_marker(self.marker) is None:
            self.close()

    def close(self) -> None:
        self._released = True
        self._stack.close()

    def hooks(self):
        """(pytest_runtest_teardown, pytest_sessionfinish) for the tier's conftest."""

        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_teardown(item, nextitem):
            # after the test's own teardown (its namespace is deleted through the cluster)
            result = yield
            self.release_after(nextitem)
            return result

        def pytest_sessionfinish(session) -> None:
            self.close()

        return pytest_runtest_teardown, pytest_sessionfinish


# The suite's time budget, warm (toolchain cached), in minutes of each tier's own tests summed
# over both lanes; docs/development.md explains it. The run's wall clock is the longer lane's:
# kind alone in one, process + scale + unit + helm in the other.
TIER_BUDGET_MINUTES = {"kind": 34, "process": 22, "scale": 6, "unit": 4, "helm": 2}
# TensorFlow clusters the kind tier submits, summed from its tests' tf_trainings markers
# (tests/test_tier_budget.py); a new one joins an existing training or raises this on purpose.
KIND_TF_TRAININGS_BUDGET = 28
