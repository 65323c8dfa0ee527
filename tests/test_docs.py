"""The README and docs/ show what runs: every command block is run by a test, or says why not.

A runnable block (sh, bash, python) is preceded by one of
    <!-- tested: tests/<file>.py::<test> -->   a test that runs it (or the same commands)
    <!-- not run: <why> -->                    e.g. it needs a cluster a reader brings
Every yaml block that is a whole spec (it has `name:` and `strategy:`) loads as one.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from launcher.cluster_spec.loader import load_text
from launcher.status.failure_reasons import OUR_EXIT_CODES
from scripts import spec_reference as reference
from worker import contract

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


def test_every_spec_key_has_its_meaning_written_down():
    """docs/spec.md's key table is generated from the model's descriptions (scripts/generate.py;
    tests/test_generated.py checks it is current)."""
    doc = (REPO / "docs" / "spec.md").read_text()
    assert reference.BEGIN in doc and reference.END in doc
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


# A repository path a reader may open: a top-level folder of ours, then a file name with a suffix.
REPO_PATH = re.compile(
    r"(?<![\w/.$-])((?:bench|charts|docs|examples|launcher|manifests|scripts|tests|worker)/[\w./-]*\w"
    r"\.(?:j2|json|md|py|sh|tpl|txt|ya?ml))(?![\w/])"
)


def missing_paths(pages: list[Path], sources: list[Path]) -> list[str]:
    """`file:line: path` for every repository path that a page or a source file (docstrings and
    comments included) names and that does not exist."""
    missing = []
    for where in [*pages, *sources]:
        for number, line in enumerate(where.read_text().splitlines(), 1):
            for found in REPO_PATH.finditer(line):
                if not (REPO / found[1]).exists():
                    missing.append(f"{where.relative_to(REPO)}:{number}: {found[1]}")
    return missing


def test_every_repository_path_the_docs_and_docstrings_name_exists():
    sources = sorted(p for top in ("launcher", "worker", "scripts", "bench") for p in (REPO / top).rglob("*.py"))
    assert missing_paths(PAGES, sources) == []


def test_a_missing_path_is_named_with_its_line(tmp_path, monkeypatch):
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "ps.yaml").write_text("")
    source = tmp_path / "client.py"
    source.write_text('"""\n    client.submit("examples/ps.yaml")\n    client.submit("examples/mnist-ps.yaml")\n"""\n')
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert missing_paths([], [source]) == ["client.py:3: examples/mnist-ps.yaml"]


EXIT_CODES_MARKER = "<!-- exit codes: checked against worker/contract.py by tests/test_docs.py -->"


def documented_exit_codes(page: Path) -> dict[str, int]:
    """{constant: exit} of the table after EXIT_CODES_MARKER."""
    lines = page.read_text().splitlines()
    start = lines.index(EXIT_CODES_MARKER) + 3  # the header and its rule
    rows = {}
    for line in itertools.takewhile(lambda line: line.startswith("|"), lines[start:]):
        code, constant = (cell.strip() for cell in line.strip("|").split("|")[:2])
        rows[constant.strip("`")] = int(code)
    return rows


def test_the_built_in_workers_exit_code_table_is_worker_contracts():
    """docs/lifecycle.md's table of the built-in worker's exit codes, apart from a program's
    own, has one row per EXIT_ constant of worker/contract.py, with its value."""
    ours = {name: value for name, value in vars(contract).items() if name.startswith("EXIT_")}
    assert documented_exit_codes(REPO / "docs" / "lifecycle.md") == ours
    # and the codes a program's exit is said to be its own for are the ones the page lists
    runs: list[tuple[int, int]] = []  # (first, last) of consecutive codes
    for code in sorted(OUR_EXIT_CODES):
        if runs and code == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], code)
        else:
            runs.append((code, code))
    listed = ", ".join(f"{a}-{b}" if b - a > 1 else (f"{a}, {b}" if b > a else f"{a}") for a, b in runs)
    assert f"that is one of ours ({listed})" in " ".join((REPO / "docs" / "lifecycle.md").read_text().split())


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


# --- the docs are a reference: short pages, current names --------------------------------------

MAX_PAGE_LINES = 250
MAX_CELL_CHARACTERS = 500  # a table cell longer than this is a paragraph: write it as one
TOP_DIRS = ("launcher", "worker", "docs", "examples", "tests", "scripts", "charts", "bench", "manifests", ".ci")
CITED_PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(re.escape(d) for d in TOP_DIRS)})/[\w./-]*[\w/])")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# `docs/benchmarks.md`, "Whole CI run" or README "Install": a section cited by its heading
CITED_SECTION = re.compile(r"(docs/[\w-]+\.md|README)`?'?s?,? (?:section )?\"([^\"]+)\"")
SOURCE_DIRS = ("launcher", "worker", "scripts", "bench", "manifests", "charts")
SOURCE_SUFFIXES = {".py", ".j2", ".tpl", ".yaml", ".sh"}
# in sources, a cited doc page or module (examples/*.yaml citations have their own test)
SOURCE_CITED_PATH = re.compile(
    r"(?<![\w./-])((?:launcher|worker|docs|manifests|charts|scripts)/[\w./-]*\.(?:py|md|j2|tpl))"
)


def headings(page: Path) -> list[str]:
    found, fenced = [], False
    for line in page.read_text().splitlines():
        fenced = fenced != line.startswith("```")
        if not fenced and (heading := re.match(r"#+ (.+)", line)):
            found.append(heading[1].strip())
    return found


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def cited_section_problems(where: str, text: str) -> list[str]:
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for cited in CITED_SECTION.finditer(line):
            page = REPO / ("README.md" if cited[1] == "README" else cited[1])
            if not page.is_file():
                problems.append(f"{where}:{number}: {cited[1]}: no such page")
            elif not any(h.startswith(cited[2]) for h in headings(page)):
                problems.append(f"{where}:{number}: {cited[1]} has no section {cited[2]!r}")
    return problems


def stale_citations_in_pages(pages: list[Path]) -> list[str]:
    problems = []
    for page in pages:
        where = str(page.relative_to(REPO))
        text = page.read_text()
        for number, line in enumerate(text.splitlines(), 1):
            for cited in CITED_PATH.finditer(line):
                placeholder = any(c in line[cited.start() : cited.end() + 2] for c in "<*{")
                if not placeholder and not (REPO / cited[1]).exists():
                    problems.append(f"{where}:{number}: {cited[1]}: no such file or directory")
            for link in LINK.finditer(line):
                target, _, section = link[1].partition("#")
                if target.startswith(("http:", "https:", "mailto:")):
                    continue
                linked = (page.parent / target).resolve() if target else page
                if not linked.exists():
                    problems.append(f"{where}:{number}: link to {target}: no such file")
                elif section and linked.suffix == ".md" and section not in map(anchor, headings(linked)):
                    problems.append(f"{where}:{number}: link to {link[1]}: {linked.name} has no such heading")
        problems += cited_section_problems(where, text)
    return problems


def stale_citations_in_sources() -> list[str]:
    problems = []
    for top in SOURCE_DIRS:
        for path in sorted((REPO / top).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or "__pycache__" in path.parts or not path.is_file():
                continue
            where, text = str(path.relative_to(REPO)), path.read_text()
            for number, line in enumerate(text.splitlines(), 1):
                for cited in SOURCE_CITED_PATH.finditer(line):
                    if not (REPO / cited[1]).exists():
                        problems.append(f"{where}:{number}: {cited[1]}: no such file")
            problems += cited_section_problems(where, text)
    return problems


def test_no_page_is_over_250_lines():
    long = {str(p.relative_to(REPO)): n for p in PAGES if (n := len(p.read_text().splitlines())) > MAX_PAGE_LINES}
    assert long == {}, f"pages over {MAX_PAGE_LINES} lines (split them; history stays in git): {long}"


def test_no_table_cell_is_a_paragraph():
    long = [
        f"{page.relative_to(REPO)}:{number}: a cell of {len(cell.strip())} characters"
        for page in PAGES
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if line.startswith("|")
        for cell in line.strip("|").split("|")
        if len(cell.strip()) > MAX_CELL_CHARACTERS
    ]
    assert long == [], "\n".join(long)


def test_no_page_is_a_diary_of_parts():
    dated = [
        f"{page.relative_to(REPO)}:{number}: {line.strip()[:80]}"
        for page in PAGES
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if re.search(r"\bpart\)", line)
    ]
    assert dated == [], "a reference states the current figure with its command and date:\n" + "\n".join(dated)


def test_every_path_and_section_the_docs_cite_exists():
    problems = stale_citations_in_pages(PAGES) + stale_citations_in_sources()
    assert problems == [], "\n".join(problems)


def test_a_stale_citation_is_caught(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text('# Page\n\n`launcher/gone.py`, [x](page.md#page), [y](page.md#nope), `docs/page.md`, "Nope"\n')
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert stale_citations_in_pages([page]) == [
        "docs/page.md:3: launcher/gone.py: no such file or directory",
        "docs/page.md:3: link to page.md#nope: page.md has no such heading",
        "docs/page.md:3: docs/page.md has no section 'Nope'",
    ]


def packages_and_modules(top: str) -> list[Path]:
    """Every folder of Python modules under `top` (a package or not, as worker/startup/) and every
    module at its top."""
    root = REPO / top
    folders = {p.parent for p in root.rglob("*.py") if p.parent != root and "__pycache__" not in p.parts}
    modules = [p for p in root.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    return sorted([*folders, *modules])


def test_architecture_names_every_module_folder_and_top_level_module():
    page = (REPO / "docs" / "architecture.md").read_text()
    missing = []
    for top in ("launcher", "worker"):
        for path in packages_and_modules(top):
            name = f"{path.relative_to(REPO)}/" if path.is_dir() else path.name
            if f"`{name}" not in page and f"`{path.relative_to(REPO)}" not in page:
                missing.append(name)
    assert missing == [], f"docs/architecture.md does not name: {missing}"


def test_the_worker_package_docstring_lists_what_exists():
    import worker

    listed = set(re.findall(r"`(\w+/?)`", worker.__doc__))
    there = {
        p.name + "/" if p.is_dir() else p.stem for p in packages_and_modules("worker") if p.parent.name == "worker"
    }
    assert listed == there, f"worker/__init__.py: list {sorted(there - listed)}, drop {sorted(listed - there)}"
