"""`code:` with --local: the archive the pods get, unpacked into the run's dir, first on the
tasks' PYTHONPATH and their working dir; a program module and a command from it run, importing
a sibling package."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from launcher.cluster_spec.loader import load_file

DEMO = Path(__file__).resolve().parents[2] / "code_demo" / "v1"


def _spec(tmp_path: Path, run: str) -> Path:
    shutil.copytree(DEMO, tmp_path / "src")
    path = tmp_path / "cluster.yaml"
    path.write_text(f"name: codelocal\nstrategy: mirrored\ncode: ./src\n{run}\nroles: {{chief: {{replicas: 1}}}}\n")
    return path


def _chief_log(workdir: Path, name: str) -> str:
    return "\n".join(p.read_text() for p in sorted((workdir / name).rglob("*.log")))


@pytest.mark.process
def test_program_module_from_the_code_dir(backend, workdir, tmp_path):
    spec = load_file(_spec(tmp_path, "program: {module: mytrain, args: [--steps, '3']}"))
    backend.submit(spec)
    assert backend.wait(spec.name) == 0
    assert "tfk8s-code-marker v1" in _chief_log(workdir, spec.name)


@pytest.mark.process
def test_command_runs_in_the_code_dir(backend, workdir, tmp_path):
    spec = load_file(_spec(tmp_path, "command: [python, run.py]"))
    backend.submit(spec)
    assert backend.wait(spec.name) == 0
    assert f"tfk8s-code-marker v1 cwd={workdir / spec.name / 'code'}" in _chief_log(workdir, spec.name)
