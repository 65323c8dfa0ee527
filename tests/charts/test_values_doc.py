"""values.yaml documents every key in helm-docs form (`# -- description` above it), with the
descriptions of values.schema.json, and the chart README's table lists them
(scripts/chart_values_doc.py; tests/test_generated.py fails while either is stale)."""

from __future__ import annotations

import json

import yaml
from support import REPO

from scripts import chart_schema, chart_values_doc

CHART = REPO / "charts" / "tfk8s"

SAMPLE = """\
# prose about the chart, no key's
top: 1
# prose the table leaves out
# -- a description
#    that goes on here
nested:
  # -- the inner key
  inner: "007"
  undocumented: {}
# -- an earlier group
# prose between
# -- the last group wins
items:
- name: x  # a list item's key, not values.yaml's
  # -- not a key of values.yaml either
  value: 2

# -- a blank line above the key cuts the comment off

blank: null
"""


def test_descriptions_read_as_helm_docs_reads_them():
    assert chart_values_doc.descriptions(SAMPLE) == {
        "nested": "a description that goes on here",
        "nested.inner": "the inner key",
        "items": "the last group wins",
    }
    assert [path for path, _, _ in chart_values_doc.keys(SAMPLE)] == [
        "top",
        "nested",
        "nested.inner",
        "nested.undocumented",
        "items",
        "blank",
    ]


def test_written_descriptions_replace_the_old_ones_and_keep_the_prose():
    wanted = {"top": "one " * 40 + "| piped", "nested.inner": "the inner key, reworded"}
    text = chart_values_doc.with_descriptions(SAMPLE, wanted)
    assert chart_values_doc.descriptions(text) == {k: v.strip() for k, v in wanted.items()}
    assert "# prose the table leaves out\nnested:" in text  # its `# --` group went, the prose stayed
    assert max(len(line) for line in text.splitlines()) <= chart_values_doc.WIDTH
    assert yaml.safe_load(text) == yaml.safe_load(SAMPLE)
    row = next(r for r in chart_values_doc.table(text).splitlines() if r.startswith("| `top`"))
    assert row.endswith("one one \\| piped |") and "| `1` |" in row


def test_every_key_of_values_yaml_has_the_schemas_description_and_a_row_in_the_readme():
    """The one text per key: the schema's (the model's) in values.yaml's `# --` comment and in
    the README; a key the schema does not describe is inside one it does, or holds one."""
    text = (CHART / "values.yaml").read_text()
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert chart_schema.generate_schema() == schema
    wanted = chart_values_doc.schema_descriptions(schema, yaml.safe_load(text))
    written = chart_values_doc.descriptions(text)
    assert written == wanted
    paths = [path for path, _, _ in chart_values_doc.keys(text)]
    bare = [
        path
        for path in paths
        if path not in written
        and not any(path.startswith(f"{other}.") or other.startswith(f"{path}.") for other in written)
    ]
    assert not bare, f"values.yaml keys without a description in values.schema.json (the model): {bare}"
    readme = (CHART / "README.md").read_text()
    rows = [line.split("`")[1] for line in readme.splitlines() if line.startswith("| `")]
    assert rows == [path for path in paths if path in written]
    assert len(rows) > 80 and "roles.evaluator.podTemplate" in rows and "platform" in rows
