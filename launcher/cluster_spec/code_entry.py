"""What `code:` must hold for the spec's entry point, checked at load: with the code shipped,
a program module or a `command` script missing from it would fail every pod, and every retry,
after scheduling."""

from __future__ import annotations

import posixpath
import re

from launcher.cluster_spec.spec import DEFAULT_IMAGE, ClusterSpec
from launcher.code_shipping import code_bundle


def problems(spec: ClusterSpec, bundle: code_bundle.Bundle) -> list[tuple[str, tuple[str, str]]]:
    """(field path, (problem, hint)) for each entry point the code dir lacks."""
    found = [("program.module", program_outside(spec, bundle)), ("command", script_outside(spec, bundle))]
    return [(field, problem) for field, problem in found if problem]


def program_outside(spec: ClusterSpec, bundle: code_bundle.Bundle) -> tuple[str, str] | None:
    """With the stock image, program.module must come from the shipped code (or be the
    worker's own): a typo would otherwise fail in every pod, after scheduling."""
    if spec.program is None or spec.image != DEFAULT_IMAGE:
        return None
    top = spec.program.module.split(".")[0]
    if top == "worker" or any(rel.split("/")[0] in (top, f"{top}.py") for rel, _ in bundle.files):
        return None
    return (
        f"{spec.program.module!r} is not in code: {spec.code.path} (no {top}.py or {top}/ "
        "there) nor in the stock worker image",
        f"name a module of {spec.code.path}, e.g. "
        + ", ".join(
            rel[:-3].replace("/", ".").removesuffix(".__init__") for rel, _ in bundle.files if rel.endswith(".py")
        )[:200],
    )


def script_outside(spec: ClusterSpec, bundle: code_bundle.Bundle) -> tuple[str, str] | None:
    """`command: [python, run.py]` runs in the shipped code dir: a script missing there would
    fail every pod the same way, after scheduling, so it is refused here."""
    command = spec.command or []
    if len(command) < 2 or not re.fullmatch(r"(.*/)?python[0-9.]*", command[0]):
        return None
    script = command[1]
    if script.startswith("-") or script.startswith("/") or not script.endswith(".py"):
        return None
    shipped = {rel for rel, _ in bundle.files}
    if posixpath.normpath(script) in shipped:
        return None
    scripts = sorted(rel for rel in shipped if rel.endswith(".py"))
    return (
        f"command runs {script!r}, which is not in code: {spec.code.path}",
        "name a script of the code dir" + (f", e.g. {', '.join(scripts[:5])}" if scripts else " (it has no .py files)"),
    )
