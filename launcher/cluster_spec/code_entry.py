"""What `code:` must hold for the spec's entry point, checked at load: with the code shipped,
a program module or a `command` script missing from it would fail every pod, and every retry,
after scheduling."""

from __future__ import annotations

import difflib
import posixpath
import re

from launcher.cluster_spec.spec import DEFAULT_IMAGE, ClusterSpec
from launcher.code_shipping import code_bundle


def problems(spec: ClusterSpec, bundle: code_bundle.Bundle) -> list[tuple[str, tuple[str, str]]]:
    """(field path, (problem, hint)) for each entry point the code dir lacks."""
    found = [("program.module", program_outside(spec, bundle)), ("command", script_outside(spec, bundle))]
    return [(field, problem) for field, problem in found if problem]


def program_outside(spec: ClusterSpec, bundle: code_bundle.Bundle) -> tuple[str, str] | None:
    """program.module must be a file of the shipped code wherever the code decides where it
    comes from: always with the stock image (or it is the worker's own), and with another image
    when the code holds its top-level module or regular package (first on PYTHONPATH, it hides
    the image's). Otherwise the image provides it, and the task checks it when it starts (exit 2,
    not retried). A typo would otherwise fail in every pod, after scheduling and TF's import."""
    if spec.program is None:
        return None
    module = spec.program.module
    parts = module.split(".")
    shipped = {rel for rel, _ in bundle.files}
    stock = spec.image == DEFAULT_IMAGE
    if not _code_decides(spec, shipped) or _ships_module("/".join(parts), shipped):
        return None
    modules = sorted(_module_name(rel) for rel in shipped if rel.endswith(".py"))
    nearest = difflib.get_close_matches(module, modules, n=3, cutoff=0.6)
    expected = "/".join(parts)
    return (
        f"{module!r} is not in code: {spec.code.path} (no {expected}.py or {expected}/ there)"
        + ("" if not stock else " nor in the stock worker image"),
        (f"did you mean {' or '.join(nearest)}? " if nearest else "")
        + (f"modules in {spec.code.path}: {', '.join(modules)}"[:200] if modules else "the code has no .py files"),
    )


def program_from_image(spec: ClusterSpec, bundle: code_bundle.Bundle) -> str | None:
    """A note for a program.module that the shipped code does not hold and the image is to
    provide (the code does not decide, program_outside): it is checked only when a task starts.
    None with the stock image, whose own modules (worker.*) are the only ones it provides."""
    if spec.program is None or spec.image == DEFAULT_IMAGE:
        return None
    shipped = {rel for rel, _ in bundle.files}
    if _code_decides(spec, shipped) or _ships_module(spec.program.module.replace(".", "/"), shipped):
        return None
    return (
        f"program.module {spec.program.module!r} is not in code: {spec.code.path}, so image {spec.image} "
        "must provide it; that is checked when each task starts (exit 2, not retried)"
    )


def _code_decides(spec: ClusterSpec, shipped: set[str]) -> bool:
    """Whether the program module can only come from the code: with the stock image (but the
    worker's own), or when the code holds its top-level module or regular package, which,
    first on PYTHONPATH, hides the image's (a namespace package the image may add to)."""
    top = spec.program.module.split(".")[0]
    if spec.image == DEFAULT_IMAGE:
        return top != "worker"
    return f"{top}.py" in shipped or f"{top}/__init__.py" in shipped


def _ships_module(path: str, shipped: set[str]) -> bool:
    """Whether the code holds the module at `path` (a/b/c): a source, compiled or extension
    module file, or a package dir."""
    leaf = re.compile(re.escape(path) + r"(\.py|\.pyc|(\.[\w-]+)?\.so)")
    return any(leaf.fullmatch(rel) or rel.startswith(path + "/") for rel in shipped)


def _module_name(rel: str) -> str:
    return rel[:-3].replace("/", ".").removesuffix(".__init__")


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
