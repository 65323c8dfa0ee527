"""How big a Helm release of charts/tfk8s gets, so `render --helm-values` and
`python -m launcher code-archive` refuse in one line what Helm would refuse with a Secret error.

Helm keeps every release in a Secret `sh.helm.release.v1.<name>.v<N>` whose one value is
base64(gzip(JSON of the release)): the chart's files, the user's values and the rendered
manifest. A Secret holds at most 1 MiB (helm/helm#9788, #7126). `codeArchive` is in the
release twice, in the values and in the rendered ConfigMap, as base64 of a gzip archive, which
gzip cannot shrink much: measured on kind, a 300 KiB incompressible archive installed, 450 KiB
and 600 KiB failed with `data: Too long: may not be more than 1048576 bytes`. The estimate
builds the same JSON and compresses it the same way; MARGIN covers the fields it leaves out.
"""

from __future__ import annotations

import base64
import gzip
import json
from importlib import resources
from typing import Iterator

from launcher.errors import LauncherError

SECRET_LIMIT = 1024 * 1024  # bytes of a Secret's data
MARGIN = 16 * 1024  # release metadata, hooks, info: a few KiB in practice
CHART_PACKAGE, CHART_NAME = "charts", "tfk8s"  # charts/tfk8s/, package data (pyproject.toml)


def _files_under(folder: resources.abc.Traversable, prefix: str = "") -> Iterator[tuple[str, bytes]]:
    for entry in folder.iterdir():
        if entry.name == "__pycache__":  # pip byte-compiles the pod scripts in files/ on install
            continue
        if entry.is_dir():
            yield from _files_under(entry, f"{prefix}{entry.name}/")
        else:
            yield f"{prefix}{entry.name}", entry.read_bytes()


def chart_files() -> list[tuple[str, bytes]]:
    """The chart's files (name relative to the chart, content), from the installed package or the
    checkout alike."""
    chart = resources.files(CHART_PACKAGE).joinpath(CHART_NAME)
    if not chart.is_dir():
        raise LauncherError(
            f"the Helm chart is missing: no {CHART_PACKAGE}/{CHART_NAME}/ in the installed package; "
            "reinstall tfk8s (pip install .) from a checkout that has charts/tfk8s/"
        )
    return sorted(_files_under(chart))


def _chart_files() -> list[dict]:
    return [{"name": name, "data": base64.b64encode(data).decode()} for name, data in chart_files()]


def estimated_bytes(values: dict, manifest: str) -> int:
    """The size of the release Secret's data for these values and this rendered manifest."""
    release = {"chart": {"files": _chart_files()}, "config": values, "manifest": manifest}
    packed = gzip.compress(json.dumps(release).encode(), compresslevel=9)
    return len(base64.b64encode(packed)) + MARGIN


class TooLargeForHelm(LauncherError):
    exit_code = 2  # like a spec error: the same input fails alike


def check(values: dict, manifest: str, what: str) -> int:
    """The estimate; TooLargeForHelm, saying the limit and the ways out, when over it."""
    size = estimated_bytes(values, manifest)
    if size > SECRET_LIMIT:
        raise TooLargeForHelm(
            f"{what} makes a Helm release of about {size / 1024:.0f} KiB, over the 1024 KiB a "
            "Secret holds, where Helm keeps each release (the archive is in it twice: the values "
            "and the rendered ConfigMap; helm/helm#9788): submit it with `python -m launcher "
            "submit`, which keeps no release, or make the code dir smaller (code.exclude, a "
            ".tfk8signore)"
        )
    return size


def check_archive(archive: bytes, what: str) -> int:
    """For `python -m launcher code-archive` (an archive for `--set-file codeArchive=`): the
    chart's release with that archive in its values and in its ConfigMap."""
    encoded = base64.b64encode(archive).decode()
    return check({"codeArchive": encoded}, f"binaryData:\n  code.tar.gz: {encoded}\n", what)
