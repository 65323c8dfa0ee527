"""docs/sweeps.md's sweep.yaml loads as shown."""

from __future__ import annotations

import re
from pathlib import Path

from launcher.sweep import load

DOC = Path(__file__).resolve().parents[3] / "docs" / "sweeps.md"


def test_the_docs_sweep_yaml_loads():
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    sweeps = [b for b in blocks if b.startswith("name:") and "\ncluster:" in b]
    assert len(sweeps) == 1
    loaded = load.load_text(sweeps[0], "docs/sweeps.md")
    assert loaded.sweep.algorithm == "tpe" and [p.name for p in loaded.sweep.parameters] == ["lr", "batch", "steps"]
