"""Every generated file is current: one list (scripts/generate.py), one check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scripts import generate

REPO = Path(__file__).resolve().parents[1]


def test_every_generated_file_is_current():
    stale = [str(path.relative_to(REPO)) for path in generate.stale_files()]
    assert not stale, f"stale: {stale}; review the change and run {generate.COMMAND}"


def test_it_covers_the_chart_its_readme_the_spec_reference_monitoring_and_one_golden_per_example():
    files = {str(path.relative_to(REPO)) for path in generate.expected_files()}
    examples = sorted(p.name for p in (REPO / "examples").glob("*.yaml"))
    assert {
        "charts/tfk8s/values.schema.json",
        "charts/tfk8s/templates/_contract.tpl",
        "charts/tfk8s/values.yaml",
        "charts/tfk8s/README.md",
        "docs/spec.md",
        "docs/tfk8s-dashboard.json",
        "docs/tfk8s-alerts.yaml",
    } | {f"tests/launcher/render/golden/{name}" for name in examples} == files


def test_goldens_name_the_pod_scripts_by_digest_and_refuse_a_changed_copy():
    from launcher.cluster_spec.loader import load_file
    from launcher.plan.plan import plan
    from launcher.render import render

    objects = render.render(plan(load_file(REPO / "examples" / "ps.yaml")))
    text = generate.golden_form(objects)
    assert "supervise.py: sha256:" in text and "def run(command" not in text
    [config_map] = [o for o in objects if o["kind"] == "ConfigMap" and "supervise.py" in o.get("data", {})]
    config_map["data"]["supervise.py"] += "# edited\n"
    try:
        generate.golden_form(objects)
    except ValueError as exc:
        assert "supervise.py is not launcher/pod/supervise.py" in str(exc)
    else:
        raise AssertionError("a ConfigMap script that differs from launcher/pod/ must not be named by its digest")


def test_check_runs_from_anywhere_and_names_each_stale_file(tmp_path):
    """From another directory, on a copy of the tree with one golden edited: exit 1 naming it."""
    copy = tmp_path / "repo"
    files = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard"], check=True, capture_output=True, text=True
    ).stdout.split()
    for name in files:
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            (copy / name).write_bytes(source.read_bytes())
        elif source.is_symlink():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            (copy / name).symlink_to(source.readlink())
    golden = copy / "tests" / "launcher" / "render" / "golden" / "mwms.yaml"
    golden.write_text(golden.read_text() + "# edited\n")
    run = subprocess.run(
        [sys.executable, str(copy / "scripts" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert run.returncode == 1, run.stderr
    assert run.stderr.strip() == (
        "tests/launcher/render/golden/mwms.yaml is stale: run python scripts/generate.py --write"
    ), run.stderr
