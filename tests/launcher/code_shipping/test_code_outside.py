"""`code:` stays under the spec's directory unless the spec says `outside: true`: a spec someone
else wrote with `code: ../../.config/gcloud` would otherwise pack that dir's credential files
into a ConfigMap of the namespace it names, with one `note:` line as the only sign (issue 61)."""

from __future__ import annotations

import sys

import pytest

from launcher import cli
from launcher.api.client import load_packed

SPEC = (
    "name: shipped\nstrategy: mirrored\ncommand: [python, train.py]\nroles: {{chief: {{replicas: 1}}}}\ncode: {code}\n"
)


@pytest.fixture
def layout(tmp_path):
    """home/.config/gcloud with a credential-looking file, and a project with its spec and code."""
    gcloud = tmp_path / "home" / ".config" / "gcloud"
    gcloud.mkdir(parents=True)
    (gcloud / "train.py").write_text("print('I am a credentials dir')\n")
    (gcloud / "application_default_credentials.json").write_text('{"type": "authorized_user"}\n')
    project = tmp_path / "home" / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text("print('trained')\n")
    return tmp_path


def render(spec_path, capsys) -> tuple[int, str, str]:
    code = cli.main(["render", str(spec_path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_code_dir_out_of_the_specs_directory_is_refused_with_the_fix(layout, capsys):
    spec = layout / "home" / "project" / "cluster.yaml"
    spec.write_text(SPEC.format(code="../.config/gcloud"))
    status, out, err = render(spec, capsys)
    gcloud = layout / "home" / ".config" / "gcloud"
    assert status == 2 and out == "", (status, out, err)
    assert err == (
        f"error: {spec}:5: code.path: code: ../.config/gcloud is {gcloud}, outside {spec.parent}, the spec's "
        "directory; shipping it would put its files into the cluster (move the code under "
        f"{spec.parent}, or if this dir is meant, say so: `code: {{path: ../.config/gcloud, outside: true}}`)\n"
    )


def test_a_link_out_of_the_specs_directory_is_judged_by_its_target(layout, capsys):
    project = layout / "home" / "project"
    (project / "vendored").symlink_to(layout / "home" / ".config" / "gcloud")
    (project / "cluster.yaml").write_text(SPEC.format(code="./vendored"))
    status, _, err = render(project / "cluster.yaml", capsys)
    assert status == 2 and "code: ./vendored is " in err and "outside: true" in err, err


def test_outside_true_ships_it_and_the_note_says_so(layout, capsys):
    spec = layout / "home" / "project" / "cluster.yaml"
    spec.write_text(SPEC.format(code="{path: ../.config/gcloud, outside: true}"))
    status, out, err = render(spec, capsys)
    assert status == 0 and "kind: ConfigMap" in out, err
    gcloud = layout / "home" / ".config" / "gcloud"
    note = next(line for line in err.splitlines() if line.startswith("note: code: "))
    assert note.startswith(f"note: code: {gcloud} (outside the spec's directory: code.outside) -> ConfigMap "), note


def test_code_under_the_specs_directory_needs_nothing(layout, capsys):
    spec = layout / "home" / "project" / "cluster.yaml"
    spec.write_text(SPEC.format(code="./src"))
    status, _, err = render(spec, capsys)
    assert status == 0, err
    assert f"note: code: {spec.parent / 'src'} -> ConfigMap " in err


def test_a_dict_through_the_api_is_judged_against_the_working_dir(layout, monkeypatch):
    from launcher.errors import SpecError

    monkeypatch.chdir(layout / "home" / "project")
    spec = {
        "name": "shipped",
        "strategy": "mirrored",
        "command": [sys.executable, "train.py"],
        "roles": {"chief": {"replicas": 1}},
    }
    assert load_packed({**spec, "code": "src"}).code.files == (("train.py", 17),)
    with pytest.raises(SpecError, match="outside .*project, the spec's directory"):
        load_packed({**spec, "code": str(layout / "home" / ".config" / "gcloud")})
    assert load_packed({**spec, "code": {"path": "../.config/gcloud", "outside": True}}).code is not None
