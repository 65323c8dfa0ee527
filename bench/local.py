"""Parameter-server training run locally vs the same model in one process: time to first step,
steps/s and peak memory per role. Prints a Markdown section (for docs/benchmarks.md).

    python bench/local.py                       # 3 interleaved repeats, 300 steps each
    python bench/local.py --repeats 1 --steps 200 --markdown docs/benchmarks-local.md

Both configurations run the built-in program (worker/examples/fashion_mnist.py, the CNN on
--data digits) with the custom loop and the same global batch, through LocalBackend, so both
include what a user waits for: process start, TensorFlow import, peers, strategy set-up.
- distributed: parameter_server, 1 chief + --workers workers + 1 ps, no evaluator.
- single process: mirrored strategy over the one CPU device (no GPU here), 1 chief.
Numbers come from the chief's progress lines (worker/progress.py):
- first step: seconds from the chief's process start to its first finished step.
- steps/s (blocks): median over blocks of --checkpoint-every steps, first block excluded; a
  block's time excludes the checkpoint save after it.
- steps/s (overall): steps after the first / wall time from the first step to the last one,
  checkpoint saves included.
Peak memory: the largest RSS (psutil) seen for any task of a role, sampled every 0.25 s.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from launcher.backends.local import LocalBackend, LocalProcessBackendConfig  # noqa: E402
from launcher.backends.local.files import RunFiles  # noqa: E402
from launcher.cluster_spec.spec import ClusterSpec  # noqa: E402
from worker.progress import parse_line  # noqa: E402

SAMPLE_SECONDS = 0.25


def spec_for(name: str, strategy: str, roles: dict[str, int], program_args: list[str]) -> ClusterSpec:
    return ClusterSpec.model_validate(
        {
            "name": name,
            "strategy": strategy,
            "program": {"args": program_args},
            "roles": {role: {"replicas": n} for role, n in roles.items()},
            "restartPolicy": "Never",
        }
    )


class Every:
    """Calls tick() every `seconds` in a thread while the `with` block runs."""

    seconds = SAMPLE_SECONDS

    def __enter__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(self.seconds)

    def tick(self) -> None:
        raise NotImplementedError


class MemorySampler(Every):
    """Largest RSS per role while a cluster runs, from the backend's pid files."""

    def __init__(self, backend: LocalBackend, spec: ClusterSpec):
        self.backend, self.spec = backend, spec
        self.peak_mb: dict[str, float] = {}

    def tick(self) -> None:
        for role in self.spec.active_roles():
            for index in range(self.spec.replicas(role)):
                pid = run_files(self.backend, self.spec.name).read_pid(role, index)
                if pid is None:
                    continue
                try:
                    rss = psutil.Process(pid).memory_info().rss / 2**20
                except psutil.Error:
                    continue
                self.peak_mb[role] = max(self.peak_mb.get(role, 0.0), rss)


def run_files(backend: LocalBackend, name: str) -> RunFiles:
    return RunFiles(backend.config.resolved_workdir, name)


def run_once(backend: LocalBackend, spec: ClusterSpec) -> dict:
    submitted = time.time()
    with MemorySampler(backend, spec) as memory:
        backend.submit(spec, replace=True)
        exit_code = backend.wait(spec.name)
    if exit_code != 0:
        raise SystemExit(
            f"{spec.name} failed with exit code {exit_code}; see {run_files(backend, spec.name).log_path('chief', 0)}"
        )
    records = [
        parse_line(line)
        for line in run_files(backend, spec.name).log_path("chief", 0).read_text(errors="replace").splitlines()
        if "tfk8s-progress" in line
    ]
    first = next(r for r in records if r["event"] == "first_step")
    blocks = [r for r in records if r["event"] == "block"]
    last = blocks[-1]
    return {
        "first_step_s": first["t"],
        "submit_to_first_step_s": first["wall"] - submitted,
        "block_steps_per_s": statistics.median(b["steps_per_s"] for b in blocks[1:] or blocks),
        "overall_steps_per_s": (last["step"] - first["step"]) / (last["wall"] - first["wall"]),
        "peak_mb": memory.peak_mb,
        "wall_s": time.time() - submitted,
    }


def median_of(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--global-batch-size", type=int, default=64)
    parser.add_argument("--checkpoint-every", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs of each")
    parser.add_argument("--data", default="digits")
    parser.add_argument("--markdown", type=Path, help="also write the Markdown section here")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where runs and their logs go (default: a temporary directory, removed after a successful benchmark)",
    )
    args = parser.parse_args(argv)

    program_args = [
        "--loop",
        "custom",
        "--steps",
        str(args.steps),
        "--global-batch-size",
        str(args.global_batch_size),
        "--checkpoint-every",
        str(args.checkpoint_every),
        "--data",
        args.data,
    ]
    configs = {
        f"parameter_server: chief + {args.workers} workers + 1 ps": spec_for(
            "bench-ps", "parameter_server", {"chief": 1, "worker": args.workers, "ps": 1}, program_args
        ),
        "single process (mirrored, 1 CPU device)": spec_for("bench-single", "mirrored", {"chief": 1}, program_args),
    }
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="tfk8s-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    output = (workdir / "cluster-output.log").open("w")  # task output; the logs stay per task
    config = LocalProcessBackendConfig(workdir=workdir, foreground=True, echo_tasks=True)
    backend = LocalBackend(config, stream=output)
    results: dict[str, list[dict]] = {label: [] for label in configs}
    load_before = _load_average()
    for repeat in range(args.repeats):
        for label, spec in configs.items():
            # A fresh model dir each time: a finished run would otherwise be a no-op.
            shutil.rmtree(run_files(backend, spec.name).model_dir(spec), ignore_errors=True)
            result = run_once(backend, spec)
            results[label].append(result)
            print(
                f"[bench] repeat {repeat + 1}/{args.repeats} {label}: first step "
                f"{result['first_step_s']:.1f} s, {result['block_steps_per_s']:.1f} steps/s "
                f"(blocks), {result['overall_steps_per_s']:.1f} overall",
                flush=True,
            )
    output.close()
    if args.workdir is None:
        shutil.rmtree(workdir)  # kept when a run fails: its logs are what to read then
    text = markdown(args, results, load_before)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
        print(f"[bench] wrote {args.markdown}")
    return 0


def markdown(args, results: dict[str, list[dict]], load_before: str) -> str:
    labels = list(results)
    distributed, single = (results[label] for label in labels)
    ratio_blocks = median_of(distributed, "block_steps_per_s") / median_of(single, "block_steps_per_s")
    ratio_overall = median_of(distributed, "overall_steps_per_s") / median_of(single, "overall_steps_per_s")
    load = _load_average()
    lines = [
        "## Local runs: parameter server vs one process",
        "",
        f"`python bench/local.py --steps {args.steps} --repeats {args.repeats}` on "
        f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, {_tf_version()}, Python "
        f"{platform.python_version()}. The built-in CNN on "
        f"`--data {args.data}`, custom loop, global batch {args.global_batch_size}, "
        f"{args.steps} steps, a checkpoint every {args.checkpoint_every}; medians of "
        f"{args.repeats} interleaved runs.",
        "",
        "| configuration | first step (s from process start) | submit to first step (s) "
        "| steps/s (blocks) | steps/s (overall) | peak RSS per role (MB) |",
        "|---|---|---|---|---|---|",
    ]
    for label in labels:
        runs = results[label]
        peaks = {}
        for run in runs:
            for role, mb in run["peak_mb"].items():
                peaks[role] = max(peaks.get(role, 0.0), mb)
        memory = ", ".join(f"{role} {mb:.0f}" for role, mb in peaks.items())
        lines.append(
            f"| {label} | {median_of(runs, 'first_step_s'):.1f} "
            f"| {median_of(runs, 'submit_to_first_step_s'):.1f} "
            f"| {median_of(runs, 'block_steps_per_s'):.1f} "
            f"| {median_of(runs, 'overall_steps_per_s'):.1f} | {memory} |"
        )
    lines += [
        "",
        f"Distributed / single steps/s: **{ratio_blocks:.2f}x** (blocks), "
        f"**{ratio_overall:.2f}x** (overall); time to first step "
        f"{median_of(distributed, 'first_step_s') / median_of(single, 'first_step_s'):.1f}x. "
        "Each parameter-server step is a remote call from the chief to a worker, which reads and "
        "writes the variables on the ps, and the cluster has 4 TensorFlow processes to start "
        "instead of 1. The steps/s ratio depends on what else runs on the cores: against other "
        "load, 4 processes win a larger share of the CPU than 1, which favours the distributed "
        f"run (load average here: {load_before} before, {load} after). Locally, distribution "
        "tests the mechanics (TF_CONFIG, restarts, evaluation), not speed.",
        "",
    ]
    return "\n".join(lines)


def _load_average() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def _tf_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            continue
    return "TensorFlow (version unknown)"


if __name__ == "__main__":
    sys.exit(main())
