"""What `pip install` ships: the launcher, the worker, the templates and the Helm chart, found as
package data (importlib.resources), so an installed launcher works outside a checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = ["pyproject.toml", "README.md", "launcher", "worker", "manifests", "charts"]
CHART = REPO / "charts" / "tfk8s"


def build_wheel(tmp_path: Path) -> Path:
    """A wheel of a copy of the checkout (the chart's symlinks copied as files, as a source
    distribution would carry them), built with the setuptools installed here."""
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / name, source / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(source),
            "-w",
            str(tmp_path / "dist"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = (tmp_path / "dist").glob("tfk8s-*.whl")
    return wheel


def test_the_wheel_ships_the_chart_and_the_installed_launcher_finds_it(tmp_path):
    chart_files = sorted(str(p.relative_to(CHART)) for p in CHART.rglob("*") if p.is_file())
    wheel = build_wheel(tmp_path)
    shipped = {
        name.removeprefix("charts/tfk8s/")
        for name in zipfile.ZipFile(wheel).namelist()
        if name.startswith("charts/tfk8s/")
    }
    assert sorted(shipped) == chart_files

    installed = tmp_path / "installed"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(installed), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = "from launcher.chart import helm_release; print('\\n'.join(n for n, _ in helm_release.chart_files()))"
    found = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,  # outside the checkout: only the installed copy can be found
        env={"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.returncode == 0, found.stderr[-2000:]
    assert found.stdout.split() == chart_files
