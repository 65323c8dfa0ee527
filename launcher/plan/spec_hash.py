"""What a resubmit compares (pure): the spec and its packed code's digest, not where the code
sits on this machine. plan() computes it once; the Kubernetes root and a local run record it."""

from __future__ import annotations

import hashlib
import json

from launcher.cluster_spec.spec import ClusterSpec
from launcher.code_shipping.code_bundle import Bundle


def spec_hash(spec: ClusterSpec, code: Bundle | None) -> str:
    data = spec.model_dump(by_alias=True, mode="json")
    if spec.code is not None:
        data["code"] = {"exclude": spec.code.exclude, "sha256": code.digest}
    canonical = json.dumps(data, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
