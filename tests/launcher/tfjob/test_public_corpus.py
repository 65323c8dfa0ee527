"""The TFJobs teams published (public/: Kubeflow's training-operator and tf-operator examples, the
Kubeflow website's guides, Kueue's, Volcano's, Katib's, Pipelines' and others', each file as it
is upstream, its repository, commit and path in public/SOURCES.tsv): every complete TFJob
imports, its cluster.yaml and notes checked against public-golden/; the rest are refused for a
reason a TFJob user would agree with, each said at its TFJob path and line."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from launcher.cluster_spec.loader import load_text
from launcher.cluster_spec.tfjob.document import import_text
from launcher.errors import SpecError
from launcher.plan.plan import plan
from launcher.render import render

HERE = Path(__file__).parent
PUBLIC = HERE / "public"
GOLDEN = HERE / "public-golden"
CORPUS = sorted(PUBLIC.glob("*.yaml"))
# Not importable, and rightly: (file, the TFJob path refused, why it is right)
REFUSED = {
    # a Katib trialSpec cut out of its Experiment: no metadata until Katib fills it in
    "katib-trialspec-worker-trial-parameters.yaml": ("metadata", "valid string"),
    # another operator's TFJob (KubeDL's training.kubedl.io), not Kubeflow's
    "kubedl-mnist-hostpath-spec-cleanpodpolicy.yaml": ("apiVersion", "is no TFJob version this reads"),
    # tf-operator's design doc: its PS replica has no container at all
    "v1alpha1-design-doc-master-worker-ps.yaml": ("spec.tfReplicaSpecs.PS.template.spec.containers", "tensorflow"),
    # the website's managedBy example nests tfReplicaSpecs under runPolicy (a doc slip)
    "website-managedby-multikueue-misnested.yaml": ("spec.tfReplicaSpecs", "no replica"),
    # ps only: nothing trains, and TFJob never marked it succeeded either
    "website-v1beta1-ps-only-gpu.yaml": ("spec.tfReplicaSpecs", "need a chief or a worker"),
}


def _fixed_name(prefix: str) -> str:
    return prefix + "x2b4z"


def test_every_file_has_its_source():
    with (PUBLIC / "SOURCES.tsv").open() as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    listed = {row["file"] for row in rows}
    assert {p.name for p in CORPUS} <= listed
    assert all(len(row["commit"]) == 40 and row["repository"] and row["path"] for row in rows), rows


@pytest.mark.parametrize("tfjob", [p for p in CORPUS if p.name not in REFUSED], ids=lambda p: p.stem)
def test_a_complete_public_tfjob_imports_and_renders(tfjob):
    imported = import_text(tfjob.read_text(), f"public/{tfjob.name}", make_name=_fixed_name)
    text = "---\n".join(one.text for one in imported)
    notes = "".join(f"note: {note}\n" for one in imported for note in one.notes)
    for suffix, got in ((".yaml", text), (".notes", notes)):
        golden = GOLDEN / (tfjob.stem + suffix)
        if os.environ.get("TFK8S_UPDATE_GOLDEN") == "1":
            golden.parent.mkdir(exist_ok=True)
            golden.write_text(got)
        assert golden.exists(), f"no golden file; run with TFK8S_UPDATE_GOLDEN=1 to create {golden}"
        assert got == golden.read_text(), f"import of {tfjob.name} changed; review, rerun with TFK8S_UPDATE_GOLDEN=1"
    assert len(notes.splitlines()) == len(set(notes.splitlines())), "a note said twice"
    assert "&id" not in text and "*id" not in text
    for one in imported:
        assert render.render(plan(load_text(one.text)))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_an_incomplete_or_foreign_file_is_refused_at_its_path(name):
    path, why = REFUSED[name]
    with pytest.raises(SpecError) as caught:
        import_text((PUBLIC / name).read_text(), f"public/{name}")
    [problem] = caught.value.problems
    assert problem.path == path and why in problem.message and problem.line, str(problem)
