"""Which files a code dir ships (`code:`): git's ignore rules, secrets left out, and the policy
for links and special files (pure but for reading the directory and asking git where its
global excludes file is).

Patterns are .gitignore lines with git's own semantics (pathspec's GitIgnoreSpec: escapes,
leading spaces, `**`, character classes, `!`, a trailing `/` for directories). They come in
layers, and for each path the last layer with a matching line decides, as git lets a deeper
.gitignore override a higher one:

1. DEFAULT_EXCLUDES (caches, virtualenvs, --local's runs), at the code dir;
2. in a git work tree, core.excludesFile then .git/info/exclude, relative to its top;
3. every `.gitignore` from the top of the enclosing git work tree (the nearest dir up with a
   `.git`; the code dir itself when there is none) down to each dir being packed, each matched
   relative to its own dir;
4. `.tfk8signore` in the code dir, then the spec's code.exclude: the place to re-include a file
   on purpose (`!.env.example`).

A secret (SECRET_EXCLUDES: files that hold credentials by convention; or a file holding one,
launcher/code_shipping/credentials.py) that 1-4 would ship is left out unless a `!` line of 4
re-includes it: a .gitignore cannot. As in git, nothing inside an excluded dir can be
re-included. Symlinks inside the dir are followed and judged under their target's path too,
out of it refused; only regular files and directories are shipped.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pathspec

from launcher.code_shipping.credentials import credential

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
# Secret): files named like credentials stay out unless .tfk8signore or code.exclude re-include them.
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
    before: tuple[Layer, ...]  # the defaults, git's excludes files, the .gitignore files above
    secrets: Layer  # SECRET_EXCLUDES: beneath everything but `after`'s re-includes
    after: tuple[Layer, ...]  # .tfk8signore, then code.exclude

    def _path(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def decide(self, rel: str, is_dir: bool, inner: tuple[Layer, ...]) -> tuple[str | None, bool]:
        """(the source of the line that excludes `rel` (relative to the code dir), or None: it
        ships; whether a `!` line of .tfk8signore or code.exclude re-included it on purpose)
        under these rules and the .gitignore layers `inner` of the dirs walked into."""
        path = self._path(rel)
        decided, on_purpose = None, False
        for layer in (*self.before, *inner):
            verdict = layer.decide(path, is_dir)
            if verdict is not None:
                decided = layer.source if verdict else None
        for layer in self.after:
            verdict = layer.decide(path, is_dir)
            if verdict is not None:
                decided, on_purpose = (layer.source, False) if verdict else (None, True)
        return decided, on_purpose

    def secret_named(self, rel: str, is_dir: bool) -> bool:
        return bool(self.secrets.decide(self._path(rel), is_dir))

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


def _git_common_dir(top: Path) -> Path:
    """The dir holding `info/exclude` for the work tree at `top`: `.git`, or for a linked
    worktree or a submodule (`.git` a file saying `gitdir: PATH`) the repository's common dir."""
    dot = top / ".git"
    if dot.is_dir():
        return dot
    line = dot.read_text().strip()
    if not line.startswith("gitdir:"):
        raise ValueError(f"{dot}: expected a `gitdir: PATH` line, found {line[:60]!r}: repair or remove it")
    git_dir = (top / line.removeprefix("gitdir:").strip()).resolve()
    common = git_dir / "commondir"
    return (git_dir / common.read_text().strip()).resolve() if common.is_file() else git_dir


def _global_excludes_file(top: Path) -> Path:
    """core.excludesFile as git reads it (its config files, includes and all: git's own answer
    when git is installed), else git's default, $XDG_CONFIG_HOME/git/ignore."""
    if shutil.which("git"):
        done = subprocess.run(
            ["git", "-C", str(top), "config", "--path", "--get", "core.excludesFile"], capture_output=True, text=True
        )
        if done.returncode == 0 and done.stdout.strip():
            return top / done.stdout.strip()
        if done.returncode not in (0, 1):  # 1: not set
            raise ValueError(f"git -C {top} config core.excludesFile failed: {done.stderr.strip()}")
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "git" / "ignore"


def _git_excludes(top: Path) -> list[Layer]:
    """git's excludes files beneath the .gitignore files, lowest first (core.excludesFile, then
    .git/info/exclude), each relative to the work tree's top; none outside a git work tree."""
    if not (top / ".git").exists():
        return []
    found = [_global_excludes_file(top), _git_common_dir(top) / "info" / "exclude"]
    return [_layer(str(path), "", tuple(path.read_text().splitlines())) for path in found if path.is_file()]


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
    before = (Layer(DEFAULTS, prefix, _spec(DEFAULT_EXCLUDES)), *_git_excludes(top), *above)
    return Rules(top, prefix, before, Layer(SECRETS, prefix, _spec(SECRET_EXCLUDES)), tuple(after))


class Unshippable(ValueError):
    """A file the archive cannot or must not carry (a link out of the dir, a pipe, a device)."""


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _entry(root: Path, path: Path, shown: Path) -> tuple[Path, os.stat_result]:
    """The real file behind `path` (a real dir's entry, `shown` as the code dir's `rel`) and its
    stat. A symlink inside the code dir is followed (what it points to is shipped under the
    link's name, as the program reads it); one out of it is refused: it would ship a file from
    elsewhere (a secret, say) into a ConfigMap any reader of the namespace can read. Only
    regular files and directories are shipped: a named pipe would block the packing forever, a
    device or socket has no contents."""
    if path.is_symlink():
        target = path.resolve()
        if not target.exists():
            raise Unshippable(f"{shown} is a symlink to {os.readlink(path)}, which does not exist")
        if not _inside(target, root):
            raise Unshippable(
                f"{shown} is a symlink to {target}, outside the code dir {root}: copy the file in, or exclude the link"
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
        raise Unshippable(f"{shown} is {kind}, not a file: exclude it")
    return path, info


@dataclass(frozen=True)
class Collected:
    files: list[tuple[str, Path, int]]  # (relative path, real path, size) to pack, sorted
    left_out: list[tuple[str, str]]  # (relative path, `dir/` for a dir; why), sorted


def collect(root: Path, rules: Rules, sniff=credential) -> Collected:
    """Every file to pack, and what was left out but by DEFAULTS; excluded entries are neither
    entered nor checked, directory symlinks inside the code dir are entered (a link back up to a
    dir being walked is not: no endless loop). `root` is a real path (resolved).

    An entry reached through a symlink is judged under its target's path too (an ignored dir
    does not ship under a link's name). A secret, by name (SECRET_EXCLUDES) or by what a file
    holds (`sniff`, launcher/code_shipping/credentials.py), is left out unless a `!` line of
    .tfk8signore or code.exclude re-includes it: a .gitignore's `!` does not."""
    found, left_out = [], []
    layers: dict[str, tuple[Layer, ...]] = {}
    verdicts: dict[tuple[str, bool], tuple[str | None, bool]] = {}

    def layers_of(real_dir: str) -> tuple[Layer, ...]:
        """The .gitignore layers from the code dir down to its real dir `real_dir`."""
        if real_dir not in layers:
            parent = real_dir.rpartition("/")[0]
            above = layers_of(parent) if real_dir else ()
            layers[real_dir] = above + rules.gitignore(real_dir, root / real_dir)
        return layers[real_dir]

    def as_real(real: str, is_dir: bool) -> tuple[str | None, bool]:
        """The verdict on the real path `real`, its dirs first: nothing in an excluded dir ships."""
        if (real, is_dir) not in verdicts:
            parent = real.rpartition("/")[0]
            above = as_real(parent, True) if parent else (None, False)
            if above[0] is not None:
                verdicts[real, is_dir] = (f"{above[0]}, as {parent}/", False)
            else:
                source, on_purpose = rules.decide(real, is_dir, layers_of(parent))
                verdicts[real, is_dir] = (f"{source}, as {real}{'/' if is_dir else ''}" if source else None, on_purpose)
        return verdicts[real, is_dir]

    def walk(rel_dir: str, real_dir: Path, ancestors: frozenset, inner: tuple[Layer, ...]) -> None:
        if real_dir in ancestors:  # a link back up to a dir being packed: no endless walk
            return
        inner = inner + rules.gitignore(rel_dir, real_dir)
        prefix = rel_dir + "/" if rel_dir else ""
        for name in sorted(os.listdir(real_dir)):
            rel = prefix + name
            is_dir = (real_dir / name).is_dir()
            shown = rel + "/" if is_dir else rel
            source, on_purpose = rules.decide(rel, is_dir, inner)
            if source is not None:
                if source != DEFAULTS:
                    left_out.append((shown, source))
                continue
            path, info = _entry(root, real_dir / name, root / rel)
            real = path.relative_to(root).as_posix()
            if real not in (rel, "."):  # reached through a link: its target's path decides too
                real_source, real_on_purpose = as_real(real, is_dir)
                if real_source is not None:
                    if not real_source.startswith(DEFAULTS):
                        left_out.append((shown, real_source))
                    continue
                on_purpose = on_purpose or real_on_purpose
            if not on_purpose:
                if rules.secret_named(rel, is_dir) or (real != rel and rules.secret_named(real, is_dir)):
                    left_out.append((shown, SECRETS))
                    continue
                held = None if stat.S_ISDIR(info.st_mode) else sniff(path, info.st_size)
                if held is not None:
                    left_out.append((shown, held))
                    continue
            if stat.S_ISDIR(info.st_mode):
                walk(rel, path, ancestors | {real_dir}, inner)
            else:
                found.append((rel, path, info.st_size))

    walk("", root, frozenset(), ())
    return Collected(sorted(found), sorted(left_out))
