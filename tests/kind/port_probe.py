"""Real TCP connects from inside a pod, for the NetworkPolicy checks (test_network.py, and the
monitoring namespace's view in prometheus_check.py)."""

from __future__ import annotations

import json

from conftest import make_restricted_pod

# Real TCP connects from inside a pod: each target is tried `attempts` times (or its own count,
# a fourth element), 2 s timeout each. kube-router admits a new pod's IP a moment after the pod
# starts (seconds more on a loaded machine: it refuses until then), so an allowed connect may
# need retries; a blocked one must fail every time.
PROBE = r"""
import json, socket, sys, time
targets, attempts = json.loads(sys.argv[1]), int(sys.argv[2])
for name, ip, port, *own in targets:
    result = {"target": name, "connected": False, "errors": []}
    for _ in range(own[0] if own else attempts):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect((ip, port))
            result["connected"] = True
            break
        except OSError as e:
            result["errors"].append(f"{type(e).__name__}: {e}")
            time.sleep(1)
        finally:
            s.close()
    print(json.dumps(result), flush=True)
"""


def start_probe(
    cluster,
    namespace: str,
    name: str,
    image: str,
    labels: dict[str, str],
    targets: list[tuple[str, str, int]],
    attempts: int,
) -> None:
    pod = make_restricted_pod(name, image, ["python3", "-c", PROBE, json.dumps(targets), str(attempts)])
    pod["metadata"]["labels"] = labels
    cluster.apply(pod, namespace=namespace)


def probe_results(cluster, namespace: str, name: str) -> dict[str, dict]:
    cluster.kubectl(
        "-n", namespace, "wait", "--for=jsonpath={.status.phase}=Succeeded", f"pod/{name}", "--timeout=180s"
    )
    out = cluster.kubectl("-n", namespace, "logs", name).stdout
    cluster.kubectl("-n", namespace, "delete", "pod", name, "--wait=false", check=False)
    return {r["target"]: r for r in map(json.loads, out.splitlines())}
