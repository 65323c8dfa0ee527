"""Which files a code dir ships (`code:`): .gitignore-style excludes, and the policy for links
and special files (pure but for reading the directory).

Excludes are applied in order (a later match wins, `!` re-includes, a trailing `/` matches
directories only, a pattern with a `/` inside is anchored at the code dir, `**` spans
directories, `[...]` is a character class): DEFAULT_EXCLUDES, then the lines of `.tfk8signore`
in the code dir, then the spec's code.exclude. Symlinks inside the dir are followed, out of it
refused; only regular files and directories are shipped.
"""

from __future__ import annotations

import os
import re
import stat
from functools import lru_cache
from pathlib import Path

IGNORE_FILE = ".tfk8signore"
# .tfk8s/: --local's runs (logs, checkpoints) when the code dir is the spec's own dir.
DEFAULT_EXCLUDES = (
    "__pycache__/",
    ".git/",
    "*.pyc",
    ".ipynb_checkpoints/",
    ".DS_Store",
    ".tfk8s/",
    ".venv/",
    ".pytest_cache/",
    ".mypy_cache/",
)


@lru_cache(maxsize=256)
def _regex(glob: str) -> re.Pattern:
    out, i = "", 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif glob.startswith("**", i):
            out, i = out + ".*", i + 2
        elif glob[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif glob[i] == "?":
            out, i = out + "[^/]", i + 1
        elif glob[i] == "[" and (end := glob.find("]", i + 2)) > 0:
            # a character class, as .gitignore (fnmatch) has it: [pP], [a-z], [!x] negated
            body = glob[i + 1 : end]
            negated = body[:1] in ("!", "^")
            body = body[1:] if negated else body
            out += "[" + ("^/" if negated else "") + body.replace("\\", "\\\\") + "]"
            i = end + 1
        else:
            out, i = out + re.escape(glob[i]), i + 1
    return re.compile(out + r"\Z")


def excluded(rel: str, is_dir: bool, patterns: list[str]) -> bool:
    """Whether the .gitignore-style `patterns` (in order, the last match wins) exclude `rel`."""
    out = False
    for raw in patterns:
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern[1:] if negate else pattern
        if pattern.endswith("/"):
            if not is_dir:
                continue
            pattern = pattern.rstrip("/")
        anchored = "/" in pattern
        subject = rel if anchored else rel.rsplit("/", 1)[-1]
        if _regex(pattern.lstrip("/")).match(subject):
            out = not negate
    return out


def patterns_for(root: Path, exclude: list[str]) -> list[str]:
    ignore = root / IGNORE_FILE
    own = ignore.read_text().splitlines() if ignore.is_file() else []
    return [*DEFAULT_EXCLUDES, *own, *exclude]


class Unshippable(ValueError):
    """A file the archive cannot or must not carry (a link out of the dir, a pipe, a device)."""


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _entry(root: Path, rel: str) -> tuple[Path, os.stat_result]:
    """The real file behind `rel` and its stat. A symlink inside the code dir is followed (what
    it points to is shipped under the link's name, as the program reads it); one out of it is
    refused: it would ship a file from elsewhere (a secret, say) into a ConfigMap any reader of
    the namespace can read. Only regular files and directories are shipped: a named pipe would
    block the packing forever, a device or socket has no contents."""
    path = root / rel
    if path.is_symlink():
        target = path.resolve()
        if not target.exists():
            raise Unshippable(f"{path} is a symlink to {os.readlink(path)}, which does not exist")
        if not _inside(target, root):
            raise Unshippable(
                f"{path} is a symlink to {target}, outside the code dir {root}: copy the file in, or exclude the link"
            )
        path = target
    info = path.stat()
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        kind = (
            "a named pipe"
            if stat.S_ISFIFO(info.st_mode)
            else "a socket"
            if stat.S_ISSOCK(info.st_mode)
            else "a device or special file"
        )
        raise Unshippable(f"{root / rel} is {kind}, not a file: exclude it")
    return path, info


def collect(root: Path, patterns: list[str]) -> list[tuple[str, Path, int]]:
    """(relative path, real path, size) of every file to pack, sorted; excluded entries are
    neither entered nor checked, directory symlinks inside the code dir are entered (a link
    back up to a dir being walked is not: no endless loop)."""
    found = []

    def walk(rel_dir: str, ancestors: frozenset) -> None:
        real = _entry(root, rel_dir)[0] if rel_dir else root
        if real in ancestors:  # a link back up to a dir being packed: no endless walk
            return
        prefix = rel_dir + "/" if rel_dir else ""
        for name in sorted(os.listdir(real)):
            rel = prefix + name
            if excluded(rel, (root / rel).is_dir(), patterns):
                continue
            path, info = _entry(root, rel)
            if stat.S_ISDIR(info.st_mode):
                walk(rel, ancestors | {real})
            else:
                found.append((rel, path, info.st_size))

    walk("", frozenset())
    return sorted(found)
