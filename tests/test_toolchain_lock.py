"""The background toolchain build (scripts/toolchain_background.sh) is waited for through a lock
it holds for its whole life, which a second setup beside it cannot erase: a `scripts/setup.sh
--python-only` run while it builds leaves the tests that need the toolchain waiting until it
ends, and its failure is said to them. A short fake build (TFK8S_TOOLCHAIN_SCRIPT) in a cache
dir of the test's own (TFK8S_CACHE) stands for the real one; a fake `python` on PATH for pip.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import REPO, wait_for_the_toolchain

# Builds until the test creates $RELEASE, then ends with $FAKE_EXIT.
FAKE_TOOLCHAIN = """\
echo "fake toolchain: building"
while [ ! -e "$RELEASE" ]; do sleep 0.1; done
echo "fake toolchain: done"
exit "${FAKE_EXIT:-0}"
"""
FAKE_PYTHON = """\
#!/usr/bin/env bash
echo "$*" >>"$(dirname "$0")/calls"
"""


class Waiter(threading.Thread):
    """wait_for_the_toolchain in a thread, as a test of the kind tier calls it: whether the
    build had been released when it returned, and what it raised."""

    def __init__(self, cache: Path, release: Path):
        super().__init__(daemon=True)
        self.cache, self.release = cache, release
        self.released_when_returned: bool | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            wait_for_the_toolchain(self.cache)
        except BaseException as exc:  # pytest.fail's Failed is a BaseException
            self.error = exc
        self.released_when_returned = self.release.exists()


@pytest.fixture
def setup_env(tmp_path) -> Iterator[dict[str, str]]:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python").write_text(FAKE_PYTHON)
    (fake_bin / "python").chmod(0o755)
    (tmp_path / "toolchain.sh").write_text(FAKE_TOOLCHAIN)
    yield {
        **os.environ,
        "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}",
        "TFK8S_CACHE": str(tmp_path / "cache"),
        "TFK8S_TOOLCHAIN_SCRIPT": str(tmp_path / "toolchain.sh"),
        "RELEASE": str(tmp_path / "release"),
    }
    (tmp_path / "release").touch()  # a failed test's fake build ends too


def start_background_build(env: dict[str, str]) -> None:
    r = subprocess.run(
        ["bash", "scripts/toolchain_background.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "toolchain building in the background" in r.stdout, r


def test_python_only_setup_beside_a_background_build_leaves_the_tests_waiting(setup_env, tmp_path):
    cache, release = Path(setup_env["TFK8S_CACHE"]), Path(setup_env["RELEASE"])
    start_background_build(setup_env)
    second = subprocess.run(
        ["bash", "scripts/setup.sh", "--python-only"], cwd=REPO, env=setup_env, capture_output=True, text=True
    )
    assert second.returncode == 0, second
    assert "-m pip install" in (tmp_path / "bin" / "calls").read_text()  # it ran, with the fake python
    waiter = Waiter(cache, release)
    waiter.start()
    waiter.join(3)  # it would have returned at once had the second setup erased what it waits on
    assert waiter.is_alive(), f"the waiter returned while the build ran (error: {waiter.error})"
    release.touch()
    waiter.join(60)
    assert not waiter.is_alive() and waiter.error is None, waiter.error
    assert waiter.released_when_returned
    assert (cache / "toolchain-background.exit").read_text().strip() == "0"


def test_a_failed_background_build_fails_its_waiter_with_its_log(setup_env):
    cache, release = Path(setup_env["TFK8S_CACHE"]), Path(setup_env["RELEASE"])
    start_background_build({**setup_env, "FAKE_EXIT": "3"})
    waiter = Waiter(cache, release)
    waiter.start()
    release.touch()
    waiter.join(60)
    assert not waiter.is_alive() and waiter.released_when_returned
    message = str(waiter.error)
    assert "the background toolchain build failed, exit 3" in message and "fake toolchain: done" in message, message


def test_no_build_started_is_no_wait(tmp_path):
    wait_for_the_toolchain(tmp_path)  # no lock file: returns at once, fails nothing
