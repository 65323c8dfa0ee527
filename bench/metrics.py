"""What serving Prometheus metrics costs a training: steps/s of a local parameter-server run
whose every task is scraped once a second, against the same run not scraped, in interleaved
pairs; and each role's peak memory with the endpoint against without it (TFK8S_METRICS_PORT=0).
Prints a Markdown section (for docs/benchmarks.md).

    python bench/metrics.py                  # 3 pairs (+ 1 run without metrics), 400 steps each
    python bench/metrics.py --repeats 1 --steps 200

Runs are bench/local.py's distributed configuration (chief, --workers workers, 1 ps; the CNN on
--data digits; steps/s: the median over blocks, the first excluded).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local import Every, LocalBackend, LocalProcessBackendConfig, run_files, run_once, spec_for  # noqa: E402

SCRAPE_SECONDS = 1.0


class Scraper(Every):
    """Reads every task's endpoint once a second while a run lasts, as Prometheus would."""

    seconds = SCRAPE_SECONDS

    def __init__(self, backend: LocalBackend, name: str):
        self.backend, self.name = backend, name
        self.scrapes = 0

    def tick(self) -> None:
        for address in (run_files(self.backend, self.name).read_metrics() or {}).values():
            try:
                urllib.request.urlopen(address, timeout=2).read()
                self.scrapes += 1
            except OSError:
                pass  # not serving yet, or ended


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    program_args = ["--loop", "custom", "--steps", str(args.steps), "--checkpoint-every", "50", "--data", "digits"]
    roles = {"chief": 1, "worker": args.workers, "ps": 1}
    ratios, runs = [], {"scraped": [], "not scraped": [], "no endpoint": []}
    with tempfile.TemporaryDirectory(prefix="tfk8s-bench-metrics-") as workdir:
        backend = LocalBackend(LocalProcessBackendConfig(workdir=Path(workdir), foreground=True))
        for repeat in range(args.repeats):
            pair = {}
            # alternate which goes first, so a drift in the machine's load hits both alike
            for config in ("scraped", "not scraped") if repeat % 2 == 0 else ("not scraped", "scraped"):
                # a name (and so a model dir) per run: a finished dir would not train again
                spec = spec_for(f"metrics-{repeat}-{config.replace(' ', '-')}", "parameter_server", roles, program_args)
                if config == "scraped":
                    with Scraper(backend, spec.name) as scraper:
                        result = run_once(backend, spec)
                    result["scrapes"] = scraper.scrapes
                else:
                    result = run_once(backend, spec)
                pair[config] = result
                runs[config].append(result)
                print(f"[bench] {config}: {result['block_steps_per_s']:.1f} steps/s", flush=True)
            ratios.append(pair["scraped"]["block_steps_per_s"] / pair["not scraped"]["block_steps_per_s"])
        spec = spec_for("metrics-off", "parameter_server", roles, program_args)
        spec = spec.model_copy(update={"env": {"TFK8S_METRICS_PORT": "0"}})
        runs["no endpoint"].append(run_once(backend, spec))
    print(markdown(args, ratios, runs))
    return 0


def markdown(args, ratios: list[float], runs: dict[str, list[dict]]) -> str:
    def median(config: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[config])

    def peak(config: str, role: str) -> float:
        return statistics.median(r["peak_mb"].get(role, 0.0) for r in runs[config])

    lines = [
        f"### Metrics endpoint: {args.repeats} pairs, PS (chief, {args.workers} worker, 1 ps), {args.steps} steps",
        "",
        "| run | steps/s (median) | chief peak MB | worker peak MB | ps peak MB |",
        "|---|---|---|---|---|",
    ]
    for config in runs:
        lines.append(
            f"| {config} | {median(config, 'block_steps_per_s'):.1f} | {peak(config, 'chief'):.0f} | "
            f"{peak(config, 'worker'):.0f} | {peak(config, 'ps'):.0f} |"
        )
    scrapes = sum(r.get("scrapes", 0) for r in runs["scraped"])
    lines += [
        "",
        f"Scraped / not scraped steps/s, per pair: {', '.join(f'{r:.3f}' for r in ratios)}; "
        f"median {statistics.median(ratios):.3f} ({scrapes} scrapes in all).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
