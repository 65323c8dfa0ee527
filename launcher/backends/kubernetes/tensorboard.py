"""`tensorboard NAME` on Kubernetes: a short-lived TensorBoard pod, port-forwarded to localhost.

The pod (launcher/render/tensorboard.py) is created next to the cluster and, once running, reached
through the API server's port-forward (the kubelet connects inside the pod), one
kubernetes.stream.portforward websocket per local TCP connection, relayed by two threads. Leaving
the `with` (Ctrl-C) deletes the pod and waits until it is gone.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Callable, Iterator

from launcher import k8s_contract
from launcher.backends.kubernetes.api import JOBSET, Api, api_message
from launcher.errors import LauncherError
from launcher.render import tensorboard
from worker import contract

START_TIMEOUT_SECONDS = 300.0  # image pull, volume attach, TensorBoard's own start
GONE_TIMEOUT_SECONDS = 60.0


def success_template(api: Api, namespace: str, name: str, root: dict) -> dict:
    """The pod template of the cluster's success role Job (or the JobSet's replicatedJob)."""
    strategy = (root["metadata"].get("labels") or {}).get(k8s_contract.LABEL_STRATEGY)
    if strategy is None:
        raise LauncherError(f"cluster {namespace}/{name} has no {k8s_contract.LABEL_STRATEGY} label: not made by tfk8s")
    role = contract.success_role(contract.Strategy(strategy)).value
    if root["kind"] == JOBSET[1]:
        for replicated in root["spec"]["replicatedJobs"]:
            if replicated["name"] == role:
                return replicated["template"]["spec"]["template"]
    for job in api.list("batch/v1", "Job", namespace, name):
        if (job["metadata"].get("labels") or {}).get(k8s_contract.LABEL_COMPONENT) == role:
            return job["spec"]["template"]
    raise LauncherError(
        f"cluster {namespace}/{name} has no {role} Job left (deleted ttlSecondsAfterFinished "
        "after the cluster ended?), so its checkpoint volume is unknown; resubmit it, or run "
        "TensorBoard on the volume yourself"
    )


@contextlib.contextmanager
def serve(api: Api, namespace: str, name: str, local_port: int, say: Callable[[str], None]) -> Iterator[str]:
    """Run TensorBoard for cluster `name`; yields its local URL while it is served."""
    api.connect()
    threading.excepthook = _quiet_connection_ends
    root = api.find_root(namespace, name)
    if root is None:
        raise LauncherError(f"no cluster named {name!r} in namespace {namespace!r}")
    template = success_template(api, namespace, name, root)
    pod = tensorboard.tensorboard_pod(name, namespace, template, root)
    # Before the pod: a busy port fails fast, with nothing to undo.
    listener = tensorboard.local_listener(local_port)
    core = api.core_v1()
    try:
        created = core.create_namespaced_pod(namespace, pod)
    except Exception as exc:
        listener.close()
        raise LauncherError(f"cannot create the TensorBoard pod in {namespace}: {api_message(exc)}") from None
    pod_name = created.metadata.name
    say(f"created pod {namespace}/{pod_name}: TensorBoard on {tensorboard.model_dir(template)}")
    stop = threading.Event()
    try:
        forwarder = Forwarder(api, namespace, pod_name)
        _wait_serving(core, forwarder)
        threading.Thread(
            target=_accept, args=(listener, forwarder, stop), name="tensorboard port-forward", daemon=True
        ).start()
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        stop.set()
        listener.close()
        _delete(core, namespace, pod_name)
        say(f"deleted pod {namespace}/{pod_name}")


PROXY_THREAD = "Kubernetes port forward proxy"  # kubernetes.stream.ws_client names it so


def _quiet_connection_ends(args) -> None:
    """threading.excepthook: a port-forward proxy thread that finds its connection reset has
    seen one browser connection end (closed with a response still unread, which resets a
    socketpair); that is no error to print. Everything else goes to the default hook."""
    thread_name = args.thread.name if args.thread is not None else ""
    if not (
        thread_name.startswith(PROXY_THREAD) and issubclass(args.exc_type, (ConnectionResetError, BrokenPipeError))
    ):
        threading.__excepthook__(args)


class Forwarder:
    """Opens port-forward websockets to TensorBoard's port in the pod, from any thread.

    kubernetes.stream.portforward swaps its ApiClient's `request` method for the duration of the
    call, so concurrent calls on one client would race: it gets a client of its own (a copy of
    the connection's), and the calls are serialized (each only opens a websocket)."""

    def __init__(self, api: Api, namespace: str, pod_name: str):
        from kubernetes import client

        self.core = client.CoreV1Api(client.ApiClient(api.core_v1().api_client.configuration))
        self.namespace, self.pod_name = namespace, pod_name
        self.lock = threading.Lock()

    def open(self):
        """(PortForward, its socket): one TCP connection to TensorBoard in the pod."""
        from kubernetes.stream import portforward

        with self.lock:
            forward = portforward(
                self.core.connect_get_namespaced_pod_portforward,
                self.pod_name,
                self.namespace,
                ports=str(tensorboard.TENSORBOARD_PORT),
            )
        remote = forward.socket(tensorboard.TENSORBOARD_PORT)
        remote.setblocking(True)
        return forward, remote


def _wait_serving(core, forwarder: Forwarder) -> None:
    """Until TensorBoard answers through the port-forward; the pod's own failure if it ends."""
    namespace, pod_name = forwarder.namespace, forwarder.pod_name
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    last = "not scheduled yet"
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod(pod_name, namespace)
        phase = pod.status.phase
        if phase in ("Failed", "Succeeded"):
            raise LauncherError(
                f"TensorBoard pod {namespace}/{pod_name} ended ({phase}): "
                f"{_container_problem(pod) or pod.status.message or ''}; see "
                f"kubectl logs -n {namespace} {pod_name}"
            )
        if phase == "Running":
            if _answers(forwarder):
                return
            last = "running, TensorBoard not answering yet"
        else:
            last = _container_problem(pod) or _unscheduled(pod) or f"{phase}"
        time.sleep(1.0)
    raise LauncherError(
        f"TensorBoard pod {namespace}/{pod_name} not serving after {START_TIMEOUT_SECONDS:.0f}s: {last}"
    )


def _container_problem(pod) -> str | None:
    for status in pod.status.container_statuses or []:
        for state in (status.state, status.last_state):
            if state is None:
                continue
            waiting = state.waiting
            if waiting is not None and waiting.reason not in (None, "ContainerCreating"):
                return f"{waiting.reason}: {waiting.message or ''}".rstrip(": ")
            if state.terminated is not None:
                return f"exit code {state.terminated.exit_code} ({state.terminated.reason})"
    return None


def _unscheduled(pod) -> str | None:
    """Why the scheduler has not placed the pod (a PVC bound to a node it cannot use, say)."""
    for condition in pod.status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "False":
            return f"not scheduled: {condition.message}"
    return None


def _answers(forwarder: Forwarder) -> bool:
    """An HTTP request to TensorBoard through one port-forward gets a status line back."""
    forward, remote = forwarder.open()
    try:
        remote.settimeout(10.0)
        remote.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        return remote.recv(12).startswith(b"HTTP/")
    except OSError:
        return False  # nothing listening yet: the kubelet closes the stream
    finally:
        forward.close()


def _accept(listener: socket.socket, forwarder: Forwarder, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            local, _ = listener.accept()
        except OSError:
            return  # the listener was closed: the session is over
        threading.Thread(target=_relay_connection, args=(local, forwarder), daemon=True).start()


def _relay_connection(local: socket.socket, forwarder: Forwarder) -> None:
    try:
        forward, remote = forwarder.open()
    except Exception:  # the pod went away: this connection fails, the browser shows it
        local.close()
        return
    done = threading.Event()
    for source, target in ((local, remote), (remote, local)):
        threading.Thread(target=_copy, args=(source, target, done), daemon=True).start()
    done.wait()
    local.close()
    forward.close()


def _copy(source, target, done: threading.Event) -> None:
    """Bytes from source to target until either side ends; then the connection is done."""
    try:
        while chunk := source.recv(65536):
            target.sendall(chunk)
    except OSError:
        pass  # the other direction closed the sockets
    finally:
        done.set()


def _delete(core, namespace: str, pod_name: str) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        core.delete_namespaced_pod(pod_name, namespace, grace_period_seconds=0)
    except ApiException as exc:
        if exc.status != 404:
            raise
    deadline = time.monotonic() + GONE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_pod(pod_name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(0.5)
    raise LauncherError(
        f"TensorBoard pod {namespace}/{pod_name} not gone after "
        f"{GONE_TIMEOUT_SECONDS:.0f}s (it ends by itself after "
        f"{tensorboard.DEADLINE_SECONDS}s; or kubectl delete pod -n {namespace} "
        f"{pod_name})"
    )
