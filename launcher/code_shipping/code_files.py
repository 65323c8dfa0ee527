"""Which files a code dir ships (`code:`): git's ignore rules, secret-looking files left out,
and the policy for links and special files (pure but for reading the directory).

Patterns are .gitignore lines with git's own semantics (pathspec's GitIgnoreSpec: escapes,
leading spaces, `**`, character classes, `!`, a trailing `/` for directories). They come in
layers, and for each path the last layer with a matching line decides, as git lets a deeper
.gitignore override a higher one:

1. DEFAULT_EXCLUDES (caches, virtualenvs, --local's runs) and SECRET_EXCLUDES (files that hold
   credentials by convention), at the code dir;
2. every `.gitignore` from the top of the enclosing git work tree (the nearest dir up with a
   `.git`; the code dir itself when there is none) down to each dir being packed, each matched
   relative to its own dir;
3. `.tfk8signore` in the code dir, then the spec's code.exclude: the place to re-include a file
   on purpose (`!.env.example`).

As in git, nothing inside an excluded dir can be re-included. Symlinks inside the dir are
followed, out of it refused; only regular files and directories are shipped.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pathspec

IGNORE_FILE = ".tfk8signore"
GITIGNORE = ".gitignore"
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
# The archive lands in a ConfigMap any reader of the namespace can read (and in Helm's release
# Secret): files named like credentials stay out unless re-included by name (see `left_out`).
SECRET_EXCLUDES = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    ".ssh/",
    ".aws/",
    ".kube/",
)
DEFAULTS, SECRETS, SPEC = "default", "secret-looking", "code.exclude"


# git's wildmatch knows POSIX classes in brackets, pathspec does not (it would read `[[:digit:]]`
# as a set of characters): refused rather than matched otherwise than git does.
_POSIX_CLASS = re.compile(r"\[:(alnum|alpha|blank|cntrl|digit|graph|lower|print|punct|space|upper|xdigit):\]")


def _layer(source: str, base: str, lines: tuple[str, ...]) -> Layer:
    for number, line in enumerate(lines, 1):
        if _POSIX_CLASS.search(line):
            raise ValueError(
                f"{source}: line {number} {line!r}: POSIX character classes are not supported in code "
                "excludes; write the characters instead ([0-9] for [:digit:], [a-zA-Z] for [:alpha:])"
            )
    return Layer(source, base, _spec(lines))


@lru_cache(maxsize=256)
def _spec(lines: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _decision(spec: pathspec.GitIgnoreSpec, rel: str, is_dir: bool) -> bool | None:
    """True: the lines exclude `rel`; False: a `!` line re-includes it; None: no line matches."""
    return spec.check_file(rel + "/" if is_dir else rel).include


def excluded(rel: str, is_dir: bool, patterns: list[str]) -> bool:
    """Whether the .gitignore lines `patterns` exclude `rel` (a path relative to their dir)."""
    return bool(_decision(_spec(tuple(patterns)), rel, is_dir))


@dataclass(frozen=True)
class Layer:
    source: str  # where the lines come from: DEFAULTS, SECRETS, a file's path, SPEC
    base: str  # the dir the lines are relative to, from the top (see Rules), "" for the top
    spec: pathspec.GitIgnoreSpec

    def decide(self, path: str, is_dir: bool) -> bool | None:
        if self.base and not path.startswith(self.base + "/"):
            return None
        return _decision(self.spec, path[len(self.base) + 1 :] if self.base else path, is_dir)


@dataclass(frozen=True)
class Rules:
    """The layers for one code dir. Paths are taken from `top` (the git work tree's top, or
    the code dir); `prefix` is the code dir's path from there ("" when it is the top)."""

    top: Path
    prefix: str
    before: tuple[Layer, ...]  # the defaults, then the .gitignore files above the code dir
    after: tuple[Layer, ...]  # .tfk8signore, then code.exclude

    def source(self, rel: str, is_dir: bool, inner: tuple[Layer, ...]) -> str | None:
        """The source of the line that excludes `rel` (relative to the code dir) under these
        rules and the .gitignore layers `inner` of the dirs walked into; None: it ships."""
        path = f"{self.prefix}/{rel}" if self.prefix else rel
        decided = None
        for layer in (*self.before, *inner, *self.after):
            verdict = layer.decide(path, is_dir)
            if verdict is not None:
                decided = layer.source if verdict else None
        return decided

    def gitignore(self, rel_dir: str, real_dir: Path) -> tuple[Layer, ...]:
        """The layer of the .gitignore in code dir `rel_dir` (read from `real_dir`), if any."""
        found = real_dir / GITIGNORE
        if not found.is_file():
            return ()
        base = "/".join(part for part in (self.prefix, rel_dir) if part)
        shown = f"{rel_dir}/{GITIGNORE}" if rel_dir else GITIGNORE
        return (_layer(shown, base, tuple(found.read_text().splitlines())),)


def _work_tree_top(root: Path) -> Path:
    for directory in (root, *root.parents):
        if (directory / ".git").exists():
            return directory
    return root


def rules_for(root: Path, exclude: list[str]) -> Rules:
    top = _work_tree_top(root)
    prefix = root.relative_to(top).as_posix() if top != root else ""
    above = []
    for directory in reversed(root.parents):
        if top == directory or top in directory.parents:
            ignore = directory / GITIGNORE
            if ignore.is_file():
                base = directory.relative_to(top).as_posix() if directory != top else ""
                above.append(_layer(str(ignore), base, tuple(ignore.read_text().splitlines())))
    own = root / IGNORE_FILE
    after = [_layer(IGNORE_FILE, prefix, tuple(own.read_text().splitlines()))] if own.is_file() else []
    after.append(_layer(SPEC, prefix, tuple(exclude)))
    defaults = (Layer(DEFAULTS, prefix, _spec(DEFAULT_EXCLUDES)), Layer(SECRETS, prefix, _spec(SECRET_EXCLUDES)))
    return Rules(top, prefix, (*defaults, *above), tuple(after))


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


@dataclass(frozen=True)
class Collected:
    files: list[tuple[str, Path, int]]  # (relative path, real path, size) to pack, sorted
    left_out: list[tuple[str, str]]  # (relative path, `dir/` for a dir; the line's source), sorted


def collect(root: Path, rules: Rules) -> Collected:
    """Every file to pack, and what was left out but by DEFAULTS; excluded entries are neither
    entered nor checked, directory symlinks inside the code dir are entered (a link back up to a
    dir being walked is not: no endless loop)."""
    found, left_out = [], []

    def walk(rel_dir: str, ancestors: frozenset, inner: tuple[Layer, ...]) -> None:
        real = _entry(root, rel_dir)[0] if rel_dir else root
        if real in ancestors:  # a link back up to a dir being packed: no endless walk
            return
        inner = inner + rules.gitignore(rel_dir, real)
        prefix = rel_dir + "/" if rel_dir else ""
        for name in sorted(os.listdir(real)):
            rel = prefix + name
            is_dir = (root / rel).is_dir()
            source = rules.source(rel, is_dir, inner)
            if source is not None:
                if source != DEFAULTS:
                    left_out.append((rel + "/" if is_dir else rel, source))
                continue
            path, info = _entry(root, rel)
            if stat.S_ISDIR(info.st_mode):
                walk(rel, ancestors | {real}, inner)
            else:
                found.append((rel, path, info.st_size))

    walk("", frozenset(), ())
    return Collected(sorted(found), sorted(left_out))
