"""A local stand-in for the GCE metadata server, so task processes here look like pods on a GKE
node to TensorFlow.

TF's failure handling decides it runs on GCP when `http://$GCE_METADATA_IP/computeMetadata/v1/
instance/hostname` answers 200 (`failure_handling_util.on_gcp`); every GKE pod reaches the real
server at metadata.google.internal. Pointing GCE_METADATA_IP at this server puts TF on its GCE
code paths (GCE_CPU here, GCE_GPU where a GPU is visible) for real, in unmodified processes.
"""

from __future__ import annotations

import http.server
import threading
from contextlib import contextmanager
from typing import Iterator

ANSWERS = {
    "/computeMetadata/v1/instance/hostname": "gke-tfk8s-pool-1-node.c.tfk8s-test.internal",
    # No host maintenance scheduled: TF's GCE GPU watcher polls this.
    "/computeMetadata/v1/instance/maintenance-event": "NONE",
}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.server.paths.append(self.path)
        answer = ANSWERS.get(self.path.split("?", 1)[0])
        # The real server refuses requests without the header (SSRF protection).
        if answer is None or self.headers.get("Metadata-Flavor") != "Google":
            self.send_error(404 if answer is None else 403)
            return
        body = answer.encode()
        self.send_response(200)
        self.send_header("Metadata-Flavor", "Google")
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def serving() -> Iterator[http.server.ThreadingHTTPServer]:
    """A running server; its `address` ("127.0.0.1:PORT") is the value for GCE_METADATA_IP and
    `paths` lists every path asked for."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.paths = []
    server.address = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
