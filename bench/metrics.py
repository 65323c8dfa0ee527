"""What serving Prometheus metrics costs a training: steps/s of a local parameter-server run
while its every task is scraped once a second, against the same run while it is not, and each
role's peak memory with the endpoint against without it (TFK8S_METRICS_PORT=0). Prints a
Markdown section (for docs/benchmarks.md).

    python bench/metrics.py                    # 6 runs and 3 sham runs of 2000 steps (~30 min)
    python bench/metrics.py --runs 2 --controls 1 --steps 800 --raw /tmp/metrics.json
    python bench/metrics.py --report /tmp/metrics.json /tmp/more.json   # runs of both, together

The comparison is made inside each run, since runs of one spec spread 10% on this 2-core VM,
five times the 2% being looked for: the scraper alternates --window seconds of scraping every
task once a second with --window seconds of none. A window's steps/s is its chief blocks'
(--checkpoint-every steps each, timed without the checkpoint save) steps over their seconds;
blocks that straddle a switch, and those of the first --warmup seconds after the first step,
are left out. Each scraped window is compared with the mean of the not-scraped windows on
either side of it, so a slow drift of the run's speed cancels out of the ratio.

The control: sham runs, interleaved with the real ones, keep the same windows and classing and
scrape in none; their ratios show the method's own spread (a first version, which compared
every block of a class and started every run scraped, gave 0.967 on a sham). Runs are
bench/local.py's distributed configuration (chief, --workers workers, 1 ps; the CNN on --data
digits). The runs behind docs/benchmarks.md's figures are in bench/results/ (--report them).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local import Every, LocalBackend, LocalProcessBackendConfig, run_files, run_once, spec_for  # noqa: E402

from worker.progress import parse_line  # noqa: E402

SCRAPE_SECONDS = 1.0
REPO = Path(__file__).resolve().parents[1]
# A chief's endpoint with the series a training fills (worker/metrics.py), serving until killed.
ENDPOINT = """
import sys, time, types
from worker import metrics
from worker.contract import METRICS_HOST, METRICS_PORT, Role
task = types.SimpleNamespace(cluster_name="bench", namespace="", role=Role.CHIEF, index=0,
                             strategy="parameter_server", program_module="worker.examples.digits")
print(metrics.start(task, time.time(), 64, {METRICS_PORT: sys.argv[1], METRICS_HOST: "127.0.0.1"}), flush=True)
for event in ("tensorflow_imported", "peers_ready", "start", "first_step"):
    metrics.observe({"event": event, "t": 1.0, "step": 0, "target": 1500})
metrics.observe({"event": "block", "t": 9.0, "step": 25, "steps": 25, "seconds": 2.0, "steps_per_s": 12.5, "loss": 0.1})
metrics.observe({"event": "checkpoint", "t": 9.5, "step": 25})
metrics.observe({"event": "evaluated", "t": 12.0, "step": 25, "accuracy": 0.9, "loss": 0.2})
time.sleep(3600)
"""


class AlternatingScraper(Every):
    """Scrapes every task's endpoint once a second, as Prometheus would, in windows of
    `window` seconds that alternate with windows of none. A sham scraper (the control) keeps
    the same windows and scrapes in none."""

    seconds = SCRAPE_SECONDS

    def __init__(self, backend: LocalBackend, name: str, window: float, sham: bool, first_scraped: bool):
        self.backend, self.name, self.window, self.sham = backend, name, window, sham
        # Which kind of window comes first alternates between runs, so that no kind always
        # meets the same part of a run.
        self.phase = 0 if first_scraped else 1
        self.scrapes = 0
        self.started = time.time()

    def window_number(self, start: float, end: float) -> int | None:
        """The window a span lies wholly inside, None if it straddles a switch."""
        first, last = (int((t - self.started) // self.window) for t in (start, end))
        return first if first == last and start >= self.started else None

    def kind(self, number: int) -> str:
        return "scraped" if (number + self.phase) % 2 == 0 else "not scraped"

    def tick(self) -> None:
        now = time.time()
        if self.sham or self.kind(int((now - self.started) // self.window)) != "scraped":
            return
        for address in (run_files(self.backend, self.name).read_metrics() or {}).values():
            try:
                urllib.request.urlopen(address, timeout=2).read()
                self.scrapes += 1
            except OSError:
                pass  # not serving yet, or ended


def chief_blocks(backend: LocalBackend, name: str) -> tuple[list[dict], float]:
    """The chief's blocks (start, end, steps, seconds; wall-clock) and when its first step ended."""
    log = run_files(backend, name).log_path("chief", 0).read_text(errors="replace")
    records = [r for r in map(parse_line, log.splitlines()) if r]
    first_step = next(r["wall"] for r in records if r["event"] == "first_step")
    return [
        {"start": r["wall"] - r["seconds"], "end": r["wall"], "steps": r["steps"], "seconds": r["seconds"]}
        for r in records
        if r["event"] == "block" and r["seconds"] > 0
    ], first_step


def window_rates(blocks: list[dict], scraper: "AlternatingScraper", after: float) -> dict[int, tuple[str, float]]:
    """Steps/s of each window (its blocks' steps over their seconds), by window number, with
    the window's kind. Blocks that straddle a switch, or start before `after`, are left out."""
    steps: dict[int, list[float]] = {}
    for block in blocks:
        number = scraper.window_number(block["start"], block["end"])
        if number is None or block["start"] < after:
            continue
        steps.setdefault(number, [0.0, 0.0])
        steps[number][0] += block["steps"]
        steps[number][1] += block["seconds"]
    return {n: (scraper.kind(n), done / seconds) for n, (done, seconds) in sorted(steps.items())}


def neighbour_ratios(rates: dict[int, tuple[str, float]]) -> list[float]:
    """Each scraped window's steps/s over the mean of the not-scraped windows on either side
    of it (one or both): a slow drift of the run's speed cancels out of each ratio."""
    ratios = []
    for number, (kind, rate) in rates.items():
        if kind != "scraped":
            continue
        around = [rates[n][1] for n in (number - 1, number + 1) if n in rates and rates[n][0] == "not scraped"]
        if around:
            ratios.append(rate / statistics.fmean(around))
    return ratios


def scrape_cpu(scrapes: int = 500, port: int = 19401) -> dict:
    """CPU a scrape costs, apart from any training: the endpoint's process (prometheus_client's
    HTTP thread collecting every series and the process collector) and the reader's."""
    server = subprocess.Popen([sys.executable, "-c", ENDPOINT, str(port)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        address = server.stdout.readline().strip()
        urllib.request.urlopen(address, timeout=10).read()
        served = psutil.Process(server.pid)
        server_before, client_before = sum(served.cpu_times()[:2]), time.process_time()
        for _ in range(scrapes):
            size = len(urllib.request.urlopen(address, timeout=10).read())
        server_ms = 1000 * (sum(served.cpu_times()[:2]) - server_before) / scrapes
        client_ms = 1000 * (time.process_time() - client_before) / scrapes
    finally:
        server.kill()
        server.wait()
    return {"server_ms": server_ms, "client_ms": client_ms, "bytes": size, "scrapes": scrapes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--checkpoint-every", type=int, default=25)
    parser.add_argument("--window", type=float, default=10.0, help="seconds of scraping, then of none")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds after the first step left out")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--runs", type=int, default=6, help="runs scraped in every other window")
    parser.add_argument("--controls", type=int, default=3, help="sham runs: the same windows, none scraped")
    parser.add_argument("--raw", type=Path, help="write every run's windows and blocks here (JSON)")
    parser.add_argument(
        "--report", type=Path, nargs="+", metavar="RAW", help="run nothing: the ratios of earlier --raw files together"
    )
    args = parser.parse_args(argv)
    if args.report:
        unreadable = [str(path) for path in args.report if not path.is_file()]
        if unreadable:
            parser.error(f"--report: no such file: {', '.join(unreadable)} (files written by --raw)")
        print(report(args.report))
        return 0
    program_args = [
        *("--loop", "custom", "--steps", str(args.steps)),
        *("--checkpoint-every", str(args.checkpoint_every), "--data", "digits"),
    ]
    roles = {"chief": 1, "worker": args.workers, "ps": 1}
    cpu = scrape_cpu()
    # Controls interleaved with the real runs, so both meet the same state of the VM.
    shams = interleave(args.runs, args.controls)
    runs, with_endpoint = [], []
    with tempfile.TemporaryDirectory(prefix="tfk8s-bench-metrics-") as workdir:
        backend = LocalBackend(LocalProcessBackendConfig(workdir=Path(workdir), foreground=True))
        for number, sham in enumerate(shams):
            # a name (and so a model dir) per run: a finished dir would not train again
            spec = spec_for(f"metrics-{number}", "parameter_server", roles, program_args)
            first_scraped = sum(1 for earlier in shams[:number] if earlier == sham) % 2 == 0
            with AlternatingScraper(backend, spec.name, args.window, sham, first_scraped) as scraper:
                with_endpoint.append(run_once(backend, spec))
            blocks, first_step = chief_blocks(backend, spec.name)
            rates = window_rates(blocks, scraper, first_step + args.warmup)
            run = {
                "sham": sham,
                "first_scraped": first_scraped,
                "scrapes": scraper.scrapes,
                "started": scraper.started,
                "first_step": first_step,
                "windows": {n: {"kind": kind, "steps_per_s": rate} for n, (kind, rate) in rates.items()},
                "ratios": neighbour_ratios(rates),
                "blocks": blocks,
            }
            runs.append(run)
            print(f"[bench] run {number}{' (sham)' if sham else ''}: {describe(run['ratios'])}", flush=True)
        spec = spec_for("metrics-off", "parameter_server", roles, program_args)
        without_endpoint = run_once(backend, spec.model_copy(update={"env": {"TFK8S_METRICS_PORT": "0"}}))
    if args.raw:
        args.raw.write_text(json.dumps({"args": vars(args) | {"raw": str(args.raw), "report": None}, "runs": runs}))
    print(markdown(args, runs, with_endpoint, without_endpoint, cpu))
    return 0


def interleave(runs: int, controls: int) -> list[bool]:
    """Which runs are shams: the controls spread evenly among the real runs."""
    total = runs + controls
    return [controls > 0 and (i * controls) // total != ((i + 1) * controls) // total for i in range(total)]


def describe(ratios: list[float]) -> str:
    if not ratios:
        return "no scraped window with a not-scraped neighbour"
    return f"median {statistics.median(ratios):.3f} of {len(ratios)} scraped windows"


def bootstrap_median(runs: list[list[float]], draws: int = 4000, seed: int = 0) -> tuple[float, float]:
    """A 90% interval of the pooled median, drawing whole runs with replacement (windows of one
    run are not independent of each other)."""
    rng = random.Random(seed)
    medians = sorted(
        statistics.median([ratio for _ in runs for ratio in runs[rng.randrange(len(runs))]]) for _ in range(draws)
    )
    return medians[draws // 20], medians[draws - 1 - draws // 20]


def ratio_lines(runs: list[dict], title: str) -> list[str]:
    """The runs' table and, for the scraped runs and the shams, the pooled median and its interval."""
    lines = [
        title,
        "",
        "| run | sham | first window | scrapes | scraped windows | ratio (median) |",
        "|---|---|---|---|---|---|",
    ]
    for number, run in enumerate(runs):
        ratios = run["ratios"]
        figure = f"{statistics.median(ratios):.3f}" if ratios else "-"
        first = "scraped" if run["first_scraped"] else "not scraped"
        lines.append(
            f"| {number} | {'yes' if run['sham'] else 'no'} | {first} | {run['scrapes']} | {len(ratios)} | {figure} |"
        )
    for sham, name in ((False, "Scraped"), (True, "Sham (nothing scraped)")):
        per_run = [run["ratios"] for run in runs if run["sham"] == sham and run["ratios"]]
        pooled = [ratio for ratios in per_run for ratio in ratios]
        if len(pooled) < 2:
            continue
        quartiles = statistics.quantiles(pooled, n=4)
        low, high = bootstrap_median(per_run)
        lines += [
            "",
            f"{name}, {len(per_run)} runs: each scraped window's steps/s over its not-scraped neighbours', "
            f"{len(pooled)} windows: median **{statistics.median(pooled):.3f}** (90% interval over runs "
            f"{low:.3f}-{high:.3f}), quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}.",
        ]
    return lines


def report(paths: list[Path]) -> str:
    """The ratios of the runs written by --raw, of one or several invocations together."""
    runs = [run for path in paths for run in json.loads(path.read_text())["runs"]]
    return "\n".join(ratio_lines(runs, f"### Metrics endpoint: {len(runs)} runs of {', '.join(map(str, paths))}"))


def markdown(args, runs: list[dict], with_endpoint, without_endpoint, cpu) -> str:
    def peak(samples: list[dict], role: str) -> float:
        return statistics.median(r["peak_mb"].get(role, 0.0) for r in samples)

    title = (
        f"### Metrics endpoint: PS (chief, {args.workers} worker, 1 ps), {args.steps} steps; {args.window:g} s "
        f"windows scraped every {SCRAPE_SECONDS:g} s alternating with windows not scraped; {args.runs} runs "
        f"and {args.controls} sham runs (no window scraped), the first {args.warmup:g} s after the first step "
        "left out"
    )
    lines = ratio_lines(runs, title)
    lines += [
        "",
        f"One scrape of a chief's endpoint ({cpu['bytes']} bytes), mean of {cpu['scrapes']}: "
        f"{cpu['server_ms']:.2f} ms of the task's CPU, {cpu['client_ms']:.2f} ms of the reader's; scraped every "
        f"{SCRAPE_SECONDS:g} s, {cpu['server_ms'] / SCRAPE_SECONDS / 10:.2f}% of one core per task.",
        "",
        "| peak MB | chief | worker | ps |",
        "|---|---|---|---|",
        f"| endpoint | {peak(with_endpoint, 'chief'):.0f} | {peak(with_endpoint, 'worker'):.0f} | "
        f"{peak(with_endpoint, 'ps'):.0f} |",
        f"| no endpoint | {peak([without_endpoint], 'chief'):.0f} | {peak([without_endpoint], 'worker'):.0f} | "
        f"{peak([without_endpoint], 'ps'):.0f} |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
