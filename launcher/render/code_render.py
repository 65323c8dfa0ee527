"""The Kubernetes side of `code:` (launcher/code_shipping/code_bundle.py): the annotations that
name the archive, and its Helm value.

The archive travels in one immutable ConfigMap named by its digest (manifests/code.yaml.j2);
every pod of the cluster unpacks it with an init container (the same image, the same restricted
securityContext; manifests/job.yaml.j2) into an emptyDir, which the main container mounts
read-only at code_bundle.CODE_DIR, its working dir and first on PYTHONPATH (plan.task_env). An
init container, not a wrapper around the command: the main command stays the task's own (the
built-in worker, or the user's `command:`, under the supervisor where there is one), signals
reach it directly, and a bad archive shows as Init:Error before anything trains. Under a JobSet
(the root, applied first) the ConfigMap follows it at once; a pod that gets to its volumes before
that waits for it (FailedMount, retried by the kubelet), as for any missing ConfigMap.
"""

from __future__ import annotations

import base64

from launcher.code_shipping import code_bundle

SHA256_ANNOTATION = "tfk8s.io/code-sha256"
BYTES_ANNOTATION = "tfk8s.io/code-bytes"


def code_values(code: code_bundle.Bundle | None, values: dict) -> dict:
    """Helm values with `code:` as codeArchive, the packed dir in base64."""
    if code is not None:
        values.pop("code")
        values["codeArchive"] = base64.b64encode(code.archive).decode()
    return values
