"""launcher/chart/chart_plan.py learns each variant alone (the sample rendered once more with that
one change) and merges them as "@if" nodes, assuming that variants compose. Checked here without
helm: for every shape, the merged tree with any one or two of the variants that can occur set
(what templates/_helpers.tpl's tfk8s.fill chooses, `choose` below) equals the launcher's own
render of the sample with those changes made together."""

from __future__ import annotations

import difflib
import itertools
import json

import pytest

from launcher.chart import chart_plan
from launcher.k8s_contract import Workload
from worker.contract import Strategy

SHAPES = [(s, w, e) for s in Strategy for w in Workload for e in (False, True)]


def choose(node, on: set):
    """The tree with each "@if" node replaced by its branch for the flags `on` (the flags that
    are true), chart_plan.MISSING where that branch is absent: a dict key or list item goes."""
    if isinstance(node, dict) and "@if" in node:
        branch = node.get("@then" if node["@if"] in on else "@else", chart_plan.MISSING)
        return branch if branch is chart_plan.MISSING else choose(branch, on)
    if isinstance(node, dict):
        return {k: c for k, v in node.items() if (c := choose(v, on)) is not chart_plan.MISSING}
    if isinstance(node, list):
        return [c for item in node if (c := choose(item, on)) is not chart_plan.MISSING]
    return node


def _diff(want, got) -> str:
    lines = lambda tree: json.dumps(tree, indent=1, sort_keys=True).splitlines()  # noqa: E731
    return "\n".join(list(difflib.unified_diff(lines(want), lines(got), "render", "merged", lineterm=""))[:60])


@pytest.fixture(scope="module")
def code_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("code")  # a sample's code, as chart_plan.generate makes it
    (path / "train.py").write_text("")
    return path


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0].value}/{s[1].value}/{int(s[2])}")
def test_merged_variants_compose_like_render(shape, code_dir):
    merged = chart_plan.shape_objects(*shape, code_dir)
    occur = [v for v in chart_plan.VARIANTS if chart_plan.sample(*shape, v) is not None]
    assert "byo" in occur and "noCode" in occur
    for on in itertools.chain([()], ((v,) for v in occur), itertools.combinations(occur, 2)):
        # Every two variants that occur alone occur together: their values are independent.
        want = chart_plan.objects(shape, on, code_dir)
        assert want is not None, f"{on} cannot occur together"
        got = choose(merged, set(on))
        assert got == want, f"{on}: the merged tree differs from render\n{_diff(want, got)}"


def test_choose_takes_the_branches_of_the_flags_set():
    tree = [{"@if": "a", "@then": 1}, {"@if": "a", "@else": {"k": {"@if": "b", "@then": 2}}}, 3]
    assert choose(tree, set()) == [{}, 3]
    assert choose(tree, {"b"}) == [{"k": 2}, 3]
    assert choose(tree, {"a", "b"}) == [1, 3]
