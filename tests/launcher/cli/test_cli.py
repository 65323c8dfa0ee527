"""The CLI as a user runs it: exit codes and one clear line per problem, never a traceback."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]


def run(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.yaml")))
def test_render_examples(example):
    result = run("render", f"examples/{example}")
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    kinds = [d["kind"] for d in docs]
    if "workload: jobset" in (ROOT / "examples" / example).read_text():
        assert kinds[0] == "JobSet" and kinds.count("JobSet") == 1 and "Job" not in kinds
    else:
        assert kinds[:2] == ["ConfigMap", "Service"] and "Job" in kinds
    as_json = json.loads(run("render", f"examples/{example}", "-o", "json").stdout)
    assert [o["kind"] for o in as_json["items"]] == kinds


def test_tf_config_shows_evaluator_outside_training_cluster():
    result = run("render", "examples/ps.yaml", "--tf-config", "-o", "json")
    configs = json.loads(result.stdout)
    assert configs["mnist-ps-evaluator-0"]["cluster"] == {}
    for pod, cfg in configs.items():
        assert "evaluator" not in cfg["cluster"], pod


BROKEN = {
    "unknown key": (
        "name: a\nstrategy: parameter_server\nroles: {chief: {replicas: 1}, "
        "worker: {replicas: 1}, ps: {replicas: 1}}\nimagePullPolcy: Always\n",
        "x.yaml:4: imagePullPolcy: unknown key 'imagePullPolcy' (did you mean 'imagePullPolicy'?)",
    ),
    "no ps": (
        "name: a\nstrategy: parameter_server\nroles:\n  chief: {replicas: 1}\n"
        "  worker: {replicas: 1}\n  ps: {replicas: 0}\n",
        "x.yaml:6: roles.ps.replicas: parameter_server needs at least 1 ps, got 0",
    ),
    "long name": (
        "name: " + "n" * 70 + "\nstrategy: mirrored\nroles: {chief: {replicas: 1}}\n",
        "x.yaml:1: name: 70 characters; a DNS-1035 label has at most 63",
    ),
    "bad yaml": ("name: a\nroles: [\n", "x.yaml:3: invalid YAML"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_spec_one_clear_error_exit_2(case, tmp_path):
    text, expected = BROKEN[case]
    (tmp_path / "x.yaml").write_text(text)
    result = run("render", "x.yaml", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith("error: " + expected), lines[0]


def test_embedded_default_renders_without_a_file(tmp_path):
    result = run("render", "--tf-config", cwd=tmp_path)
    assert result.returncode == 0 and "tfk8s-demo-chief-0" in result.stdout


def test_helm_values_round_trip_to_the_same_spec(tmp_path):
    values = run("render", "examples/ps.yaml", "--helm-values").stdout
    (tmp_path / "values.yaml").write_text(values)
    again = run("render", str(tmp_path / "values.yaml"))
    assert again.stdout == run("render", "examples/ps.yaml").stdout


def test_unreachable_cluster_is_one_line(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:1"}}],
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
                "users": [{"name": "x", "user": {"token": "t"}}],
            }
        )
    )
    result = run("status", "x", "--kubeconfig", str(kubeconfig))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the Kubernetes API server" in lines[0], lines


def test_the_commands_after_submit_local_find_the_run_without_local(tmp_path, monkeypatch, capsys):
    """`submit --local` records the run in .tfk8s/<name>/: status, logs, list and delete find it
    by the name alone. A name that is neither a local run nor anywhere on Kubernetes gets one
    line naming the flags; with a kubeconfig too, the local run is still found, with a note."""
    from launcher import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    (tmp_path / "ok.yaml").write_text(
        f"name: ok\nstrategy: mirrored\ncommand: [{sys.executable}, -c, \"print('trained')\"]\n"
        "roles: {chief: {replicas: 1}}\n"
    )
    assert cli.main(["submit", "ok.yaml", "--local"]) == 0
    capsys.readouterr()
    assert cli.main(["status", "ok"]) == 0
    assert capsys.readouterr().out.startswith("cluster local/ok: Succeeded\n")
    assert cli.main(["logs", "ok", "--role", "chief"]) == 0
    assert capsys.readouterr().out.endswith("\ntrained\n")
    assert cli.main(["list", "-o", "json"]) == 0
    assert [c["name"] for c in json.loads(capsys.readouterr().out)] == ["ok"]

    assert cli.main(["status", "nope"]) == 1
    assert capsys.readouterr().err == (
        f"error: no cluster 'nope': no local run of it in {tmp_path / '.tfk8s'} and no Kubernetes configured "
        "($KUBECONFIG, ~/.kube/config); for a local run elsewhere pass --workdir DIR, for a cluster --kubeconfig "
        "or --context\n"
    )

    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    assert cli.main(["status", "ok"]) == 0
    shown = capsys.readouterr()
    assert shown.out.startswith("cluster local/ok: Succeeded\n")
    assert shown.err == (
        f"note: 'ok' is the local run in {tmp_path / '.tfk8s'}; for a cluster of that name on Kubernetes pass "
        "--context or -n\n"
    )
    assert cli.main(["delete", "ok"]) == 0
    assert not (tmp_path / ".tfk8s" / "ok" / "status.json").exists()
