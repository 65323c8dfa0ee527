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


# Writes into its working dir, the code copy, after importing a module of it (whose bytecode
# cache Python writes there too, and a pod's Python skips silently).
WRITES_INTO_ITS_CODE = """\
import pathlib
import helper
try:
    pathlib.Path("written.txt").write_text("x")
    print("wrote written.txt", flush=True)
except PermissionError as exc:
    print("refused:", repr(exc), flush=True)
"""


def test_the_code_copy_is_read_only_as_a_pods_and_a_write_of_root_is_named(backend, workdir, tmp_path):
    """A pod mounts /opt/tfk8s/code read-only; the run's copy loses every write bit: a write
    fails with PermissionError as in the pod, except for root (file modes do not stop it), whose
    write is named after the run. Before: the copy was writable and nothing was said."""
    from launcher.cluster_spec.loader import load_text

    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(WRITES_INTO_ITS_CODE)
    (code / "helper.py").write_text("")
    spec = load_text(
        f"name: rocode\nstrategy: mirrored\ncode: code\ncommand: [{sys.executable}, train.py]\n"
        "roles: {chief: {replicas: 1}}\n",
        base_dir=tmp_path,
        shared_disk=True,
    )
    backend.submit(spec)
    assert backend.wait("rocode") == 0
    files = run_files(backend, "rocode")
    writable = [
        str(path)
        for path in [files.code_dir, *files.code_dir.rglob("*")]
        if "__pycache__" not in path.parts and path.name != "written.txt" and path.stat().st_mode & 0o222
    ]
    assert writable == [], writable
    log = files.log_path("chief", 0).read_text()
    said = (tmp_path / "cluster-output.log").read_text()
    if os.geteuid() == 0:  # file modes do not stop root: the write happened, and is named
        assert "wrote written.txt" in log, log
        assert (
            f"note: the program wrote into its code dir {files.code_dir} (written.txt (new)), which only root "
            "can here: a pod mounts its code dir /opt/tfk8s/code read-only, where this write fails"
        ) in said, said
    else:
        assert "refused: PermissionError(13, 'Permission denied')" in log, log
        assert "wrote into its code dir" not in said, said
    backend.delete("rocode")  # the read-only copy goes too
    assert not files.code_dir.exists()


def test_code_changes_name_new_changed_and_removed_files_and_not_the_bytecode_cache(tmp_path):
    from launcher.backends.local.files import code_changes, tree_state

    (tmp_path / "pkg").mkdir()
    for name in ("kept.py", "edited.py", "gone.py", "pkg/mod.py"):
        (tmp_path / name).write_text("1")
    before = tree_state(tmp_path)
    (tmp_path / "edited.py").write_text("22")
    (tmp_path / "gone.py").unlink()
    (tmp_path / "pkg" / "out.txt").write_text("")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_text("")
    assert code_changes(before, tree_state(tmp_path)) == [
        "edited.py (changed)",
        "gone.py (removed)",
        "pkg/out.txt (new)",
    ]
