"""Which files `code:` leaves out: git's own ignore rules (checked against git on the same tree),
the repo's .gitignore files, and secret-looking files, said in the `code:` line."""

from __future__ import annotations

import io
import subprocess
import tarfile

import pytest

from launcher.cluster_spec.loader import load_file
from launcher.code_shipping import code_bundle, code_files

# (a .gitignore line, a path, whether the path is a dir): escapes, leading and trailing spaces,
# `[/]`, `**` beside other characters, anchoring, character classes, directory-only lines.
CASES = [
    (r"\#notes.txt", "#notes.txt", False),
    (r"\!keep.txt", "!keep.txt", False),
    (r"star\*.txt", "star*.txt", False),
    (r"star\*.txt", "starx.txt", False),
    ("trail\\ ", "trail ", False),
    ("trail  ", "trail", False),
    (" lead.txt", " lead.txt", False),
    (" lead.txt", "lead.txt", False),
    ("a[/]b", "a/b", False),
    ("x/**y", "x/s/y", False),
    ("x/**y", "x/y", False),
    ("*.[pP][nN][gG]", "k/image.PNG", False),
    ("data[!0-9].csv", "datax.csv", False),
    ("/top.txt", "sub/top.txt", False),
    ("doc/*.txt", "doc/sub/a.txt", False),
    ("**/logs", "deep/er/logs", True),
    ("logs/", "logs", False),
    ("a/**/b", "a/b", False),
    ("[]]x", "]x", False),
    ("out/**", "out/deep/file.txt", False),
]


def _git_ignores(repo, pattern: str, path: str, is_dir: bool) -> bool:
    (repo / ".gitignore").write_text(pattern + "\n")
    target = repo / path
    if is_dir:
        target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["git", "-C", str(repo), "check-ignore", "-q", "--no-index", path])
    assert done.returncode in (0, 1), done
    return done.returncode == 0


def test_a_pattern_excludes_what_git_ignores(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    differ = [
        (pattern, path, f"git ignores: {git}")
        for pattern, path, is_dir in CASES
        if code_files.excluded(path, is_dir, [pattern]) != (git := _git_ignores(tmp_path, pattern, path, is_dir))
    ]
    assert differ == []


def _tree(root, files: dict[str, str]):
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return root


def _names(bundle) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(bundle.archive)) as tar:
        return tar.getnames()


def test_the_gitignore_files_of_the_repo_leave_out_what_git_would_not_add(tmp_path):
    """A code dir inside a git repo: the .gitignore above it, its own, and a nested one, each
    relative to its own dir, the deeper one overriding, as `git ls-files --others` lists."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    _tree(
        tmp_path,
        {
            ".gitignore": "*.log\nsrc/cache/\n",
            "src/.gitignore": "/build/\n*.tmp\n!keep.tmp\n",
            "src/train.py": "",
            "src/run.log": "",
            "src/build/out.py": "",
            "src/cache/blob.py": "",
            "src/pkg/build/inner.py": "",
            "src/pkg/.gitignore": "!important.log\nlocal_*\n",
            "src/pkg/important.log": "",
            "src/pkg/local_settings.py": "",
            "src/pkg/scratch.tmp": "",
            "src/pkg/keep.tmp": "",
        },
    )
    listed = subprocess.run(
        ["git", "-C", str(tmp_path / "src"), "ls-files", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert _names(code_bundle.pack(tmp_path / "src")) == sorted(listed)
    assert "pkg/important.log" in listed and "run.log" not in listed  # the cases are there


def _spec(tmp_path, exclude: str = "[]"):
    path = tmp_path / "cluster.yaml"
    path.write_text(
        f"name: demo\nstrategy: mirrored\ncode: {{path: ./src, exclude: {exclude}}}\n"
        "program: {module: train}\nroles: {chief: {replicas: 1}}\n"
    )
    return load_file(path)


def test_secret_looking_and_gitignored_files_stay_out_with_a_line_saying_how_to_ship_one(tmp_path):
    src = _tree(
        tmp_path / "src",
        {
            "train.py": "",
            ".gitignore": ".env\nsa-key.json\n",
            ".env": "TOKEN=x",
            "sa-key.json": "{}",
            "tls/server.key": "k",
            ".netrc": "machine x",
            "__pycache__/train.pyc": "",
        },
    )
    bundle = code_bundle.pack(src)
    assert _names(bundle) == [".gitignore", "train.py"]
    note = code_bundle.note(_spec(tmp_path), bundle)
    assert note.endswith(
        "; left out: .env, sa-key.json (.gitignore); .netrc, tls/server.key (secret-looking); "
        "to ship one on purpose, add `!NAME` to code.exclude or .tfk8signore"
    ), note
    # re-included by name, in the spec or in .tfk8signore: later than the defaults and .gitignore
    assert _names(code_bundle.pack(src, ["!server.key", "!.env"])) == [
        ".env",
        ".gitignore",
        "tls/server.key",
        "train.py",
    ]
    (src / ".tfk8signore").write_text("!.netrc\n")
    assert ".netrc" in _names(code_bundle.pack(src))


def test_a_posix_class_git_knows_and_the_matcher_does_not_is_refused_in_one_line(tmp_path):
    src = _tree(tmp_path / "src", {"train.py": "", "7.csv": ""})
    with pytest.raises(ValueError) as refused:
        code_bundle.pack(src, ["[[:digit:]]*.csv"])
    assert str(refused.value) == (
        "code.exclude: line 1 '[[:digit:]]*.csv': POSIX character classes are not supported in code excludes; "
        "write the characters instead ([0-9] for [:digit:], [a-zA-Z] for [:alpha:])"
    )
    assert _names(code_bundle.pack(src, ["[0-9]*.csv"])) == ["train.py"]
