"""What the per-step SIGTERM vote (worker/lifecycle/agreement.py) costs: steps/s of a local MWMS cluster
(2 workers, custom loop, --data digits) with this checkout's worker, optionally against another
checkout's (one from before the vote) in interleaved repeats. Prints a Markdown table with
the ratio.

    python bench/vote.py                              # this checkout only
    python bench/vote.py --baseline /path/to/old/checkout --repeats 3

Each run goes through that checkout's own LocalBackend (its tasks import its worker). Steps/s
is the median over the custom loop's blocks (--checkpoint-every steps, first block excluded,
checkpoint saves not included) of worker 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

RUN = r"""
import json, sys, tempfile
from pathlib import Path
from launcher.backends.local import LocalBackend
from launcher.cluster_spec.spec import ClusterSpec
steps, every = int(sys.argv[1]), int(sys.argv[2])
work = Path(tempfile.mkdtemp(prefix="tfk8s-vote-"))
spec = ClusterSpec.model_validate({
    "name": "vote", "strategy": "multi_worker_mirrored",
    "program": {"args": ["--steps", str(steps), "--checkpoint-every", str(every),
                          "--global-batch-size", "64", "--data", "digits"]},
    "roles": {"worker": {"replicas": 2}},
    "checkpoint": {"dir": "/ckpt/vote", "volume": {"persistentVolumeClaim": {"claimName": "x"}}},
})
out = open(work / "out.log", "w")
try:
    from launcher.backends.local import LocalProcessBackendConfig
    config = LocalProcessBackendConfig(workdir=work, foreground=True, echo_tasks=True)
    backend = LocalBackend(config, stream=out)
except ImportError:  # a baseline checkout from before the typed options
    backend = LocalBackend(work, stream=out)
backend.submit(spec)
code = backend.wait("vote")
rates = []
for line in (work / "vote" / "logs" / "worker-0.log").read_text().splitlines():
    if line.startswith("tfk8s-progress ") and '"block"' in line:
        rates.append(json.loads(line.split(" ", 1)[1])["steps_per_s"])
print(json.dumps({"code": code, "rates": rates[1:]}))
"""


def run_once(checkout: Path, steps: int, every: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", RUN, str(steps), str(every)], cwd=checkout, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["code"] != 0 or not result["rates"]:
        raise SystemExit(f"{checkout}: run failed: {result}")
    return statistics.median(result["rates"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="a checkout without the vote")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--every", type=int, default=200)
    opts = parser.parse_args()
    checkouts = {"vote (this checkout)": HERE}
    if opts.baseline:
        checkouts["no vote (baseline)"] = opts.baseline.resolve()
    rates: dict[str, list[float]] = {name: [] for name in checkouts}
    for _ in range(opts.repeats):
        for name, checkout in checkouts.items():  # interleaved: load drifts hit both alike
            rates[name].append(run_once(checkout, opts.steps, opts.every))
    print("| worker | steps/s per run (median of blocks) | median |\n|---|---|---|")
    for name, values in rates.items():
        print(f"| {name} | {', '.join(f'{v:.1f}' for v in values)} | {statistics.median(values):.1f} |")
    if opts.baseline:
        ratio = statistics.median(rates["vote (this checkout)"]) / statistics.median(rates["no vote (baseline)"])
        print(f"\nvote / baseline steps/s: {ratio:.3f}")


if __name__ == "__main__":
    main()
