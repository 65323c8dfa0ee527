"""The Python API (launcher.api) as a notebook uses it: typed configs, specs from files, dicts
or models, typed errors with the CLI's problems, logs, and real local clusters submitted,
waited for and deleted. A PS run followed through its progress events, listed, its logs read
and deleted is the one observed PS run of tests/worker/test_progress_view.py."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from local_clusters import make_spec

from launcher.api import (
    ClusterNotFound,
    LocalProcessBackendConfig,
    Phase,
    SpecError,
    TFK8sClient,
    load_spec,
)

ROOT = Path(__file__).resolve().parents[3]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args], capture_output=True, text=True, cwd=ROOT, timeout=60
    )


def test_importing_the_api_loads_neither_tensorflow_nor_kubernetes():
    code = (
        "import sys; from launcher.api import TFK8sClient, KubernetesBackendConfig; "
        "TFK8sClient(KubernetesBackendConfig(namespace='x')); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'kubernetes'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_importing_the_api_loads_no_backend_until_a_client_uses_one(tmp_path):
    """Only the Backend interface and each backend's options object load with the API; a
    backend's modules load when a client first needs it."""
    code = (
        "import json, sys; import launcher.api; "
        "loaded = lambda: sorted(m for m in sys.modules if m.startswith('launcher.backends.')); "
        "before = loaded(); "
        f"launcher.api.TFK8sClient(launcher.api.LocalProcessBackendConfig(workdir={str(tmp_path)!r})).list_jobs(); "
        "print(json.dumps([before, loaded()]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    before, after_use = json.loads(done.stdout)
    assert before == [
        "launcher.backends.base",
        "launcher.backends.kubernetes",
        "launcher.backends.kubernetes.types",
        "launcher.backends.local",
        "launcher.backends.local.types",
    ]
    assert "launcher.backends.local.backend" in after_use
    assert not any(m.startswith("launcher.backends.kubernetes.") for m in set(after_use) - set(before))


def test_a_dict_spec_gets_the_same_problems_as_a_file(tmp_path):
    client = TFK8sClient(LocalProcessBackendConfig(workdir=tmp_path))
    with pytest.raises(SpecError) as raised:
        client.submit({"name": "x", "strategy": "parameter_servr", "roles": {"chief": {}}})
    problem = raised.value.problems[0]
    assert (problem.file, problem.path) == ("<dict>", "strategy")
    assert str(problem).startswith("<dict>: strategy: ")
    assert not (tmp_path / "x").exists()


def test_unknown_job_is_cluster_not_found(tmp_path):
    client = TFK8sClient(LocalProcessBackendConfig(workdir=tmp_path))
    with pytest.raises(ClusterNotFound, match="no local cluster 'nope'"):
        client.get_job("nope")


def byo(data: dict, script: str) -> dict:
    """The spec with a bring-your-own command (plain Python, quick) instead of TF's worker."""
    data = {key: value for key, value in data.items() if key != "program"}
    return {**data, "image": "example.com/byo:1", "command": [sys.executable, "-c", script]}


def mwms_without_claim() -> dict:
    spec = make_spec("mw", "multi_worker_mirrored", ["--steps", "3"], evaluator=False)
    data = spec.model_dump(by_alias=True)
    data["checkpoint"] = {}
    return data


def test_local_accepts_multi_worker_mirrored_without_a_claim_and_says_so(tmp_path, caplog):
    with pytest.raises(SpecError) as raised:  # on Kubernetes: refused, with the fix
        load_spec(mwms_without_claim())
    assert raised.value.problems[0].path == "checkpoint.volume"
    # Locally every worker shares this disk: accepted, with a note.
    client = TFK8sClient(LocalProcessBackendConfig(workdir=tmp_path, foreground=True))
    with caplog.at_level(logging.INFO, logger="tfk8s"):
        name = client.submit(byo(mwms_without_claim(), "print('trained')"))
    assert "note: --local: the 2 workers share this machine's disk" in caplog.text
    client.delete_job(name)


USES_THE_API = """
import json, logging, sys
from launcher.api import LocalProcessBackendConfig, TFK8sClient

logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
spec = json.loads(sys.argv[2])
for foreground in (False, True):  # a detached supervisor, or one in this process
    client = TFK8sClient(LocalProcessBackendConfig(workdir=sys.argv[1], foreground=foreground))
    name = client.submit(spec)
    assert client.follow(name) == 0
    client.submit(spec)  # the same spec again: a note
    client.wait_for_job_status(name, timeout=60)
    client.list_jobs()
    list(client.get_job_logs(name, "worker", 0))
    client.delete_job(name)
"""


def test_a_program_using_the_client_gets_nothing_on_its_stdout(tmp_path):
    """The library prints nothing (only the CLI does): its notes and follow()'s status lines
    are log records of `tfk8s.local`, which the program's logging shows where it says."""
    program = tmp_path / "uses_the_api.py"
    program.write_text(USES_THE_API)
    spec = byo(mwms_without_claim(), "print('trained')")
    done = subprocess.run(
        [sys.executable, str(program), str(tmp_path / "work"), json.dumps(spec)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    said = done.stderr.splitlines()
    assert (
        said.count(
            "tfk8s.local: note: --local: the 2 workers share this machine's disk, so they need no "
            "claim; on Kubernetes set checkpoint.volume.persistentVolumeClaim.claimName (ReadWriteMany) "
            "or a gs:// checkpoint.dir"
        )
        == 4  # each submit says it
    ), done.stderr
    assert said.count("tfk8s.local: local cluster 'mw' is unchanged (Succeeded); nothing started") == 2, done.stderr
    assert any(line.startswith("tfk8s.local: [Succeeded]") for line in said), done.stderr


def test_logs_tail_gives_the_last_lines(tmp_path):
    client = TFK8sClient(LocalProcessBackendConfig(workdir=tmp_path, foreground=True))
    spec = make_spec("tail", "mirrored", [], evaluator=False).model_dump(by_alias=True)
    name = client.submit(byo(spec, "for i in range(10): print(f'line {i}')"))
    client.wait_for_job_status(name, timeout=60)
    assert list(client.get_job_logs(name, "chief", tail=2)) == ["line 8\n", "line 9\n"]
    whole = list(client.get_job_logs(name, "chief"))
    assert len(whole) == 11 and whole[0].startswith("=== tfk8s: chief-0 attempt 1"), whole
    done = cli("logs", name, "--local", "--workdir", str(tmp_path), "--role", "chief", "--tail", "1")
    assert done.stdout == "line 9\n", done.stderr
    client.delete_job(name)


def test_version_is_the_package_version():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert cli("--version").stdout == f"tfk8s {version}\n"


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_script_completes_commands_flags_and_choices(shell, tmp_path):
    done = cli("completion", shell)
    assert done.returncode == 0, done.stderr
    script = tmp_path / "completion"
    script.write_text(done.stdout)
    if shell == "zsh":
        assert "bashcompinit" in done.stdout
        return
    probe = (
        f"source {script}; "
        "COMP_WORDS=(tfk8s lo); COMP_CWORD=1; _tfk8s; echo ${COMPREPLY[@]}; "
        "COMP_WORDS=(tfk8s logs x --role ''); COMP_CWORD=4; _tfk8s; echo ${COMPREPLY[@]}; "
        "COMP_WORDS=(tfk8s logs x --ta); COMP_CWORD=3; _tfk8s; echo ${COMPREPLY[@]}"
    )
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.stdout.splitlines() == ["logs", "chief worker ps evaluator dispatcher data-worker", "--tail"], out.stderr


@pytest.mark.process
def test_cli_runs_multi_worker_mirrored_without_a_claim_locally(tmp_path):
    spec = tmp_path / "mw.json"  # JSON is YAML
    spec.write_text(json.dumps(mwms_without_claim()))
    assert cli("render", str(spec)).returncode == 2  # Kubernetes: refused
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "submit", str(spec), "--local", "--workdir", str(tmp_path / "work")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "note: --local: the 2 workers share this machine's disk" in done.stdout


@pytest.mark.process
def test_the_readme_flow_again_and_again_in_one_workdir(tmp_path):
    """submit, wait, delete, and again: the detached supervisor wrote its last status after
    delete_job had removed the files (1 run in 2), leaving a cluster without its spec that
    broke `list` for all and the next submit (ClusterNotFound)."""
    client = TFK8sClient(LocalProcessBackendConfig(workdir=tmp_path))
    spec = make_spec(
        "demo", "mirrored", ["--steps", "20", "--checkpoint-every", "10", "--data", "digits"], evaluator=False
    )
    data = spec.model_dump(by_alias=True)
    data["checkpoint"] = {}
    for run in range(4):
        name = client.submit(data)  # returns at once: a detached supervisor runs the tasks
        assert client.get_job(name).phase in (Phase.PENDING, Phase.RUNNING), run
        final = client.wait_for_job_status(name, timeout=300)
        assert final.phase is Phase.SUCCEEDED, (run, final)
        client.delete_job(name)
        assert client.list_jobs() == [], run
        # submit.lock stays: removing a lock file another submit may hold would let two lock it
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == ["model", "submit.lock"], run


def test_a_damaged_local_cluster_is_listed_as_such_not_a_failure_of_list(tmp_path):
    client = TFK8sClient(LocalProcessBackendConfig(workdir=tmp_path))
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / "status.json").write_text('{"phase": "Succeeded", "roles": []}\n')
    [torn] = client.list_jobs()
    assert torn.name == "torn" and torn.phase is Phase.UNKNOWN
    assert "damaged local cluster dir" in torn.message and "delete torn --local" in torn.message
    client.delete_job("torn")
    assert client.list_jobs() == []
