"""`code:`: deterministic packing, excludes, the size limit, and what render makes of it."""

from __future__ import annotations

import base64
import gzip
import io
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from launcher.cluster_spec.loader import load_file, pack_code
from launcher.code_shipping import code_bundle, code_files
from launcher.code_shipping.code_bundle import CODE_DIR, LIMIT
from launcher.errors import SpecError
from launcher.plan.plan import plan
from launcher.render import render
from worker import contract


def _tree(root, files: dict[str, str | bytes]):
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    return root


TWO_MODULES = {"train.py": "from pkg.helper import VALUE\n", "pkg/__init__.py": "", "pkg/helper.py": "VALUE = 1\n"}


def _names(bundle) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(bundle.archive)) as tar:
        return tar.getnames()


def test_same_content_same_digest_mtime_ignored_byte_changes_it(tmp_path):
    a = _tree(tmp_path / "a", TWO_MODULES)
    b = _tree(tmp_path / "b", TWO_MODULES)  # another dir, other inode order, other mtimes
    first = code_bundle.pack(a)
    assert code_bundle.pack(b).digest == first.digest == code_bundle.pack(a).digest
    os.utime(a / "pkg" / "helper.py", (1, 1))
    assert code_bundle.pack(a).digest == first.digest
    (a / "pkg" / "helper.py").write_text("VALUE = 2\n")
    changed = code_bundle.pack(a)
    assert changed.digest != first.digest
    assert changed.object_name("demo") != first.object_name("demo")
    assert first.object_name("demo") == f"demo-code-{first.digest[:10]}"
    # gzip header without a name or a time; tar members owned by 0 with mtime 0
    assert gzip.decompress(first.archive) and first.archive[4:8] == b"\0\0\0\0"
    with tarfile.open(fileobj=io.BytesIO(first.archive)) as tar:
        assert {(m.mtime, m.uid, m.gid, m.uname) for m in tar.getmembers()} == {(0, 0, 0, "")}
        assert tar.getnames() == sorted(tar.getnames())


def test_excludes_defaults_ignore_file_and_spec(tmp_path):
    root = _tree(
        tmp_path / "src",
        {
            **TWO_MODULES,
            "pkg/__pycache__/helper.cpython-311.pyc": b"x",
            "old.pyc": b"x",
            ".git/HEAD": "ref",
            ".ipynb_checkpoints/n.ipynb": "{}",
            "data/big.bin": b"0" * 100,
            "data/keep.txt": "k",
            "notes/a.md": "a",
            "deep/x/scratch.tmp": "t",
            ".tfk8signore": "data/\n*.tmp\n",
            ".tfk8s/run/logs/chief-0.log": "x",
            ".venv/bin/python": "x",
        },
    )
    names = _names(code_bundle.pack(root, ["notes", "/train.py", "!train.py"]))
    assert names == [".tfk8signore", "pkg/__init__.py", "pkg/helper.py", "train.py"]
    # anchored patterns and ** match paths; an unanchored one any basename
    assert code_files.excluded("a/b/c.csv", False, ["**/*.csv"])
    assert not code_files.excluded("x/train.py", False, ["/train.py"])
    assert code_files.excluded("x/train.py", False, ["train.py"])


def _spec(tmp_path, code: str, extra: str = "") -> object:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        f"name: demo\nstrategy: mirrored\n{code}\nprogram: {{module: train}}\n"
        f"roles: {{chief: {{replicas: 1}}}}\n{extra}"
    )
    return load_file(path)


def test_too_large_is_refused_with_size_limit_and_fix(tmp_path):
    _tree(tmp_path / "src", {**TWO_MODULES, "weights.bin": os.urandom(LIMIT + 1000)})
    with pytest.raises(SpecError) as info:
        _spec(tmp_path, "code: ./src")
    text = str(info.value)
    assert "cluster.yaml:3: code: ./src packs to" in text
    assert "MiB compressed" in text and "over the 0.95 MiB a ConfigMap holds" in text
    assert "weights.bin" in text and "code.exclude or a .tfk8signore" in text
    # and with it excluded, it ships
    spec = _spec(tmp_path, "code: {path: ./src, exclude: ['*.bin']}")
    assert pack_code(spec).size < LIMIT


def test_missing_dir_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match=r"cluster.yaml:4: code.path: './nope' cannot be packed"):
        _spec(tmp_path, "code:\n  path: ./nope")


@pytest.mark.parametrize("workload", ["jobs", "jobset"])
@pytest.mark.parametrize("program", ["program: {module: train}", "command: [python, train.py]"])
def test_render_ships_the_code_to_every_pod(tmp_path, workload, program):
    _tree(tmp_path / "src", TWO_MODULES)
    (tmp_path / "cluster.yaml").write_text(
        f"name: demo\nstrategy: parameter_server\nworkload: {workload}\ncode: ./src\n{program}\n"
        "roles: {chief: {replicas: 1}, worker: {replicas: 2}, ps: {replicas: 1}}\n"
    )
    spec = load_file(tmp_path / "cluster.yaml")
    code = pack_code(spec)
    objects = render.render(plan(spec, code))
    maps = [o for o in objects if o["kind"] == "ConfigMap" and "binaryData" in o]
    assert len(maps) == 1
    cm = maps[0]
    assert cm["metadata"]["name"] == code.object_name("demo") and cm["immutable"]
    assert base64.b64decode(cm["binaryData"]["code.tar.gz"]) == code.archive
    # after the root (its owner), before any pod's Job
    assert objects.index(cm) == 1
    pods = [spec_["template"]["spec"] for _, spec_ in render.job_specs(objects)]
    assert len(pods) == 3
    for pod in pods:
        init, main = pod["initContainers"][0], pod["containers"][0]
        assert init["image"] == main["image"] == spec.image
        for c in (init, main):
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert main["workingDir"] == CODE_DIR
        env = {e["name"]: e.get("value") for e in main["env"]}
        assert env["PYTHONPATH"] == CODE_DIR
        assert {"name": "code", "mountPath": CODE_DIR, "readOnly": True} in main["volumeMounts"]
        assert {"name": "code-archive", "configMap": {"name": cm["metadata"]["name"]}} in pod["volumes"]


def test_spec_hash_follows_the_content_not_the_place(tmp_path):
    one = tmp_path / "one"
    two = tmp_path / "two"
    _tree(one / "src", TWO_MODULES)
    _tree(two / "src", TWO_MODULES)
    a, b = _spec(one, "code: ./src"), _spec(two, "code: ./src")
    assert a.code.path != b.code.path and plan(a, pack_code(a)).spec_hash == plan(b, pack_code(b)).spec_hash
    (two / "src" / "pkg" / "helper.py").write_text("VALUE = 2\n")
    assert plan(b, pack_code(b)).spec_hash != plan(a, pack_code(a)).spec_hash


def test_plan_takes_the_packed_code_and_the_code_dir_it_is_given(tmp_path):
    _tree(tmp_path / "src", TWO_MODULES)
    spec = _spec(tmp_path, "code: ./src")
    code = pack_code(spec)
    local = plan(spec, code, code_dir=str(tmp_path / "copy"))
    assert local.roles[0].workdir == str(tmp_path / "copy")
    assert local.roles[0].env["PYTHONPATH"] == str(tmp_path / "copy")
    assert local.roles[0].env[contract.CODE_DIGEST] == code.digest
    assert plan(spec, code).code.object_name == code.object_name("demo")
    # the spec holds where the code is, never the packed code: the plan takes it (render and the
    # hash take the plan)
    assert "code_bundle" not in dir(spec)
    with pytest.raises(ValueError, match=r"the spec has `code:` but no packed code was given \(loader.pack_code"):
        plan(spec)
    with pytest.raises(ValueError, match="packed code was given for a spec without `code:`"):
        plan(spec.model_copy(update={"code": None}), code)


def test_the_pods_commands_unpack_and_run_the_code(tmp_path):
    """The rendered init container's command unpacks the ConfigMap's archive, and the main
    container's `command:` then runs from it (paths moved under tmp_path; no cluster)."""
    shutil.copytree(Path(__file__).resolve().parents[2] / "code_demo" / "v1", tmp_path / "src")
    (tmp_path / "cluster.yaml").write_text(
        "name: demo\nstrategy: mirrored\ncode: ./src\ncommand: [python, run.py]\nroles: {chief: {replicas: 1}}\n"
    )
    spec = load_file(tmp_path / "cluster.yaml")
    objects = render.render(plan(spec, pack_code(spec)))
    cm = next(o for o in objects if "binaryData" in o)
    pod = render.job_specs(objects)[0][1]["template"]["spec"]
    archive_dir, code_dir = tmp_path / "code-archive", tmp_path / "code"
    archive_dir.mkdir()
    code_dir.mkdir()
    (archive_dir / "code.tar.gz").write_bytes(base64.b64decode(cm["binaryData"]["code.tar.gz"]))
    moved = {code_bundle.ARCHIVE_DIR: str(archive_dir), CODE_DIR: str(code_dir)}

    def move(text: str) -> str:
        for old, new in moved.items():
            text = text.replace(old, new)
        return text

    init = [move(a) for a in pod["initContainers"][0]["command"]]
    init[0] = sys.executable
    out = subprocess.run(init, capture_output=True, text=True, check=True).stdout
    assert "unpacked 4 files" in out
    main = pod["containers"][0]
    env = {e["name"]: move(e["value"]) for e in main["env"] if "value" in e}
    result = subprocess.run(
        [sys.executable, *main["command"][1:]],
        cwd=move(main["workingDir"]),
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == f"tfk8s-code-marker v1 cwd={code_dir}"


def test_submit_says_when_the_running_clusters_code_changed(tmp_path):
    from launcher.backends.kubernetes.submit import code_change
    from launcher.render.code_render import SHA256_ANNOTATION

    _tree(tmp_path / "src", TWO_MODULES)
    code = pack_code(_spec(tmp_path, "code: ./src"))
    new = code.digest
    root = {"metadata": {"annotations": {SHA256_ANNOTATION: "0123456789abcdef"}}}
    assert code_change(root, code) == f" (its code changed: sha256 0123456789 -> {new[:10]})"
    assert code_change({"metadata": {"annotations": {SHA256_ANNOTATION: new}}}, code) == ""
    assert code_change(None, code) == ""


def test_a_program_module_not_in_the_code_is_refused_at_load(tmp_path):
    _tree(tmp_path / "src", TWO_MODULES)
    (tmp_path / "cluster.yaml").write_text(
        "name: demo\nstrategy: mirrored\ncode: ./src\nprogram:\n  module: trian\nroles: {chief: {replicas: 1}}\n"
    )
    with pytest.raises(SpecError) as info:
        load_file(tmp_path / "cluster.yaml")
    assert "cluster.yaml:5: program.module: 'trian' is not in code: ./src" in str(info.value)
    assert "(did you mean train? modules in ./src: pkg, pkg.helper, train)" in str(info.value)
    # the worker's own programs, and modules of a package in the code, are fine
    for module in ("worker.examples.fashion_mnist", "pkg.helper"):
        (tmp_path / "cluster.yaml").write_text(
            f"name: demo\nstrategy: mirrored\ncode: ./src\nprogram: {{module: {module}}}\n"
            "roles: {chief: {replicas: 1}}\n"
        )
        assert pack_code(load_file(tmp_path / "cluster.yaml")) is not None


def test_a_program_module_missing_in_a_shipped_package_is_refused_at_load(tmp_path, caplog):
    """The whole dotted name is looked up in the packed files, not only its top: a module
    missing in a package of the code failed 32 s into the run, after TF's import."""
    _tree(tmp_path / "src", {**TWO_MODULES, "pkg/sub/model.py": ""})

    def load(module: str, image: str = "tfk8s/worker:dev"):
        (tmp_path / "cluster.yaml").write_text(
            f"name: demo\nstrategy: mirrored\nimage: {image}\ncode: ./src\nprogram:\n  module: {module}\n"
            "roles: {chief: {replicas: 1}}\n"
        )
        return load_file(tmp_path / "cluster.yaml")

    for module, nearest in (("pkg.helpr", "pkg.helper"), ("pkg.sub.modle", "pkg.sub.model"), ("train.x", "train")):
        with pytest.raises(SpecError) as info:
            load(module)
        expected = module.replace(".", "/")
        assert f"cluster.yaml:6: program.module: {module!r} is not in code: ./src (no {expected}.py or " in str(
            info.value
        )
        assert f"(did you mean {nearest}?" in str(info.value), str(info.value)
    for module in ("pkg.sub.model", "pkg.sub", "pkg"):  # a module, a namespace package, a package
        assert load(module).program.module == module
    # Another image: a package of the code hides the image's, so it is checked; a module the
    # code does not hold comes from the image, checked when the task starts, as a note says.
    with pytest.raises(SpecError):
        load("pkg.helpr", image="team/trainer:1")
    with caplog.at_level(logging.INFO, logger="tfk8s"):
        assert load("trainer.main", image="team/trainer:1").program.module == "trainer.main"
    assert caplog.messages == [
        f"note: {tmp_path / 'cluster.yaml'}: program.module 'trainer.main' is not in code: ./src, so image "
        "team/trainer:1 must provide it; that is checked when each task starts (exit 2, not retried)"
    ]


def test_a_command_script_not_in_the_code_is_refused_at_load(tmp_path):
    """`command: [python, run.py]` runs in the code dir: a missing script would fail every pod
    (and every retry) after scheduling."""
    _tree(tmp_path / "src", TWO_MODULES)
    (tmp_path / "cluster.yaml").write_text(
        "name: demo\nstrategy: mirrored\ncode: ./src\ncommand: [python, run.py]\nroles: {chief: {replicas: 1}}\n"
    )
    with pytest.raises(SpecError) as info:
        load_file(tmp_path / "cluster.yaml")
    assert "cluster.yaml:4: command: command runs 'run.py', which is not in code: ./src" in str(info.value)
    assert "e.g. pkg/__init__.py, pkg/helper.py, train.py" in str(info.value)
    # scripts in the code (also under a dir, or named ./x.py), and what it cannot check, are fine
    for command in (
        "[python3, train.py]",
        "[python, ./pkg/helper.py]",
        "[python, -m, train]",
        "[python, /opt/app/run.py]",
        "[bash, run.sh]",
    ):
        (tmp_path / "cluster.yaml").write_text(
            f"name: demo\nstrategy: mirrored\ncode: ./src\ncommand: {command}\nroles: {{chief: {{replicas: 1}}}}\n"
        )
        assert pack_code(load_file(tmp_path / "cluster.yaml")) is not None, command


def test_the_helm_release_limit_is_said_before_helm_says_it(tmp_path, capsys):
    """Helm's release Secret (1 MiB) holds codeArchive twice: measured on kind, 300 kB of
    incompressible code installed, 450 kB and 600 kB failed inside Helm. Both ways to make
    Helm values (the archive for --set-file, `render --helm-values`) refuse it first."""
    from launcher import cli
    from launcher.chart import chart_values, helm_release

    for size, fits in ((300_000, True), (450_000, False), (600_000, False)):
        root = tmp_path / f"src{size}"
        _tree(root, {"train.py": "from worker.examples.digits import *\n", "blob.bin": os.urandom(size)})
        assert (cli.main(["code-archive", str(root)]) == 0) is fits, size
        err = capsys.readouterr().err
        if not fits:
            assert f"code: {root} (0." in err and "over the 1024 KiB a Secret holds" in err, err
        (tmp_path / "c.yaml").write_text(
            f"name: demo\nstrategy: mirrored\ncode: ./{root.name}\nprogram: {{module: train}}\n"
            "roles: {chief: {replicas: 1}}\n"
        )
        spec = load_file(tmp_path / "c.yaml")
        if fits:
            assert "codeArchive" in chart_values.helm_values_yaml(spec, pack_code(spec))
        else:
            with pytest.raises(
                helm_release.TooLargeForHelm,
                match=r"code: \S*src\d+ \(0\.\d+ MiB "
                r"packed\) makes a Helm release of about \d+ KiB, over the 1024",
            ):
                chart_values.helm_values_yaml(spec, pack_code(spec))


def test_symlinks_inside_are_followed_outside_refused_with_the_path(tmp_path):
    src = tmp_path / "src"
    _tree(src, {"train.py": "import lib.util\n", "real/util.py": "X = 1\n"})
    (src / "lib").symlink_to(src / "real")  # a dir link inside: shipped under its name
    (src / "alias.py").symlink_to(src / "train.py")
    bundle = code_bundle.pack(src)
    assert _names(bundle) == ["alias.py", "lib/util.py", "real/util.py", "train.py"]
    secret = tmp_path / "secret.pem"
    secret.write_text("-----BEGIN PRIVATE KEY-----\n")
    (src / "key.txt").symlink_to(secret)  # not named like a key (*.pem is left out by default)
    with pytest.raises(
        code_files.Unshippable,
        match=rf"{src}/key.txt is a symlink to "
        rf"{secret}, outside the code dir {src}",
    ):
        code_bundle.pack(src)
    (src / "key.txt").unlink()
    (src / "loop").symlink_to(src)  # a link back up: packed once, no endless walk
    assert "train.py" in _names(code_bundle.pack(src))


def test_a_named_pipe_is_refused_not_waited_on(tmp_path):
    src = tmp_path / "src"
    _tree(src, {"train.py": ""})
    os.mkfifo(src / "events")
    with pytest.raises(
        code_files.Unshippable,
        match=rf"{src}/events is a named pipe, not a "
        "file: exclude it",
    ):
        code_bundle.pack(src)
    assert _names(code_bundle.pack(src, ["events"])) == ["train.py"]


def test_character_classes_exclude_as_gitignore_says():
    patterns = ["*.[pP][eE][mM]", "*.py[cod]", "data[!0-9].csv"]
    assert code_files.excluded("keys/server.PEM", False, patterns)
    assert code_files.excluded("a.pem", False, patterns)
    assert code_files.excluded("mod.pyo", False, patterns)
    assert not code_files.excluded("mod.py", False, patterns)
    assert code_files.excluded("datax.csv", False, patterns)
    assert not code_files.excluded("data1.csv", False, patterns)


def test_a_huge_file_is_refused_from_its_size_without_reading_it(tmp_path):
    """A multi-GB dataset left in the code dir: refused at once, not read into memory first
    (a 150 MB file took 4.9 s and 480 MB of RSS to be refused)."""
    import resource

    src = tmp_path / "src"
    _tree(src, {"train.py": ""})
    with open(src / "data.bin", "wb") as sparse:
        sparse.truncate(2 * 1024**3)  # 2 GiB, sparse: no disk used
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with pytest.raises(
        code_bundle.TooLarge,
        match=r"holds 2048.00 MiB of files, over the "
        r"64.00 MiB a code dir may .*largest: data.bin \(2048.00 MiB\)",
    ):
        code_bundle.pack_checked(src, [], "./src")
    seconds = time.monotonic() - started
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print(f"2 GiB sparse file refused in {seconds:.3f} s, peak RSS grew {grown_mb:.1f} MB")
    assert seconds < 2 and grown_mb < 100


def test_a_compressed_archive_over_the_limit_stops_packing_there(tmp_path):
    src = tmp_path / "src"
    _tree(src, {"a.bin": os.urandom(700_000), "b.bin": os.urandom(700_000)})
    with pytest.raises(code_bundle.TooLarge, match=r"./src packs to over 0.95 MiB compressed"):
        code_bundle.pack_checked(src, [], "./src")


def test_a_local_run_reads_the_archive_the_pods_get_not_the_dir(tmp_path):
    """--local used the code dir in place: a file excluded from the archive was readable there
    and not in the pods. Now it runs from the same archive, unpacked into the run's dir."""
    import io as io_

    from launcher.backends.local import LocalBackend, LocalProcessBackendConfig

    _tree(
        tmp_path / "src",
        {
            "run.py": "import os\nprint('sees', sorted(os.listdir('.')), os.path.exists('data/x.csv'))\n",
            "data/x.csv": "1,2\n",
        },
    )
    (tmp_path / "cluster.yaml").write_text(
        "name: demo\nstrategy: mirrored\nimage: example.com/own:1\n"
        "code: {path: ./src, exclude: [data/]}\n"
        f"command: [{sys.executable}, run.py]\nroles: {{chief: {{replicas: 1}}}}\n"
    )
    spec = load_file(tmp_path / "cluster.yaml")
    out = io_.StringIO()
    backend = LocalBackend(
        LocalProcessBackendConfig(workdir=tmp_path / "work", foreground=True, echo_tasks=True), stream=out
    )
    backend.submit(spec)
    assert backend.wait("demo") == 0, out.getvalue()[-2000:]
    unpacked = tmp_path / "work" / "demo" / "code"
    assert f"code: {tmp_path / 'src'} -> {unpacked}: 1 files" in out.getvalue()
    assert "sees ['run.py'] False" in out.getvalue(), out.getvalue()[-2000:]


def test_a_workdir_inside_the_code_dir_is_not_shipped(tmp_path):
    """`--workdir` inside the code dir: earlier runs' logs and checkpoints were packed with
    the code (20 files in the report)."""
    import io as io_

    from launcher.backends.local import LocalBackend, LocalProcessBackendConfig

    _tree(
        tmp_path / "src",
        {
            "run.py": "import os\nprint('sees', sorted(os.listdir('.')))\n",
            "runs/old/logs/chief-0.log": "an earlier run\n",
        },
    )
    (tmp_path / "cluster.yaml").write_text(
        "name: demo\nstrategy: mirrored\nimage: example.com/own:1\ncode: ./src\n"
        f"command: [{sys.executable}, run.py]\nroles: {{chief: {{replicas: 1}}}}\n"
    )
    out = io_.StringIO()
    backend = LocalBackend(
        LocalProcessBackendConfig(workdir=tmp_path / "src" / "runs", foreground=True, echo_tasks=True), stream=out
    )
    backend.submit(load_file(tmp_path / "cluster.yaml"))
    assert backend.wait("demo") == 0, out.getvalue()[-2000:]
    assert "sees ['run.py']" in out.getvalue(), out.getvalue()[-2000:]


@pytest.mark.parametrize("command", [["render"], ["submit", "--dry-run=client"]])
def test_a_command_packs_the_code_once(tmp_path, monkeypatch, capsys, command):
    """The load's check packs the code, and that archive is the one planned and shipped: the
    command packs nothing again (what ships is what the load checked)."""
    from launcher import cli

    _tree(tmp_path / "src", TWO_MODULES)
    path = _spec(tmp_path, "code: ./src") and tmp_path / "cluster.yaml"
    packed = []
    pack = code_bundle.pack_checked
    monkeypatch.setattr(code_bundle, "pack_checked", lambda *args: packed.append(args) or pack(*args))
    assert cli.main([*command, str(path)]) == 0
    assert len(packed) == 1, f"`{' '.join(command)}` packed the code {len(packed)} times"
    assert code_bundle.CODE_DIR in capsys.readouterr().out  # the rendered pods unpack it there


def test_a_client_submit_ships_the_code_its_load_packed(tmp_path, monkeypatch):
    """TFK8sClient.submit(path): one pack, at the load, and the run's copy is that archive."""
    from launcher.api.client import TFK8sClient
    from launcher.api.config import LocalProcessBackendConfig

    _tree(tmp_path / "src", TWO_MODULES)
    (tmp_path / "cluster.yaml").write_text(
        "name: demo\nstrategy: mirrored\ncode: ./src\ncommand: [python, train.py]\nroles: {chief: {replicas: 1}}\n"
    )
    packed = []
    pack = code_bundle.pack_checked
    monkeypatch.setattr(code_bundle, "pack_checked", lambda *args: packed.append(pack(*args)) or packed[-1])
    client = TFK8sClient(LocalProcessBackendConfig(workdir=str(tmp_path / "runs"), foreground=True))
    assert client.submit(tmp_path / "cluster.yaml") == "demo"
    assert client.follow("demo") == 0
    assert len(packed) == 1
    assert (tmp_path / "runs" / "demo" / "code.tar.gz").read_bytes() == packed[0].archive
