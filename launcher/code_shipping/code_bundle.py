"""Your own code without an image build: `code: ./src` packed into a deterministic tar.gz.

The archive depends on the files' relative paths, contents and executable bits only (sorted
order, mtime 0, uid/gid 0, no directory entries, gzip without name or time), so the same code
always gives the same sha256, and the cluster's code ConfigMap is named by it
(`<name>-code-<sha256[:10]>`). This module is the I/O edge: each submit packs the directory
once (launcher/cluster_spec/loader.py pack_code) and hands the Bundle to plan() and render(),
which only read it; the spec itself holds only where the code is (CodeSpec).

Which files are shipped (excludes, links, special files): launcher/code_shipping/code_files.py.

`python -m launcher code-archive DIR [--exclude PATTERN ...]` prints the archive in
base64, for the Helm chart (`helm install ... --set-file codeArchive=code.b64`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from launcher.code_shipping.code_files import IGNORE_FILE, collect, rules_for

MIB = 1024 * 1024
# A ConfigMap holds at most 1 MiB (data + binaryData, decoded); the rest of the object
# (metadata, the base64 overhead is not counted by that check but by etcd's 1.5 MiB request
# limit) needs some room: 0.95 MiB of compressed archive.
LIMIT = int(0.95 * MIB)
# Files of more than this, together, are data, however well they compress: refused from their
# sizes alone, before anything is read (a multi-GB dataset in the dir would take minutes).
MAX_RAW_BYTES = 64 * MIB
# At most this many files in a code dir: packed (a ConfigMap's 1 MiB of gzip holds 200,000 empty
# files' headers) and unpacked alike.
MAX_FILES = 10_000
CODE_DIR = "/opt/tfk8s/code"  # in the pods: unpacked here, first on PYTHONPATH, the working dir
ARCHIVE_DIR = "/opt/tfk8s/code-archive"  # the ConfigMap, mounted read-only for the init container
ARCHIVE_KEY = "code.tar.gz"
# The `code` emptyDir's sizeLimit: MAX_RAW_BYTES of files, plus a 4 KiB block each for the
# smallest (the kubelet counts the blocks used), with room to spare; past it the pod is evicted.
CODE_DIR_SIZE_LIMIT = "128Mi"
# The init container's program: unpack the archive into the emptyDir (stdlib only). What it
# believes of the archive (a ConfigMap anyone with write access to the namespace can replace, or
# a chart's codeArchive): gzip only (3 KB of bz2 made 4 GiB); the sizes and count in the
# members' headers, checked before anything is written, against what pack() could have made.
UNPACK = (
    "import sys, tarfile\n"
    "src, dst = sys.argv[1], sys.argv[2]\n"
    f"max_bytes, max_files = {MAX_RAW_BYTES}, {MAX_FILES}\n"
    "with open(src, 'rb') as f:\n"
    "    if f.read(2) != b'\\x1f\\x8b':\n"
    "        sys.exit(f'tfk8s code: {src} is not a gzip archive (code-archive makes one: tar.gz)')\n"
    "members, total = [], 0\n"
    "with tarfile.open(src, 'r:gz') as t:\n"
    "    for m in t:\n"
    "        if not m.isreg() or m.name.startswith('/') or '..' in m.name.split('/'):\n"
    "            sys.exit(f'tfk8s code: refusing archive member {m.name!r}')\n"
    "        members.append(m)\n"
    "        total += m.size\n"
    "        if len(members) > max_files:\n"
    "            sys.exit(f'tfk8s code: refusing the archive: over {max_files} files')\n"
    "        if total > max_bytes:\n"
    "            sys.exit(f'tfk8s code: refusing the archive: over {max_bytes >> 20} MiB unpacked (at {m.name!r})')\n"
    "    t.extractall(dst, members)\n"
    "print(f'tfk8s code: unpacked {len(members)} files ({total} bytes) into {dst}')\n"
)


class CodeSpec(BaseModel):
    """The spec's `code:` key: a directory relative to the spec file, and excludes."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)

    path: str = Field(min_length=1, description="the code dir, relative to the spec file")
    exclude: list[str] = Field(default_factory=list, description=".gitignore-style patterns left out of the archive")
    outside: bool = Field(
        False,
        description="ship a dir outside the spec file's directory (the working dir for a spec from stdin or a "
        "dict); without it such a `path` is refused (docs/code.md)",
    )

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value):
        return {"path": value} if isinstance(value, str) else value


@dataclass(frozen=True)
class Bundle:
    root: str  # the code dir, absolute
    archive: bytes  # the tar.gz
    files: tuple[tuple[str, int], ...]  # (relative path, size) of every packed file, sorted
    # (relative path, why) of what an exclude other than the plain defaults kept out, sorted
    left_out: tuple[tuple[str, str], ...] = ()

    @property
    def digest(self) -> str:
        # of the archive, which the chart can hash too (its ConfigMap name); a zlib that
        # deflates differently (zlib-ng) gives another digest for the same files
        return hashlib.sha256(self.archive).hexdigest()

    @property
    def size(self) -> int:
        return len(self.archive)

    @property
    def raw_size(self) -> int:
        return sum(size for _, size in self.files)

    @classmethod
    def from_archive(cls, root: str, archive: bytes) -> "Bundle":
        """The Bundle an archive packed earlier holds (a local run's record of it)."""
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            files = tuple((m.name, m.size) for m in tar.getmembers())
        return cls(root=root, archive=archive, files=files)

    def object_name(self, cluster: str) -> str:
        return f"{cluster}-code-{self.digest[:10]}"

    def summary(self) -> str:
        return (
            f"{len(self.files)} files, {human(self.raw_size)} packed to {human(self.size)} (sha256 {self.digest[:10]})"
        )


class TooLarge(ValueError):
    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.hint = hint


def human(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / MIB:.2f} MiB" if n >= MIB // 10 else f"{n / 1024:.1f} KiB"


class _Bounded(io.BytesIO):
    """The compressed archive, refusing to grow past `limit` (TooLarge raised by pack)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def write(self, data) -> int:
        if self.tell() + len(data) > self.limit:
            raise _OverLimit()
        return super().write(data)


class _OverLimit(Exception):
    pass


def pack(root: str | Path, exclude: list[str] = (), limit: int | None = None) -> Bundle:
    """The Bundle of directory `root` (a ValueError when it is not one, Unshippable for a file
    it must not carry). Streamed: files are read in chunks, and with `limit` the packing stops
    (TooLarge) once the compressed archive passes it, or at once when the files' sizes alone
    show the dir is data, not code (MAX_RAW_BYTES); nothing is read whole into memory."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory")
    collected = collect(root, rules_for(root, list(exclude)))
    entries = collected.files
    files = tuple((rel, size) for rel, _, size in entries)
    if limit is not None and sum(size for _, size in files) > MAX_RAW_BYTES:
        raise _too_large(str(root), files, None)
    if limit is not None and len(files) > MAX_FILES:  # the pods' unpacker would refuse it
        raise TooLarge(
            f"{root} holds {len(files)} files, over the {MAX_FILES} a code dir may",
            "exclude what the program does not import (code.exclude or a .tfk8signore in the code dir): "
            "data, caches, a virtualenv",
        )
    out = _Bounded(limit if limit is not None else 1 << 62)
    try:
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
            with tarfile.open(fileobj=gz, mode="w|", format=tarfile.GNU_FORMAT) as tar:
                for rel, path, size in entries:
                    info = tarfile.TarInfo(rel)
                    info.size, info.mtime, info.uid, info.gid = size, 0, 0, 0
                    info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
                    with path.open("rb") as src:
                        tar.addfile(info, src)
    except _OverLimit:
        raise _too_large(str(root), files, out.limit) from None
    return Bundle(root=str(root), archive=out.getvalue(), files=files, left_out=tuple(collected.left_out))


def checked(bundle: Bundle, given: str) -> Bundle:
    """`bundle`, or TooLarge when a ConfigMap cannot carry it: never a truncated archive."""
    if bundle.size <= LIMIT:
        return bundle
    raise _too_large(given, bundle.files, bundle.size)


def pack_checked(root: str | Path, exclude: list[str], given: str) -> Bundle:
    """pack() within what a ConfigMap holds: stops reading as soon as the limit is passed."""
    try:
        return pack(root, exclude, limit=LIMIT)
    except TooLarge as exc:
        raise TooLarge(str(exc).replace(str(Path(root).resolve()), given, 1), exc.hint) from None


def _too_large(given: str, files, compressed: int | None) -> TooLarge:
    biggest = sorted(files, key=lambda f: -f[1])[:3]
    raw = sum(size for _, size in files)
    size = (
        f"packs to over {human(compressed)} compressed"
        if compressed is not None
        else f"holds {human(raw)} of files, over the {human(MAX_RAW_BYTES)} a code dir may"
    )
    return TooLarge(
        f"{given} {size} ({len(files)} files, {human(raw)} raw), over the "
        f"{LIMIT / MIB:.2f} MiB a ConfigMap holds; largest: "
        + ", ".join(f"{rel} ({human(size)})" for rel, size in biggest),
        "exclude data files (code.exclude or a .tfk8signore in the code dir), or put data on the checkpoint volume",
    )


def resolve(code: CodeSpec, base: Path) -> Path:
    return (base / code.path).resolve()


def outside_of(code: CodeSpec, base: Path) -> tuple[str, str] | None:
    """(problem, hint) when code.path, links followed, leads out of `base` (the spec file's
    directory) without `outside: true`: a spec someone else wrote must not pack any dir its
    reader can read (`../../.config/gcloud`) into a ConfigMap of the namespace it names."""
    base, root = base.resolve(), resolve(code, base)
    if code.outside or root == base or base in root.parents:
        return None
    return (
        f"code: {code.path} is {root}, outside {base}, the spec's directory; shipping it would put its files "
        "into the cluster",
        f"move the code under {base}, or if this dir is meant, say so: `code: {{path: {code.path}, outside: true}}`",
    )


def check_given(spec, bundle: "Bundle | None", caller: str) -> None:
    """The one rule for every consumer of packed code: given with `code:`, and only then."""
    if spec.code is not None and bundle is None:
        raise ValueError(f"{caller}: the spec has `code:` but no packed code was given (loader.pack_code(spec))")
    if spec.code is None and bundle is not None:
        raise ValueError(f"{caller}: packed code was given for a spec without `code:`")


def note(spec, bundle: Bundle, to: str | None = None) -> str:
    """One line on what `code:` ships: the dir, where to (its ConfigMap, or `to`: a local
    run's unpacked copy), sizes, the first files."""
    names = [rel for rel, _ in bundle.files]
    shown = ", ".join(names[:6]) + (f", ... ({len(names) - 6} more)" if len(names) > 6 else "")
    where = to or f"ConfigMap {bundle.object_name(spec.name)}"
    left_out = left_out_note(bundle)
    outside = " (outside the spec's directory: code.outside)" if spec.code is not None and spec.code.outside else ""
    return f"code: {bundle.root}{outside} -> {where}: {bundle.summary()}: {shown}" + (
        f"; {left_out}" if left_out else ""
    )


def left_out_note(bundle: Bundle) -> str | None:
    """What the excludes kept out (secret-looking files, .gitignore's, your own), by source, and
    how to ship one on purpose; None when only the plain defaults (caches, venvs) matched."""
    if not bundle.left_out:
        return None
    by_source: dict[str, list[str]] = {}
    for rel, source in bundle.left_out:
        by_source.setdefault(source, []).append(rel)
    shown = "; ".join(f"{', '.join(rels)} ({source})" for source, rels in by_source.items())
    return f"left out: {shown}; to ship one on purpose, add `!NAME` to code.exclude or {IGNORE_FILE}"


def unpack(archive: Path, dst: Path) -> None:
    """The archive into `dst` (emptied first) by the pods' own init container program (UNPACK,
    its checks included), so a local run runs from exactly the files the pods would get."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-c", UNPACK, str(archive), str(dst)], capture_output=True, text=True)
    if done.returncode != 0:
        raise ValueError((done.stderr.strip().splitlines() or ["no output"])[-1])
