"""Fixtures of the process tier's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

PROBES = Path(__file__).parent / "probes"


@pytest.fixture
def probe_programs_importable(monkeypatch):
    """The probe programs are modules in tests/worker/probes (LocalBackend passes its own
    PYTHONPATH on to the tasks, with this one in it)."""
    monkeypatch.syspath_prepend(str(PROBES))
    monkeypatch.setenv("PYTHONPATH", str(PROBES))
