"""The supervisor through an API server outage: a server that answers 503 (an upgrade, an
overload) or 429 is reachable, so `watch` never gives up on it however long it lasts, and a
task restarted in place never reads an earlier attempt's give-up.

`watch` runs for real against a real HTTPS server on 127.0.0.1 (a certificate made here with
openssl), `run` around a real child.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from launcher.pod import job_watch, supervise
from supervision.test_supervise import (  # noqa: F401 (state_dir: the fixture)
    WAIT_FOR_TERM,
    job,
    start,
    start_watch,
    state_dir,
    wait_until_up,
)


class _Outage:
    """The API server's answers: 503 (with Retry-After) for `seconds` from the first request,
    then the Job, done."""

    def __init__(self, seconds: float, status: int = 503):
        self.seconds = seconds
        self.until: float | None = None
        self.status = status
        self.requests: list[int] = []

    def answer(self) -> tuple[int, bytes]:
        if self.until is None:
            self.until = time.monotonic() + self.seconds
        if time.monotonic() < self.until:
            self.requests.append(self.status)
            return self.status, b'{"kind":"Status","code":%d}' % self.status
        self.requests.append(200)
        return 200, json.dumps({"metadata": {"resourceVersion": "9"}, "items": [job(("Complete", "True"))]}).encode()


@pytest.fixture
def tls_files(tmp_path) -> tuple[Path, Path]:
    key, cert = tmp_path / "api.key", tmp_path / "api.crt"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return key, cert


def serve(outage: _Outage, tls_files) -> ThreadingHTTPServer:
    import ssl

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            status, body = outage.answer()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if status != 200:
                self.send_header("Retry-After", "1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls_files[1]), str(tls_files[0]))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def account_trusting(state_dir: Path, cert: Path) -> Path:
    """The job-watch container's service account, its CA the test server's certificate."""
    account = state_dir.parent / "serviceaccount"
    account.mkdir(exist_ok=True)
    (account / "token").write_text("not-a-real-token")
    (account / "ca.crt").write_text(cert.read_text())
    return account


@pytest.mark.parametrize("status", [503, 429])
def test_an_api_outage_longer_than_the_give_up_bound_keeps_the_server_running(state_dir, tls_files, status):
    """Before: only a successful list counted as an answer, so after the bound a healthy
    server was stopped (exit 7, counted) with a message blaming the service account."""
    give_up, outage_seconds = 2.0, 7.0
    outage = _Outage(outage_seconds, status)
    server = serve(outage, tls_files)
    try:
        task = start(WAIT_FOR_TERM, state_dir)
        wait_until_up(task)
        started = time.monotonic()
        watcher = start_watch(
            state_dir,
            account_trusting(state_dir, tls_files[1]),
            server.server_address[1],
            TFK8S_API_GIVE_UP_SECONDS=str(give_up),
        )
        _, watch_err = watcher.communicate(timeout=90)
        _, task_err = task.communicate(timeout=60)
        took = time.monotonic() - started
    finally:
        server.shutdown()
    print(
        f"HTTP {status} for {outage_seconds:.0f}s (give-up bound {give_up:.0f}s): "
        f"{outage.requests.count(status)} refused requests, the task ended after {took:.1f}s "
        f"with exit {task.returncode}"
    )
    assert watcher.returncode == 0, watch_err
    assert task.returncode == 0, task_err  # stopped because training ended, not exit 7
    assert took >= outage_seconds, took
    assert "training ended (succeeded)" in task_err
    assert f"HTTP Error {status}" in watch_err and "no answer" not in watch_err
    assert outage.requests[-1] == 200 and outage.requests.count(status) >= 1
    # the pause grows (and honours Retry-After): far fewer requests than one per second
    assert outage.requests.count(status) <= outage_seconds, outage.requests


def test_a_task_restarted_in_place_ignores_an_earlier_give_up(state_dir):
    """restartPolicy OnFailure: the shared emptyDir keeps the verdict of the attempt that exited
    7; read again, it stopped each new attempt in about a second, until backoffLimit."""
    (state_dir / supervise.VERDICT_FILE).write_text(
        "api-unreachable\ntfk8s supervisor: no answer from the API server ...\n"
    )
    task = start(WAIT_FOR_TERM, state_dir)
    wait_until_up(task)
    with pytest.raises(subprocess.TimeoutExpired):
        task.wait(timeout=3)  # still running: the stale verdict was not read
    assert not (state_dir / supervise.VERDICT_FILE).exists()
    (state_dir / supervise.VERDICT_FILE).write_text("succeeded\n")  # a new `watch`'s verdict
    _, err = task.communicate(timeout=30)
    assert task.returncode == 0 and "training ended (succeeded)" in err
    assert "an earlier attempt gave up on the API server; watching the Job again" in err


def test_under_on_failure_a_watch_that_gives_up_exits_to_be_restarted(state_dir, tls_files):
    """Its task's container is restarted after exit 7; so must `watch` be, or the restarted
    task would run with nobody following the Job. Under Never the pod ends: 0."""
    outage = _Outage(60.0, 403)  # a refusal: the Role is wrong; no answer that counts
    server = serve(outage, tls_files)
    try:
        codes = {}
        for policy in ("OnFailure", "Never"):
            watcher = start_watch(
                state_dir,
                account_trusting(state_dir, tls_files[1]),
                server.server_address[1],
                TFK8S_API_GIVE_UP_SECONDS="1",
                TFK8S_POD_RESTART_POLICY=policy,
            )
            _, err = watcher.communicate(timeout=60)
            codes[policy] = watcher.returncode
            assert "service account must be allowed to list and watch job c-chief" in err
    finally:
        server.shutdown()
    assert codes == {"OnFailure": 1, "Never": 0}


def test_the_pause_doubles_up_to_a_bound_and_honours_retry_after():
    error = urllib.error.URLError("connection reset")
    assert [job_watch.retry_pause(5.0, n, error) for n in (1, 2, 3, 4, 5)] == [5.0, 10.0, 20.0, 30.0, 30.0]
    busy = urllib.error.HTTPError("https://api/x", 429, "Too Many Requests", {"Retry-After": "12"}, None)
    assert job_watch.retry_pause(5.0, 1, busy) == 12.0
