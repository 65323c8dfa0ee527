"""The README and docs/ show what runs: every command block is run by a test, or says why not.

A runnable block (sh, bash, python) is preceded by one of
    <!-- tested: tests/<file>.py::<test> -->   a test that runs it (or the same commands)
    <!-- not run: <why> -->                    e.g. it needs a cluster a reader brings
Every yaml block that is a whole spec (it has `name:` and `strategy:`) loads as one.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from launcher.cluster_spec.loader import load_text
from scripts import spec_reference as reference

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "charts/tfk8s/README.md"]
RUNNABLE = {"sh", "bash", "python"}
MARKER = re.compile(r"<!-- (tested: (?P<test>\S+)|not run: (?P<why>.+?)) -->")


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence
    language: str
    text: str
    marker: str  # the line before the fence

    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    found, start = [], None
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            if start is None:
                start, language = number, line[3:].strip()
            else:
                marker = lines[start - 2] if start >= 2 else ""
                found.append(Block(page, start, language, "\n".join(lines[start : number - 1]) + "\n", marker))
                start = None
    return found


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page)]


def readme_block(language: str, containing: str) -> Block:
    [block] = [b for b in blocks(REPO / "README.md") if b.language == language and containing in b.text]
    return block


def test_every_command_block_is_tested_or_says_why_not():
    problems = []
    for block in all_blocks():
        if block.language not in RUNNABLE:
            continue
        marker = MARKER.fullmatch(block.marker.strip())
        if marker is None:
            problems.append(
                f"{block.where()}: a {block.language} block with no "
                f"'<!-- tested: tests/...::test -->' or '<!-- not run: why -->' line "
                f"before it"
            )
        elif marker["test"]:
            path, _, name = marker["test"].partition("::")
            test_file = REPO / path
            if not test_file.is_file() or f"def {name}(" not in test_file.read_text():
                problems.append(f"{block.where()}: {marker['test']}: no such test")
    assert not problems, "\n".join(problems)


def test_the_marker_rule_can_fail(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text(
        "```sh\nls\n```\n<!-- tested: tests/test_docs.py::no_such_test -->\n"
        "```python\nprint()\n```\n<!-- not run: a fragment -->\n```bash\nx\n```\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PAGES", [page])
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    with pytest.raises(AssertionError) as failed:
        test_every_command_block_is_tested_or_says_why_not()
    assert "page.md:1: a sh block with no" in str(failed.value)
    assert "page.md:5: tests/test_docs.py::no_such_test: no such test" in str(failed.value)
    assert "page.md:9" not in str(failed.value)


def test_the_spec_reference_is_the_models_descriptions():
    """docs/spec.md's key table is generated from the model (scripts/gen_spec_reference.py),
    and every key has its meaning written down."""
    doc = (REPO / "docs" / "spec.md").read_text()
    assert reference.BEGIN in doc and reference.END in doc
    assert reference.replace_in(doc) == doc, "stale: python scripts/gen_spec_reference.py --write"
    undescribed = [key for key, _, meaning in reference.rows() if not meaning]
    assert undescribed == [], f"give these fields a description: {undescribed}"


def test_every_whole_spec_in_the_docs_loads():
    specs = [
        b
        for b in all_blocks()
        if b.language == "yaml" and re.search(r"^name:", b.text, re.M) and re.search(r"^strategy:", b.text, re.M)
    ]
    assert specs, "the README shows a spec"
    for block in specs:
        spec = load_text(block.text, filename=block.where())
        assert spec.name == yaml.safe_load(block.text)["name"]


@pytest.mark.process
def test_the_readme_python_api_example_runs_as_shown(tmp_path):
    """The README's Python API example, run as a user would paste it, in a directory of its own:
    the refused spec's line, then a PS training with an evaluator that ends Succeeded."""
    example = readme_block("python", "TFK8sClient(")
    script = tmp_path / "example.py"
    script.write_text(example.text)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**_env(), "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.startswith("<dict>: strategy: Input should be 'parameter_server'"), out[:500]
    assert re.search(r"^Succeeded 0 step 400/400 \(100%\)", out, re.M), out[-2000:]
    assert "final eval ckpt-400: accuracy" in out
    assert '"event": "exit"' in out
    assert not (tmp_path / ".tfk8s" / "demo" / "status.json").exists()  # deleted; model dir kept
    assert (tmp_path / ".tfk8s" / "demo" / "model").is_dir()


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("TFK8S_")}
