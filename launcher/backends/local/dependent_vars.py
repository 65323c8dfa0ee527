"""Kubernetes' `$(VAR)` references, expanded for a local task as the kubelet expands them for a
container: each env value from the variables defined before it in the container's env list,
command and args from the whole list. `$(NAME)` of a defined variable becomes its value, `$$`
becomes `$` (so `$$(NAME)` stays `$(NAME)`), an undefined `$(NAME)` and an unclosed `$(` stay as
written. Nothing else is expanded: the host's environment is not the container's list.
"""

from __future__ import annotations

from typing import Iterable, Mapping


def expand(text: str, defined: Mapping[str, str]) -> str:
    """`text` with its `$(NAME)` references to `defined` replaced (rules in the docstring)."""
    out: list[str] = []
    cursor = 0
    while (dollar := text.find("$", cursor)) != -1 and dollar + 1 < len(text):
        out.append(text[cursor:dollar])
        following = text[dollar + 1]
        if following == "$":  # an escaped `$`
            out.append("$")
            cursor = dollar + 2
        elif following == "(" and (closer := text.find(")", dollar + 2)) != -1:
            name = text[dollar + 2 : closer]
            out.append(defined[name] if name in defined else f"$({name})")
            cursor = closer + 1
        else:  # `$x`, or `$(` never closed: kept as written
            out.append("$" + following)
            cursor = dollar + 2
    out.append(text[cursor:])
    return "".join(out)


def expand_env(env: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A container's env list, in order, each value expanded from the ones before it."""
    defined: dict[str, str] = {}
    for name, value in env:
        defined[name] = expand(value, defined)
    return defined


def expand_command(argv: Iterable[str], env: Mapping[str, str]) -> list[str]:
    """A container's command and args, expanded from its (expanded) env."""
    return [expand(arg, env) for arg in argv]
