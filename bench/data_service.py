"""Where an input pipeline's CPU goes with and without the tf.data service: the trainer's CPU
seconds per step, the data workers', and the steps/s, locally. Prints a Markdown section (for
docs/data-service.md).

    python bench/data_service.py                      # 300 steps, 2 data workers, 2 repeats
    python bench/data_service.py --repeats 1 --steps 200

Both configurations train bench/heavy_input_program.py (the digits model behind a deliberately
CPU-heavy pipeline) with the mirrored strategy, one trainer (chief), through LocalBackend:
- without: the chief runs the pipeline in its own tf.data threads;
- with: `dataService: {workers: N}` and `--data-service`, the pipeline runs on the data workers.
CPU seconds come from psutil (user + system of each task's process, sampled every 0.25 s), over
the window from the chief's first step to its last block (start-up left out); steps/s over the same
window. On a machine with fewer cores than tasks the wall clock cannot improve: the data workers
take the same cores the chief had. What the figures show is where the work moved.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from bisect import bisect_right
from pathlib import Path

import psutil

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import local as bench_local  # noqa: E402 - bench/local.py: run files, the sampler thread, machine facts

from launcher.backends.local import LocalBackend, LocalProcessBackendConfig  # noqa: E402
from launcher.cluster_spec.spec import ClusterSpec  # noqa: E402
from worker.progress import parse_line  # noqa: E402

PROGRAM = "heavy_input_program"


def spec_for(name: str, program_args: list[str], data_workers: int) -> ClusterSpec:
    service = {"dataService": {"workers": data_workers}} if data_workers else {}
    args = program_args + (["--data-service"] if data_workers else [])
    return ClusterSpec.model_validate(
        {
            "name": name,
            "strategy": "mirrored",
            "program": {"module": PROGRAM, "args": args},
            "roles": {"chief": {"replicas": 1}},
            "restartPolicy": "Never",
            **service,
        }
    )


class CpuSampler(bench_local.Every):
    """(wall, CPU seconds) of every task of a run, from the backend's pid files."""

    def __init__(self, backend: LocalBackend, spec: ClusterSpec):
        self.backend, self.spec = backend, spec
        self.samples: dict[tuple[str, int], list[tuple[float, float]]] = {}

    def tick(self) -> None:
        for role in self.spec.active_roles():
            for index in range(self.spec.replicas(role)):
                pid = bench_local.run_files(self.backend, self.spec.name).read_pid(role, index)
                try:
                    times = psutil.Process(pid).cpu_times() if pid else None
                except psutil.Error:
                    continue
                if times is not None:
                    self.samples.setdefault((role.value, index), []).append((time.time(), times.user + times.system))

    def cpu_between(self, role: str, start: float, end: float) -> float:
        """CPU seconds the role's tasks spent from `start` to `end` (the last samples before each)."""
        total = 0.0
        for (task_role, _), series in self.samples.items():
            if task_role != role:
                continue
            walls = [wall for wall, _ in series]
            at = [series[max(bisect_right(walls, t) - 1, 0)][1] for t in (start, end)]
            total += at[1] - at[0]
        return total


def run_once(backend: LocalBackend, spec: ClusterSpec) -> dict:
    with CpuSampler(backend, spec) as cpu:
        backend.submit(spec, replace=True)
        exit_code = backend.wait(spec.name)
    log = bench_local.run_files(backend, spec.name).log_path("chief", 0)
    if exit_code != 0:
        raise SystemExit(f"{spec.name} failed with exit code {exit_code}; see {log}")
    records = [parse_line(line) for line in log.read_text(errors="replace").splitlines() if "tfk8s-progress" in line]
    first = next(r for r in records if r["event"] == "first_step")
    last = [r for r in records if r["event"] == "block"][-1]
    steps, seconds = last["step"] - first["step"], last["wall"] - first["wall"]
    result = {"steps_per_s": steps / seconds}
    for role in ("chief", "data-worker", "dispatcher"):
        result[f"{role}_cpu_per_step"] = cpu.cpu_between(role, first["wall"], last["wall"]) / steps
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--data-workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="interleaved runs of each")
    parser.add_argument("--markdown", type=Path, help="also write the Markdown section here")
    args = parser.parse_args(argv)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH), os.environ.get("PYTHONPATH")]))
    program_args = ["--steps", str(args.steps), "--checkpoint-every", "50", "--global-batch-size", "64"]
    configs = {
        "without the service (the chief runs the pipeline)": spec_for("bench-input-local", program_args, 0),
        f"with the service ({args.data_workers} data workers)": spec_for(
            "bench-input-service", program_args, args.data_workers
        ),
    }
    workdir = Path(tempfile.mkdtemp(prefix="tfk8s-bench-data-"))
    output = (workdir / "cluster-output.log").open("w")
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir, foreground=True, echo_tasks=True), stream=output)
    load_before = bench_local._load_average()
    results: dict[str, list[dict]] = {label: [] for label in configs}
    for repeat in range(args.repeats):
        for label, spec in configs.items():
            shutil.rmtree(bench_local.run_files(backend, spec.name).dir, ignore_errors=True)  # a fresh run each time
            result = run_once(backend, spec)
            results[label].append(result)
            print(f"[bench] {repeat + 1}/{args.repeats} {label}: {result}", flush=True)
    output.close()
    shutil.rmtree(workdir)
    text = markdown(args, results, load_before)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


def markdown(args, results: dict[str, list[dict]], load_before: str) -> str:
    def median(label: str, key: str) -> float:
        return statistics.median(run[key] for run in results[label])

    without, with_service = list(results)
    lines = [
        f"`python bench/data_service.py --steps {args.steps} --data-workers {args.data_workers} "
        f"--repeats {args.repeats}` on {os.cpu_count()} cores, {bench_local._tf_version()}, "
        f"{time.strftime('%Y-%m-%d')}; medians of {args.repeats} interleaved runs (load average "
        f"{load_before} before, {bench_local._load_average()} after).",
        "",
        "| configuration | chief CPU-s/step | data workers CPU-s/step | dispatcher CPU-s/step | steps/s |",
        "|---|---:|---:|---:|---:|",
    ]
    for label in results:
        lines.append(
            f"| {label} | {median(label, 'chief_cpu_per_step'):.3f} | {median(label, 'data-worker_cpu_per_step'):.3f} "
            f"| {median(label, 'dispatcher_cpu_per_step'):.3f} | {median(label, 'steps_per_s'):.1f} |"
        )
    chief_ratio = median(with_service, "chief_cpu_per_step") / median(without, "chief_cpu_per_step")
    speed_ratio = median(with_service, "steps_per_s") / median(without, "steps_per_s")
    lines += [
        "",
        f"With the service the chief spends **{chief_ratio:.2f}x** the CPU per step it spent running "
        f"the pipeline itself; steps/s **{speed_ratio:.2f}x**.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
