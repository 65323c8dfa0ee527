"""A local run's files are its user's alone: files 0600, dirs 0700, whatever the umask (the
spec's env values, secrets among them, are in spec.json; issue 61)."""

from __future__ import annotations

import os
import stat
import sys

from local_clusters import run_files

from launcher.cluster_spec.spec import ClusterSpec


def test_run_files_are_0600_and_dirs_0700(backend, workdir):
    previous = os.umask(0o022)
    try:
        spec = ClusterSpec.model_validate(
            {
                "name": "private",
                "strategy": "mirrored",
                "command": [sys.executable, "-c", "print('trained')"],
                "roles": {"chief": {"replicas": 1}},
                "env": {"API_TOKEN": "secret"},
            }
        )
        backend.submit(spec)
        assert backend.wait("private") == 0
    finally:
        os.umask(previous)
    run_dir = run_files(backend, "private").dir
    modes = {
        str(path.relative_to(workdir)): stat.S_IMODE(path.stat().st_mode) for path in [workdir, *workdir.rglob("*")]
    }
    assert "private/spec.json" in modes and "private/logs/chief-0.log" in modes, modes
    wrong = {path: oct(mode) for path, mode in modes.items() if mode != (0o700 if (workdir / path).is_dir() else 0o600)}
    assert wrong == {}, f"modes in {run_dir}"
