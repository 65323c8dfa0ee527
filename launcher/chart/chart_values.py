"""`render --helm-values`: a spec as charts/tfk8s's values; `code-archive`: a code dir's archive
for `--set-file codeArchive=`. Both refused when Helm could not keep the release
(launcher/chart/helm_release.py)."""

from __future__ import annotations

import yaml

from launcher.chart import helm_release
from launcher.cluster_spec.spec import ClusterSpec
from launcher.code_shipping import code_bundle
from launcher.code_shipping.code_files import Unshippable
from launcher.plan.plan import plan
from launcher.render import code_render, render


def helm_values(spec: ClusterSpec, code: code_bundle.Bundle | None = None) -> dict:
    """values.yaml for charts/tfk8s: the spec itself, every default spelled out; with `code:`,
    `code` (loader.pack_code) as codeArchive."""
    code_bundle.check_given(spec, code, "helm_values()")
    return code_render.code_values(code, spec.model_dump(by_alias=True, mode="json"))


class _QuotedDumper(yaml.SafeDumper):
    """Every string double-quoted: Helm's YAML 1.1 reader would take a plain y, N, 1e-3 or 0o17
    for a boolean or a number."""


_QuotedDumper.add_representer(
    str, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
)


def helm_values_yaml(spec: ClusterSpec, code: code_bundle.Bundle | None = None) -> str:
    """The values as YAML; with `code:`, refused (helm_release.TooLargeForHelm) when the
    release Helm would keep would not fit its Secret."""
    values = helm_values(spec, code)
    if code is not None:
        helm_release.check(
            values,
            render.to_yaml(render.render(plan(spec, code))),
            f"code: {spec.code.path} ({code_bundle.human(code.size)} packed)",
        )
    return yaml.dump(values, Dumper=_QuotedDumper, sort_keys=False, allow_unicode=True, width=1 << 20)


class ArchiveRefused(ValueError):
    """A code dir that cannot ship through Helm, in one line."""


def code_archive(directory: str, excludes: list[str]) -> code_bundle.Bundle:
    """The archive of `directory` for `--set-file codeArchive=`, or ArchiveRefused."""
    try:
        bundle = code_bundle.pack_checked(directory, excludes, directory)
        helm_release.check_archive(bundle.archive, f"{directory} ({code_bundle.human(bundle.size)} packed)")
    except code_bundle.TooLarge as exc:
        raise ArchiveRefused(f"{exc} ({exc.hint})") from None
    except (Unshippable, ValueError, OSError, helm_release.TooLargeForHelm) as exc:
        raise ArchiveRefused(str(exc)) from None
    return bundle
