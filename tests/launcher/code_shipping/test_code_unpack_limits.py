"""The pods' code unpacker (code_bundle.UNPACK, the init container's program; --local runs it
too) believes no archive: anyone who may write ConfigMaps in the namespace, or a chart's
codeArchive, can hand it one. gzip only, at most MAX_FILES files and MAX_RAW_BYTES unpacked,
checked from the headers before a byte is written; the `code` emptyDir has a sizeLimit
(issue 61: 3 KB of bz2 unpacked to 4 GiB, 200k files)."""

from __future__ import annotations

import io
import tarfile

import pytest

from launcher.cluster_spec.loader import load_file, pack_code
from launcher.code_shipping import code_bundle
from launcher.plan.plan import plan
from launcher.render import render


class Zeros(io.RawIOBase):
    """`size` zero bytes, read in chunks: a large member without holding it in memory."""

    def __init__(self, size: int):
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def archive(path, mode: str, members: list[tuple[str, int]]):
    with tarfile.open(path, mode) as tar:
        for name, size in members:
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BufferedReader(Zeros(size)))
    return path


def refusal(tmp_path, path) -> str:
    dst = tmp_path / "code"
    with pytest.raises(ValueError) as raised:
        code_bundle.unpack(path, dst)
    assert list(dst.iterdir()) == [], "wrote before refusing"
    return str(raised.value)


def test_a_bz2_archive_is_refused_before_it_is_decompressed(tmp_path):
    bomb = archive(tmp_path / "code.tar.gz", "w:bz2", [("train.py", 64 << 20)])
    assert bomb.stat().st_size < 4096  # 64 MiB of zeros in a few KB
    assert refusal(tmp_path, bomb) == (f"tfk8s code: {bomb} is not a gzip archive (code-archive makes one: tar.gz)")


def test_more_bytes_than_a_code_dir_may_hold_are_refused_from_the_headers(tmp_path):
    bomb = archive(tmp_path / "code.tar.gz", "w:gz", [("a.py", 10), ("weights.bin", code_bundle.MAX_RAW_BYTES)])
    assert bomb.stat().st_size < 200 << 10
    assert refusal(tmp_path, bomb) == "tfk8s code: refusing the archive: over 64 MiB unpacked (at 'weights.bin')"


def test_more_files_than_a_code_dir_may_hold_are_refused(tmp_path):
    many = archive(tmp_path / "code.tar.gz", "w:gz", [(f"f{n}.py", 0) for n in range(code_bundle.MAX_FILES + 1)])
    assert refusal(tmp_path, many) == f"tfk8s code: refusing the archive: over {code_bundle.MAX_FILES} files"


def test_at_the_limits_it_unpacks(tmp_path):
    fits = archive(
        tmp_path / "code.tar.gz", "w:gz", [(f"f{n}.py", 0) for n in range(code_bundle.MAX_FILES - 1)] + [("w", 1 << 20)]
    )
    code_bundle.unpack(fits, tmp_path / "code")
    assert len(list((tmp_path / "code").iterdir())) == code_bundle.MAX_FILES


def test_pack_refuses_what_the_unpacker_would(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for n in range(code_bundle.MAX_FILES + 1):
        (src / f"f{n}.py").touch()
    with pytest.raises(code_bundle.TooLarge, match=f"./src holds {code_bundle.MAX_FILES + 1} files, over the"):
        code_bundle.pack_checked(src, [], "./src")


def test_the_code_empty_dir_has_a_size_limit(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "run.py").write_text("print('hi')\n")
    (tmp_path / "cluster.yaml").write_text(
        "name: demo\nstrategy: mirrored\ncode: ./src\ncommand: [python, run.py]\nroles: {chief: {replicas: 1}}\n"
    )
    spec = load_file(tmp_path / "cluster.yaml")
    pod = render.job_specs(render.render(plan(spec, pack_code(spec))))[0][1]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "code"]
    assert volume == {"name": "code", "emptyDir": {"sizeLimit": code_bundle.CODE_DIR_SIZE_LIMIT}}
