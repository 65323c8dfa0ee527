"""A sweep's trials on Kubernetes, as `sweep --dry-run=client` renders them: one JobSet a trial
when the base spec has a queue (Kueue admits each trial as a unit), Jobs otherwise; every object
labelled with its sweep and trial."""

from __future__ import annotations

import yaml

from launcher import cli

BASE = """\
name: sw
cluster:
  name: base
  strategy: parameter_server
  {workload}
  program: {{module: worker.examples.digits, args: [--steps, "40"]}}
  roles: {{chief: {{replicas: 1}}, worker: {{replicas: 2}}, ps: {{replicas: 1}}, evaluator: {{replicas: 1}}}}
  checkpoint: {{volume: {{persistentVolumeClaim: {{claimName: ckpt}}}}}}
parameters:
  - {{name: batch, flag: --global-batch-size, values: [16, 64, 128]}}
objective: {{metric: accuracy, direction: maximize}}
algorithm: grid
parallelTrials: 2
"""


def rendered(tmp_path, capsys, workload: str) -> dict[str, list[dict]]:
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE.format(workload=workload))
    assert cli.main(["sweep", str(path), "--dry-run=client"]) == 0
    out = capsys.readouterr().out
    trials: dict[str, list[dict]] = {}
    for chunk in out.split("# trial ")[1:]:
        name, _, text = chunk.partition("\n")
        trials[name] = [d for d in yaml.safe_load_all(text) if d]
    return trials


def test_a_queued_base_makes_one_jobset_a_trial_each_labelled(tmp_path, capsys):
    trials = rendered(tmp_path, capsys, "workload: jobset\n  queue: team-a")
    assert list(trials) == ["sw-t0", "sw-t1"]  # parallelTrials of them
    for number, (name, objects) in enumerate(trials.items()):
        jobsets = [o for o in objects if o["kind"] == "JobSet"]
        assert len(jobsets) == 1 and not [o for o in objects if o["kind"] == "Job"]
        labels = jobsets[0]["metadata"]["labels"]
        assert labels["kueue.x-k8s.io/queue-name"] == "team-a" and jobsets[0]["metadata"]["name"] == name
        for obj in objects:
            assert obj["metadata"]["labels"]["tfk8s.io/sweep"] == "sw", obj["kind"]
            assert obj["metadata"]["labels"]["tfk8s.io/sweep-trial"] == str(number), obj["kind"]
    batch = [_args(trials[name]) for name in trials]
    assert [a[a.index("--global-batch-size") + 1] for a in batch] == ["16", "64"]


def test_without_a_queue_each_trial_runs_as_jobs_with_its_own_model_dir(tmp_path, capsys):
    trials = rendered(tmp_path, capsys, "")
    for name, objects in trials.items():
        jobs = [o for o in objects if o["kind"] == "Job"]
        assert jobs and all(j["metadata"]["name"].startswith(f"{name}-") for j in jobs)
        env = {e["name"]: e.get("value") for e in _container(jobs[0])["env"]}
        assert env["TFK8S_MODEL_DIR"].endswith(f"/default/{name}")


def _container(obj: dict) -> dict:
    spec = obj["spec"]["template"]["spec"] if obj["kind"] == "Job" else None
    if spec is None:
        spec = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == "tensorflow")


def _args(objects: list[dict]) -> list[str]:
    first = next(o for o in objects if o["kind"] in ("Job", "JobSet"))
    container = _container(first)
    return [*container.get("command", []), *container.get("args", [])]
