"""What serving Prometheus metrics costs a training: steps/s of a local parameter-server run
while its every task is scraped once a second, against the same run while it is not, and each
role's peak memory with the endpoint against without it (TFK8S_METRICS_PORT=0). Prints a
Markdown section (for docs/benchmarks.md).

    python bench/metrics.py                    # 4 runs of 1500 steps (+ 1 run without metrics)
    python bench/metrics.py --runs 1 --steps 600
    python bench/metrics.py --sham             # the control: the same classing, nothing scraped

The comparison is made inside each run: the scraper alternates --window seconds of scraping
every task once a second with --window seconds of silence, and every block of steps the chief
reports (--checkpoint-every steps, its time without the checkpoint save) is classed by the
window it lies wholly in; blocks that straddle a switch are left out. Comparing separate runs
instead mixes in how far two runs of the same spec differ on this 2-core VM (10% measured
between unscraped runs), five times the 2% being looked for. Runs are bench/local.py's
distributed configuration (chief, --workers workers, 1 ps; the CNN on --data digits).
"""

from __future__ import annotations

import argparse
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
    `window` seconds that alternate with windows of none; records when each window began."""

    seconds = SCRAPE_SECONDS

    def __init__(self, backend: LocalBackend, name: str, window: float, sham: bool = False, first_scraped: bool = True):
        self.backend, self.name, self.window, self.sham = backend, name, window, sham
        # Which window the run starts with: the first training blocks (still warming up) fall
        # in the same window of every run, so runs alternate it (a --sham control showed 0.967
        # when every run started scraped).
        self.phase = 0 if first_scraped else 1
        self.scrapes = 0
        self.started = time.time()

    def scraping(self, at: float) -> bool:
        return int((at - self.started) // self.window + self.phase) % 2 == 0

    def tick(self) -> None:
        if self.sham or not self.scraping(time.time()):
            return
        for address in (run_files(self.backend, self.name).read_metrics() or {}).values():
            try:
                urllib.request.urlopen(address, timeout=2).read()
                self.scrapes += 1
            except OSError:
                pass  # not serving yet, or ended

    def window_of(self, start: float, end: float) -> str | None:
        """'scraped' or 'not scraped' for a span wholly inside one window, else None."""
        first, last = ((t - self.started) // self.window for t in (start, end))
        if first != last or start < self.started:
            return None
        return "scraped" if self.scraping(start) else "not scraped"


def blocks_by_window(backend: LocalBackend, name: str, scraper: AlternatingScraper) -> dict[str, list[float]]:
    """The chief's blocks' steps/s, by the window each ran in (the first block, warm-up, left out)."""
    log = run_files(backend, name).log_path("chief", 0).read_text(errors="replace")
    records = [r for r in map(parse_line, log.splitlines()) if r and r["event"] == "block"][1:]
    classed: dict[str, list[float]] = {"scraped": [], "not scraped": []}
    for block in records:
        window = scraper.window_of(block["wall"] - block["seconds"], block["wall"])
        if window is not None and block["steps_per_s"]:
            classed[window].append(block["steps_per_s"])
    return classed


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
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--checkpoint-every", type=int, default=25)
    parser.add_argument("--window", type=float, default=12.0, help="seconds of scraping, then of none")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--runs", type=int, default=4, help="even: half the runs start scraped")
    parser.add_argument(
        "--sham", action="store_true", help="the control: windows classed alike, nothing scraped in any (ratio ~1)"
    )
    args = parser.parse_args(argv)
    program_args = [
        *("--loop", "custom", "--steps", str(args.steps)),
        *("--checkpoint-every", str(args.checkpoint_every), "--data", "digits"),
    ]
    roles = {"chief": 1, "worker": args.workers, "ps": 1}
    cpu = scrape_cpu()
    per_run, with_endpoint, scrapes = [], [], 0
    with tempfile.TemporaryDirectory(prefix="tfk8s-bench-metrics-") as workdir:
        backend = LocalBackend(LocalProcessBackendConfig(workdir=Path(workdir), foreground=True))
        for run in range(args.runs):
            # a name (and so a model dir) per run: a finished dir would not train again
            spec = spec_for(f"metrics-{run}", "parameter_server", roles, program_args)
            with AlternatingScraper(backend, spec.name, args.window, args.sham, run % 2 == 0) as scraper:
                with_endpoint.append(run_once(backend, spec))
            scrapes += scraper.scrapes
            classed = blocks_by_window(backend, spec.name, scraper)
            per_run.append(classed)
            said = [f"{k} {statistics.median(v):.2f} steps/s ({len(v)} blocks)" for k, v in classed.items() if v]
            print(f"[bench] run {run}: {', '.join(said)}", flush=True)
        spec = spec_for("metrics-off", "parameter_server", roles, program_args)
        without_endpoint = run_once(backend, spec.model_copy(update={"env": {"TFK8S_METRICS_PORT": "0"}}))
    print(markdown(args, per_run, scrapes, with_endpoint, without_endpoint, cpu))
    return 0


def markdown(args, per_run: list[dict[str, list[float]]], scrapes: int, with_endpoint, without_endpoint, cpu) -> str:
    def peak(runs: list[dict], role: str) -> float:
        return statistics.median(r["peak_mb"].get(role, 0.0) for r in runs)

    lines = [
        f"### Metrics endpoint: {args.runs} runs, PS (chief, {args.workers} worker, 1 ps), {args.steps} steps, "
        f"{args.window:g} s windows scraped every {SCRAPE_SECONDS:g} s / not scraped"
        + (" (sham: no window scraped, the control)" if args.sham else ""),
        "",
        "| run | blocks scraped | steps/s scraped | blocks not scraped | steps/s not scraped | ratio |",
        "|---|---|---|---|---|---|",
    ]
    ratios = []
    for run, classed in enumerate(per_run):
        on, off = classed["scraped"], classed["not scraped"]
        if not on or not off:
            lines.append(f"| {run} | {len(on)} | - | {len(off)} | - | - |")
            continue
        ratio = statistics.median(on) / statistics.median(off)
        ratios.append(ratio)
        on_rate, off_rate = statistics.median(on), statistics.median(off)
        lines.append(f"| {run} | {len(on)} | {on_rate:.2f} | {len(off)} | {off_rate:.2f} | {ratio:.3f} |")
    if ratios:
        lines += [
            "",
            f"Scraped / not scraped steps/s, per run: {', '.join(f'{r:.3f}' for r in ratios)}; median "
            f"**{statistics.median(ratios):.3f}** ({scrapes} scrapes in all).",
        ]
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
