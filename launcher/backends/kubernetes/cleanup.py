"""Deleting a cluster: every object with its instance label, then waiting until all are gone.

The label covers clusters installed by Helm too (they have no ownerReferences to the root).
Used by `delete`, by `submit --replace`, and by a failed submit taking back what it created.
"""
from __future__ import annotations

import time

from launcher.backends.kubernetes.api import KINDS, OWNED_KINDS, Api
from launcher.errors import LauncherError


def delete_cluster(api: Api, namespace: str, name: str, timeout: float) -> bool:
    """Delete cluster `name` and wait until nothing of it is left; False if there was nothing."""
    found = False
    for api_version, kind in OWNED_KINDS:
        for obj in api.list(api_version, kind, namespace, name):
            found = True
            api.delete(api_version, kind, namespace, obj["metadata"]["name"])
    deadline = time.monotonic() + timeout
    while True:
        left = [f"{kind}/{o['metadata']['name']}" for api_version, kind in KINDS
                for o in api.list(api_version, kind, namespace, name)]
        if not left:
            return found
        if time.monotonic() > deadline:
            raise LauncherError(
                f"cluster {namespace}/{name} not gone after {timeout:.0f}s; still present: "
                + ", ".join(left)
            )
        time.sleep(1.0)
