"""The chart ships `code:` like the launcher: codeArchive through --set-file (a base64 file with
its trailing newline, as `python -m launcher code-archive` prints it) gives the same objects as
render, and `code:` without codeArchive is refused with the fix."""

from __future__ import annotations

import subprocess
import sys

import yaml
from support import REPO
from test_helm_parity import CHART, SPECS_DIR, assert_same_objects, chart_refusal, helm  # noqa: F401 (helm: the fixture)

from launcher.chart import chart_values
from launcher.cluster_spec.loader import load_file, pack_code
from launcher.plan.plan import plan
from launcher.render import render
from scripts import chart_schema


def test_set_file_code_archive_equals_render(helm, tmp_path):  # noqa: F811
    spec = load_file(SPECS_DIR / "code-ps-jobset.yaml")
    code = pack_code(spec)
    values = chart_values.helm_values(spec, code)
    values.pop("codeArchive")
    b64 = subprocess.run(
        [sys.executable, "-m", "launcher", "code-archive", str(SPECS_DIR / "code-src"), "--exclude", "*.md"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    assert b64.endswith("\n")
    (tmp_path / "code.b64").write_text(b64)
    r = helm.run(
        "template",
        spec.name,
        str(CHART),
        "--namespace",
        spec.namespace,
        "-f",
        str(helm.values_file(values)),
        "--set-file",
        f"codeArchive={tmp_path / 'code.b64'}",
    )
    assert r.returncode == 0, r.stderr
    assert_same_objects(render.render(plan(spec, code)), [d for d in yaml.safe_load_all(r.stdout) if d])


def test_code_without_archive_is_refused(helm):  # noqa: F811
    spec = load_file(SPECS_DIR / "code-byo-jobs.yaml")
    values = chart_values.helm_values(spec, pack_code(spec))
    values.pop("codeArchive")
    values["code"] = "./src"
    message = chart_refusal(helm.template("codebyo", "default", values))
    assert message.startswith("code: the chart cannot read a local directory; set codeArchive")
    assert message == f"code: {chart_schema.CODE_NEEDS_ARCHIVE}"
