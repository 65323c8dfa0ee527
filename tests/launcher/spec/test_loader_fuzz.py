"""Fuzz the loader: whatever the input, it returns a spec or raises SpecError, nothing else."""

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from launcher.cluster_spec.loader import load_text
from launcher.errors import SpecError

KEYS = [
    "name",
    "strategy",
    "roles",
    "chief",
    "worker",
    "ps",
    "evaluator",
    "replicas",
    "checkpoint",
    "dir",
    "volume",
    "port",
    "env",
    "resources",
    "limits",
    "requests",
    "nvidia.com/gpu",
    "command",
    "args",
    "program",
    "module",
    "tolerations",
    "namespace",
    "persistentVolumeClaim",
    "claimName",
    "hostPath",
    "path",
    "backoffLimit",
    "labels",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True),
    st.text(max_size=80),
    st.sampled_from(
        [
            "parameter_server",
            "mirrored",
            "multi_worker_mirrored",
            "a" * 70,
            "gs://b/x",
            "/ckpt/x",
            "-bad-",
            "1Gi",
            "x" * 300,
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=10)), inner, max_size=6),
    ),
    max_leaves=30,
)


def check(text: str) -> None:
    try:
        load_text(text)
    except SpecError as exc:
        assert exc.problems and all(str(p) for p in exc.problems)


@settings(max_examples=400, deadline=None)
@given(values)
def test_structured_input_only_raises_spec_error(data):
    check(yaml.safe_dump(data))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_only_raises_spec_error(text):
    check(text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_only_raise_spec_error(data):
    check(data.decode("utf-8", errors="surrogateescape").encode("utf-8", "replace").decode())
