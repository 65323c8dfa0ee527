#!/usr/bin/env python3
"""Every file the repository generates from the launcher's own rules, written or checked at once
(a developer tool; tests/test_generated.py fails while one is stale):

  charts/tfk8s/values.schema.json, templates/_contract.tpl, values.yaml's replica table
                                        scripts/gen_chart.py (the chart's share of the rules)
  charts/tfk8s/README.md's values table scripts/chart_values_doc.py (values.yaml's `# --` comments)
  docs/spec.md's key table              scripts/spec_reference.py (the model's descriptions)
  docs/tfk8s-dashboard.json, docs/tfk8s-alerts.yaml
                                        launcher/monitoring (what `launcher monitoring` prints;
                                        the chart links to them)
  tests/launcher/render/golden/*.yaml   `render` of each examples/*.yaml, the pod scripts
                                        (launcher/pod/*.py) named by digest: review their diff

    python scripts/generate.py --write   # update what is stale, naming each file
    python scripts/generate.py --check   # exit 1 naming each stale file
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from launcher.cluster_spec.loader import load_file  # noqa: E402
from launcher.monitoring import alerts, dashboard  # noqa: E402
from launcher.plan.plan import plan  # noqa: E402
from launcher.render import render  # noqa: E402
from scripts import chart_values_doc, gen_chart  # noqa: E402
from scripts import spec_reference as reference  # noqa: E402

COMMAND = "python scripts/generate.py --write"
EXAMPLES_DIR = REPO / "examples"
GOLDEN_DIR = REPO / "tests" / "launcher" / "render" / "golden"
POD_SCRIPTS_DIR = REPO / "launcher" / "pod"
SPEC_DOC = REPO / "docs" / "spec.md"
CHART_README = REPO / "charts" / "tfk8s" / "README.md"


def golden_form(objects: list[dict]) -> str:
    """The render as YAML, each pod script (launcher/pod/*.py, shipped in a ConfigMap) named by
    its digest: its text is tested where it lives, and a golden shows only that it changed."""
    objects = copy.deepcopy(objects)
    for obj in objects:
        for key, text in (obj.get("data") or {}).items() if obj["kind"] == "ConfigMap" else ():
            script = POD_SCRIPTS_DIR / key
            if key.endswith(".py") and script.is_file():
                if text != script.read_text():
                    raise ValueError(f"the ConfigMap's {key} is not launcher/pod/{key} as it is")
                obj["data"][key] = f"sha256:{hashlib.sha256(text.encode()).hexdigest()[:16]} of launcher/pod/{key}"
    return render.to_yaml(objects)


def goldens() -> dict[Path, str]:
    examples = sorted(EXAMPLES_DIR.glob("*.yaml"))
    if not examples:  # nothing to render would pass by checking nothing
        raise FileNotFoundError(f"no example specs in {EXAMPLES_DIR}")
    return {GOLDEN_DIR / example.name: golden_form(render.render(plan(load_file(example)))) for example in examples}


def expected_files() -> dict[Path, str]:
    """Every generated file and the text it must have."""
    chart = gen_chart.expected_files()
    return {
        **chart,
        CHART_README: chart_values_doc.replace_table(CHART_README.read_text(), chart[gen_chart.VALUES_FILE]),
        SPEC_DOC: reference.replace_in(SPEC_DOC.read_text()),
        REPO / "docs" / "tfk8s-dashboard.json": dashboard.dashboard_json(),
        REPO / "docs" / "tfk8s-alerts.yaml": alerts.rules_yaml(alerts.Thresholds()),
        **goldens(),
    }


def orphans() -> list[Path]:
    """Goldens of examples that no longer exist."""
    return sorted(set(GOLDEN_DIR.glob("*.yaml")) - set(goldens()))


def stale_files() -> list[Path]:
    stale = [path for path, text in expected_files().items() if not path.exists() or path.read_text() != text]
    return stale + orphans()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/generate.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="update every stale generated file")
    group.add_argument("--check", action="store_true", help="exit 1 when a generated file is stale")
    args = parser.parse_args(argv)
    if args.write:
        for path, text in expected_files().items():
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)
        for path in orphans():
            path.unlink()
            print(f"removed {path.relative_to(REPO)} (its example is gone)", file=sys.stderr)
        return 0
    stale = stale_files()
    for path in stale:
        print(f"{path.relative_to(REPO)} is stale: run {COMMAND}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
