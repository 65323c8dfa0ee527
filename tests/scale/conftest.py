"""Fixtures of the scale tier: a kind cluster `tfk8s-scale` whose training pods land on KWOK's
simulated nodes, with an audit log that counts the training pods' own API requests.

* cluster: one control-plane node (kind-config.yaml here: audit log, controller QPS); created
  for the tier and deleted after its last test (kept with TFK8S_KEEP_CLUSTER=1; an existing
  `tfk8s-scale` is reused and kept, except in CI, where it is created afresh).
* KWOK (`tests/kind/toolchain.sh` builds it, env.sh names it TFK8S_KWOK) runs on the host
  against the cluster's kubeconfig: no image. It manages the nodes annotated
  kwok.x-k8s.io/node=fake (tainted, so real pods stay off them) with kwok-stages.yaml.
* The audit log is written into a host directory mounted into the node, read here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from kind.conftest import (
    CACHE,
    KindCluster,
    _cluster_exists,
    _env_file_vars,
    create_cluster,
    docker_available,
    run,
    tool_env,
)
from support import TierResource, in_ci, wait_for_the_toolchain

HERE = Path(__file__).resolve().parent
CLUSTER = "tfk8s-scale"
FAKE_NODES = 4
# KWOK renews each simulated node's Lease every quarter of this, as a kubelet does. Said
# explicitly: with only Stages in --config, KWOK 0.7 runs with 0 (no leases) and heartbeats a
# node's status once in 10-20 min, so every node went Unknown 5 min after it was created and a
# test still running then saw NodeLost (clean-clone CI, 2026-11-27).
NODE_LEASE_SECONDS = 40
FAKE_NODE_KEY = "kwok.x-k8s.io/node"  # annotation KWOK selects its nodes by; label and taint too
FAKE_NODE_VALUE = "fake"


@dataclasses.dataclass
class AuditLog:
    path: Path

    def requests_by(self, username: str, since: float, until: float) -> list[dict]:
        """Requests of `username` received in [since, until) (epoch seconds, also as "received")."""
        found = []
        with self.path.open() as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # the API server is still writing this event: read it next time
                event = json.loads(line)
                if (event.get("user") or {}).get("username") != username:
                    continue
                received = _epoch(event["requestReceivedTimestamp"])
                if since <= received < until:
                    found.append({**event, "received": received})
        return found


def _epoch(timestamp: str) -> float:
    """RFC 3339 with microseconds (the audit log's) -> epoch seconds."""
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


@dataclasses.dataclass
class ScaleCluster:
    kind: KindCluster
    audit: AuditLog
    # a role's nodeSelector and tolerations (spec keys) that put its pods on the KWOK nodes
    placement = {
        "nodeSelector": {FAKE_NODE_KEY: FAKE_NODE_VALUE},
        "tolerations": [{"key": FAKE_NODE_KEY, "operator": "Exists", "effect": "NoSchedule"}],
    }


def _kind_config(workdir: Path, audit_dir: Path, policy_dir: Path) -> Path:
    config = yaml.safe_load((HERE / "kind-config.yaml").read_text())
    config["nodes"][0]["extraMounts"] = [
        {"hostPath": str(policy_dir), "containerPath": "/etc/tfk8s-audit", "readOnly": True},
        {"hostPath": str(audit_dir), "containerPath": "/var/log/tfk8s-audit"},
    ]
    path = workdir / "kind-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _kwok_binary(env: dict[str, str]) -> str:
    kwok = os.environ.get("TFK8S_KWOK") or _env_file_vars().get("TFK8S_KWOK")
    if not kwok or not Path(kwok).is_file():
        pytest.fail(
            f"no KWOK binary ({kwok or 'TFK8S_KWOK unset'}): run tests/kind/toolchain.sh "
            f"(its step `kwok` builds it into {CACHE}/tools)",
            pytrace=False,
        )
    return kwok


def fake_node(index: int) -> dict:
    name = f"kwok-node-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_NODE_KEY: FAKE_NODE_VALUE},
            "labels": {FAKE_NODE_KEY: FAKE_NODE_VALUE, "kubernetes.io/hostname": name, "type": "kwok"},
        },
        "spec": {"taints": [{"key": FAKE_NODE_KEY, "value": FAKE_NODE_VALUE, "effect": "NoSchedule"}]},
    }


def _renewed_leases(cluster: KindCluster, since: float) -> set[str]:
    """The simulated nodes whose Lease KWOK renewed after `since` (epoch seconds)."""
    leases = cluster.get_json("leases", "-n", "kube-node-lease")["items"]
    return {
        lease["metadata"]["name"]
        for lease in leases
        if lease["metadata"]["name"].startswith("kwok-node-")
        and _epoch((lease.get("spec") or {}).get("renewTime") or "1970-01-01T00:00:00Z") > since
    }


def _wait_nodes_ready(cluster: KindCluster, kwok_log: str, timeout: float = 120) -> None:
    """Every simulated node Ready and its Lease renewed twice by KWOK: a node whose heartbeat
    stops goes Unknown after the node monitor's grace, and `status` rightly says NodeLost."""
    started = time.time()
    deadline = time.monotonic() + timeout
    first_renewal: dict[str, float] = {}
    while True:
        nodes = cluster.get_json("nodes", "-l", f"{FAKE_NODE_KEY}={FAKE_NODE_VALUE}")["items"]
        ready = [
            n
            for n in nodes
            if any(
                c["type"] == "Ready" and c["status"] == "True" for c in (n.get("status") or {}).get("conditions") or []
            )
        ]
        now = time.time()
        for name in _renewed_leases(cluster, started):
            first_renewal.setdefault(name, now)
        renewed_again = _renewed_leases(cluster, min(first_renewal.values(), default=now))
        if len(ready) == FAKE_NODES and len(renewed_again) == FAKE_NODES:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"after {timeout:.0f}s {len(ready)}/{FAKE_NODES} KWOK nodes Ready, "
                f"{len(renewed_again)}/{FAKE_NODES} with a Lease KWOK keeps renewing "
                f"(every {NODE_LEASE_SECONDS / 4:.0f}s): is the kwok process running? Its log: {kwok_log}"
            )
        time.sleep(1)


_SCALE = TierResource("scale")

# the cluster is deleted after the tier's last test, or at the session's end
pytest_runtest_teardown, pytest_sessionfinish = _SCALE.hooks()


@pytest.fixture(scope="session")
def scale_cluster(tmp_path_factory: pytest.TempPathFactory) -> ScaleCluster:
    """The tier's cluster, deleted after the last scale test (support.TierResource)."""
    return _SCALE.open(_cluster_for_the_tier(tmp_path_factory))


@contextlib.contextmanager
def _cluster_for_the_tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScaleCluster]:
    wait_for_the_toolchain()  # CI's cold path builds it beside the process tier
    env = tool_env()
    ok, why = docker_available(env)
    if not ok:
        if in_ci():
            pytest.fail(f"the scale tier needs Docker and CI is set: {why}", pytrace=False)
        pytest.skip(f"Docker unavailable ({why}); set CI=1 to make this an error")
    kwok = _kwok_binary(env)
    node_image = os.environ.get("TFK8S_KIND_NODE_IMAGE") or _env_file_vars().get("TFK8S_KIND_NODE_IMAGE")
    audit_dir = Path(f"/var/tmp/tfk8s-kind/{CLUSTER}/audit")
    policy_dir = Path(f"/var/tmp/tfk8s-kind/{CLUSTER}/policy")
    workdir = tmp_path_factory.mktemp("scale")
    kubeconfig = str(workdir / "kubeconfig")
    reused = _cluster_exists(CLUSTER, env)
    if reused and in_ci():
        # left over from an earlier run: its objects and audit log would decide CI's counts
        print(f"\n[scale] cluster {CLUSTER} left over from an earlier run; recreating it")
        run(["kind", "delete", "cluster", "--name", CLUSTER], env=env, check=False)
        reused = False
    if reused:
        Path(kubeconfig).write_text(run(["kind", "get", "kubeconfig", "--name", CLUSTER], env=env).stdout)
    else:
        for d in (audit_dir, policy_dir):
            d.mkdir(parents=True, exist_ok=True)
        for old in audit_dir.glob("*"):
            old.unlink()
        (policy_dir / "audit-policy.yaml").write_text((HERE / "audit-policy.yaml").read_text())
        seconds = create_cluster(CLUSTER, _kind_config(workdir, audit_dir, policy_dir), kubeconfig, node_image, env)
        print(f"\n[scale] created cluster {CLUSTER} in {seconds:.0f}s")
    os.chmod(kubeconfig, 0o600)
    cluster = KindCluster(
        name=CLUSTER, kubeconfig=kubeconfig, context=f"kind-{CLUSTER}", node_image=node_image, reused=reused, env=env
    )
    kwok_log = (workdir / "kwok.log").open("w")
    kwok_process = subprocess.Popen(
        [
            kwok,
            "--kubeconfig",
            kubeconfig,
            "--config",
            str(HERE / "kwok-stages.yaml"),
            "--manage-all-nodes=false",
            f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_KEY}={FAKE_NODE_VALUE}",
        ],
        stdout=kwok_log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        cluster.apply([fake_node(i) for i in range(FAKE_NODES)])
        _wait_nodes_ready(cluster, kwok_log.name)
        yield ScaleCluster(kind=cluster, audit=AuditLog(audit_dir / "audit.log"))
    finally:
        kwok_process.terminate()
        kwok_process.wait(30)
        kwok_log.close()
        if kwok_process.returncode not in (0, -15):
            print(f"[scale] kwok exited {kwok_process.returncode}; log: {kwok_log.name}")
        if not reused and os.environ.get("TFK8S_KEEP_CLUSTER") != "1":
            run(["kind", "delete", "cluster", "--name", CLUSTER], env=env, check=False)
