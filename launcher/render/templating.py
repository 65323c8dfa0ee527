"""The jinja2 step: a manifests/*.j2 template and its typed context -> Kubernetes objects (pure).

The templates lay each object out in Kubernetes' own shape, as `kubectl get -o yaml` shows it,
next to the chart's template of the same object. A value goes in as `{{ value | v }}`: the
template writes a tag there, and the YAML reader puts the value itself in its place, so no value
is written out as text and parsed back (no quoting rules, no escapes to get right). A context is
a dataclass whose fields the template sees as names; every template also sees the constants it
shares with the pods and the chart: `k8s` (launcher/k8s_contract.py), `contract`
(worker/contract.py) and `code_bundle` (launcher/code_shipping/code_bundle.py).
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from importlib import resources

import jinja2
import yaml

from launcher import k8s_contract
from launcher.code_shipping import code_bundle
from worker import contract

# How a template places a value: `{{ value | v }}` writes this tag, which the reader replaces
# with the value itself, so no value is ever written out as YAML text and parsed back.
VALUE_TAG = "!tfk8s/value"
try:
    _YamlLoader = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml: slower, same result
    _YamlLoader = yaml.SafeLoader


@jinja2.pass_context
def _place(context: jinja2.runtime.Context, value) -> str:
    placed = context["placed"]
    placed.append(value)
    return f"{VALUE_TAG} {len(placed) - 1}"


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: resources.files("manifests").joinpath(name).read_text()),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["v"] = _place
    env.globals.update(k8s=k8s_contract, contract=contract, code_bundle=code_bundle)
    return env


class _TemplateLoader(_YamlLoader):
    """Reads a rendered template; each VALUE_TAG node becomes the value placed there."""

    placed: list = []


def _placed_value(loader: _TemplateLoader, node: yaml.ScalarNode):
    # A copy, as plain data (enums as their values, tuples as lists): one value placed twice
    # must not become one object (YAML would write an alias), nor be changed through the other.
    return json.loads(json.dumps(loader.placed[int(loader.construct_scalar(node))]))


_TemplateLoader.add_constructor(VALUE_TAG, _placed_value)


def render_all(context, documents: list[tuple[str, dict]]) -> list[dict]:
    """The objects of each (template, its own names) in turn, every template also seeing the
    fields of `context` (a dataclass); empty documents dropped."""
    shared = {field.name: getattr(context, field.name) for field in dataclasses.fields(context)}
    out: list[dict] = []
    for template, extra in documents:
        placed: list = []
        text = _environment().get_template(template).render(**shared, **extra, placed=placed)
        loader = _TemplateLoader(text)
        loader.placed = placed
        try:
            while loader.check_data():
                document = loader.get_data()
                if document:
                    out.append(document)
        finally:
            loader.dispose()
    return out
