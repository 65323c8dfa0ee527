"""`tfk8s completion bash|zsh`: a completion script generated from the CLI's argparse parser,
so it knows every command, flag and choice the installed version has; and `--version`.

Plain bash `complete -F` (zsh loads it through bashcompinit): no dependency.
"""

from __future__ import annotations

import argparse
from pathlib import Path

SHELLS = ["bash", "zsh"]
PROG = "tfk8s"


def version() -> str:
    """The installed package's version; from pyproject.toml when running from a checkout
    that is not installed."""
    from importlib import metadata

    try:
        return metadata.version("tfk8s")
    except metadata.PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            return tomllib.loads(pyproject.read_text())["project"]["version"]
        except (OSError, KeyError, ValueError):
            return "unknown (not installed: pip install -e .)"


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse has no public accessor for subparsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _words(parser: argparse.ArgumentParser) -> tuple[list[str], dict[str, list[str]], bool]:
    """(its flags, the choices of those flags that have them, whether a positional is a file)."""
    flags, choices, takes_file = [], {}, False
    for action in parser._actions:
        if action.option_strings:
            flags += action.option_strings
            if action.choices:
                for flag in action.option_strings:
                    choices[flag] = [str(c) for c in action.choices]
        elif action.dest == "spec":
            takes_file = True
    return flags, choices, takes_file


def _positional_choices(parser: argparse.ArgumentParser) -> list[str]:
    return [str(c) for a in parser._actions if not a.option_strings and a.choices for c in a.choices]


def bash(parser: argparse.ArgumentParser) -> str:
    commands = _commands(parser)
    cases = []
    for name, sub in commands.items():
        flags, choices, takes_file = _words(sub)
        for flag, values in choices.items():
            cases.append(f'        {name}:{flag}) COMPREPLY=($(compgen -W "{" ".join(values)}" -- "$cur")); return;;')
        positional = _positional_choices(sub)
        default = f'COMPREPLY=($(compgen -W "{" ".join(flags + positional)}" -- "$cur"))'
        if takes_file:
            default += '; [[ "$cur" != -* ]] && COMPREPLY+=($(compgen -f -- "$cur"))'
        cases.append(f"        {name}:*) {default}; return;;")
    top = " ".join(list(commands) + ["--version", "--help"])
    body = "\n".join(cases)
    return f'''# {PROG} completion for bash, generated from its argument parser (tfk8s {version()}).
# Load it with: eval "$({PROG} completion bash)"
_{PROG}() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" cmd="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        [[ "${{COMP_WORDS[i]}}" != -* ]] && {{ cmd="${{COMP_WORDS[i]}}"; break; }}
    done
    if [[ -z "$cmd" ]]; then
        COMPREPLY=($(compgen -W "{top}" -- "$cur")); return
    fi
    case "$cmd:$prev" in
        *:--kubeconfig|*:--workdir) COMPREPLY=($(compgen -f -- "$cur")); return;;
{body}
    esac
}}
complete -F _{PROG} {PROG}
'''


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    if shell == "bash":
        return bash(parser)
    if shell == "zsh":
        return (
            "# tfk8s completion for zsh: the bash one, through zsh's bashcompinit.\n"
            '# Load it with: eval "$(tfk8s completion zsh)"\n'
            "autoload -U +X bashcompinit && bashcompinit\n" + bash(parser)
        )
    raise ValueError(f"no completion for shell {shell!r}; one of {', '.join(SHELLS)}")
