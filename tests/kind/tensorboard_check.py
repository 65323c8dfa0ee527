"""`tensorboard` against a finished cluster on kind: the pod passes the namespace's Pod Security
`restricted`, is owned by the cluster's root, serves the evaluator's scalars through the
port-forward, and is gone after Ctrl-C. Called at the end of the PS end-to-end test, whose
finished cluster it reads (a cluster of its own would cost another training run)."""

from __future__ import annotations

import time
from pathlib import Path

from tensorboard_client import TensorBoardSession, connection_refused, free_port

from launcher import k8s_contract

COMPONENT = f"{k8s_contract.LABEL_COMPONENT}={k8s_contract.TENSORBOARD_COMPONENT}"


def check_tensorboard_serves_the_evaluation(
    cluster, namespace: str, name: str, final_step: int, tmp_path: Path
) -> None:
    started = time.monotonic()
    session = TensorBoardSession(
        [
            name,
            "-n",
            namespace,
            "--kubeconfig",
            cluster.kubeconfig,
            "--context",
            cluster.context,
            "--port",
            str(free_port()),
        ],
        tmp_path / "tensorboard.log",
        start_timeout=300,
    )
    serving = time.monotonic() - started
    try:
        [pod] = cluster.get_json("pods", "-n", namespace, "-l", COMPONENT)["items"]
        [owner] = pod["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("ConfigMap", name)
        scalars = session.eval_scalars(timeout=120)
        print(
            f"tensorboard: {session.line}\n/data/runs: {scalars['runs_text'][:300]}\n"
            f"/data/plugin/scalars/tags: {scalars['tags_text'][:500]}\n"
            f"accuracy points: {scalars['points_text'][:500]}"
        )
        assert {"accuracy", "loss"} <= set(scalars["tags"])
        assert final_step in [step for _, step, _ in scalars["points"]]
    finally:
        interrupted = time.monotonic()
        code = session.interrupt(timeout=120)
    gone = time.monotonic() - interrupted
    print(f"MEASURE tensorboard: URL after {serving:.1f}s, pod gone {gone:.1f}s after Ctrl-C")
    print(session.output()[-2000:])
    assert code == 0, session.output()[-2000:]
    assert "deleted pod" in session.output()
    assert cluster.get_json("pods", "-n", namespace, "-l", COMPONENT)["items"] == []
    assert connection_refused(session.url)
