"""The Python API: `from launcher.api import TFK8sClient, LocalProcessBackendConfig`.

Importing it loads neither TensorFlow nor the kubernetes client: a backend is imported when a
client first uses it.
"""

from launcher.api.client import TFK8sClient, load_spec
from launcher.api.config import KubernetesBackendConfig, LocalProcessBackendConfig
from launcher.api.events import JobEvent
from launcher.cluster_spec.spec import ClusterSpec
from launcher.errors import (
    ClusterNotFound,
    ClusterUnreachable,
    JobFailed,
    JobTimeout,
    LauncherError,
    Problem,
    SpecError,
    SubmitRefused,
)
from launcher.status.progress import Evaluation, TrainingProgress
from launcher.status.status import ClusterStatus, Phase, RoleStatus

__all__ = [
    "TFK8sClient",
    "load_spec",
    "KubernetesBackendConfig",
    "LocalProcessBackendConfig",
    "JobEvent",
    "ClusterSpec",
    "ClusterStatus",
    "Phase",
    "RoleStatus",
    "TrainingProgress",
    "Evaluation",
    "LauncherError",
    "SpecError",
    "Problem",
    "ClusterNotFound",
    "ClusterUnreachable",
    "JobFailed",
    "JobTimeout",
    "SubmitRefused",
]
