"""The jinja2 step: a manifests/*.j2 template and its context -> Kubernetes objects (pure).

The templates lay each object out in Kubernetes' own shape, as `kubectl get -o yaml` shows it,
next to the chart's template of the same object. A value goes in as `{{ value | v }}`: the
template writes a tag there, and the YAML reader puts the value itself in its place, so no value
is written out as text and parsed back (no quoting rules, no escapes to get right).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

import jinja2
import yaml

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
    return env


class _TemplateLoader(_YamlLoader):
    """Reads a rendered template; each VALUE_TAG node becomes the value placed there."""

    placed: list = []


def _placed_value(loader: _TemplateLoader, node: yaml.ScalarNode):
    # A copy, as plain data (enums as their values, tuples as lists): one value placed twice
    # must not become one object (YAML would write an alias), nor be changed through the other.
    return json.loads(json.dumps(loader.placed[int(loader.construct_scalar(node))]))


_TemplateLoader.add_constructor(VALUE_TAG, _placed_value)


def render_all(context: dict, documents: list[tuple[str, dict]]) -> list[dict]:
    """The objects of each (template, its own context) in turn, every template also seeing
    `context`; empty documents dropped."""
    out: list[dict] = []
    for template, extra in documents:
        placed: list = []
        text = _environment().get_template(template).render(**context, **extra, placed=placed)
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
