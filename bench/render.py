"""Render benchmark: our Indexed-Job layout vs a TFJob-style one-pod-one-service layout.

For N = 1, 10, 100, 1000 workers (1 chief, 2 ps, 1 evaluator) it prints render time, object
count and total bytes (compact JSON of every object). The TFJob-style layout is computed from the
same rendered pod template: one Pod and one Service per task, each pod with its own fully
expanded TF_CONFIG, as the Kubeflow training operator creates them.

    python bench/render.py [--repeat 5] [--sizes 1,10,100,1000]
    python bench/render.py --jobset     # the Jobs projection beside the JobSet one

--jobset prints, for the same N, objects and bytes of `workload: jobs` (ConfigMap, Service,
RBAC, NetworkPolicies, one Job per role) beside `workload: jobset` (one JobSet, plus the
evaluator's supervisor ConfigMap and RBAC, and the NetworkPolicies).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from launcher import k8s_contract  # noqa: E402
from launcher.cluster_spec import names
from launcher.cluster_spec.loader import load_text  # noqa: E402
from launcher.plan import plan
from launcher.render import render, tfconfig
from worker import contract  # noqa: E402

SPEC = """\
name: bench
strategy: parameter_server
roles:
  chief: {{replicas: 1}}
  worker: {{replicas: {n}}}
  ps: {{replicas: 2}}
  evaluator: {{replicas: 1}}
checkpoint: {{dir: gs://bucket/bench}}
"""


def ours(spec) -> list[dict]:
    return render.render(plan.plan(spec))


def tfjob_style(spec) -> list[dict]:
    """One Pod + one Service per task, each Pod carrying its own expanded TF_CONFIG."""
    jobs = {
        o["metadata"]["labels"].get(k8s_contract.LABEL_COMPONENT): o
        for o in render.render(plan.plan(spec))
        if o["kind"] == "Job"
    }
    cluster = plan.plan(spec)
    address = tfconfig.kubernetes_address(cluster)
    out = []
    for role in spec.active_roles():
        template = jobs[role]["spec"]["template"]
        for index in range(spec.replicas(role)):
            name = names.hostname(spec.name, role, index)
            pod_spec = copy.deepcopy(template["spec"])
            env = pod_spec["containers"][0]["env"]
            for var in env:
                if var["name"] == contract.TF_CONFIG:
                    var["value"] = json.dumps(cluster.tf_config(role, index, address), separators=(",", ":"))
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": spec.namespace,
                        "labels": {**template["metadata"]["labels"], "tfk8s.io/index": str(index)},
                    },
                    "spec": pod_spec,
                }
            )
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": name, "namespace": spec.namespace},
                    "spec": {
                        "clusterIP": "None",
                        "selector": {k8s_contract.LABEL_INSTANCE: spec.name, "tfk8s.io/index": str(index)},
                        "ports": [{"port": spec.port}],
                    },
                }
            )
    return out


def measure(layout, spec, repeat: int) -> tuple[float, int, int]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        objects = layout(spec)
        size = len(json.dumps(objects, separators=(",", ":")))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, len(objects), size


def jobset(spec) -> list[dict]:
    return render.render(plan.plan(spec.model_copy(update={"workload": contract.Workload.JOBSET})))


def compare_projections(sizes, repeat: int) -> None:
    print(
        "| workers | jobs ms | jobs objects | jobs bytes | jobset ms | jobset objects "
        "| jobset bytes | bytes jobset/jobs |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        spec = load_text(SPEC.format(n=n))
        a = measure(ours, spec, repeat)
        b = measure(jobset, spec, repeat)
        print(f"| {n} | {a[0]:.1f} | {a[1]} | {a[2]:,} | {b[0]:.1f} | {b[1]} | {b[2]:,} | {b[2] / a[2]:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", default="1,10,100,1000")
    parser.add_argument("--jobset", action="store_true", help="compare the Jobs projection with the JobSet projection")
    args = parser.parse_args()
    render.render(plan.plan(load_text(SPEC.format(n=1))))  # warm the template cache
    if args.jobset:
        compare_projections([int(s) for s in args.sizes.split(",")], args.repeat)
        return
    print(
        "| workers | ours ms | ours objects | ours bytes | tfjob-style ms | tfjob-style objects "
        "| tfjob-style bytes | bytes ratio |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        spec = load_text(SPEC.format(n=n))
        a = measure(ours, spec, args.repeat)
        b = measure(tfjob_style, spec, max(1, args.repeat // (5 if n >= 1000 else 1)))
        print(f"| {n} | {a[0]:.1f} | {a[1]} | {a[2]:,} | {b[0]:.1f} | {b[1]} | {b[2]:,} | {b[2] / a[2]:.1f}x |")


if __name__ == "__main__":
    main()
