"""Secrets found by what they are: a code dir holding the credentials people really keep next to
their code ships none of them, each named in the `code:` line; `!NAME` in .tfk8signore ships one
on purpose; a realistic code dir (ordinary-code/, 22 files) ships whole. The secrets are made
here at run time (a real RSA key, a JWT) so that no credential-shaped text is committed."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from launcher.cluster_spec.loader import load_file
from launcher.code_shipping import code_bundle
from launcher.code_shipping.credentials import credential

ORDINARY = Path(__file__).parent / "ordinary-code"


@pytest.fixture(autouse=True)
def _no_global_git_config(tmp_path_factory, monkeypatch):
    """The machine's own git config (a core.excludesFile) must not decide what these dirs ship."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)


def _names(bundle) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(bundle.archive)) as tar:
        return tar.getnames()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _private_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _service_account_key() -> str:
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "my-project",
            "private_key_id": "3f2c" * 10,
            "private_key": _private_key_pem(),
            "client_email": "digits-trainer@my-project.iam.gserviceaccount.com",
            "client_id": "104" + "2" * 18,
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": "https://oauth2.googleapis.com/token",
        },
        indent=2,
    )


def _service_account_token() -> str:
    header = _b64url(json.dumps({"alg": "RS256", "kid": "Xy"}).encode())
    claims = _b64url(json.dumps({"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:ml:ci"}).encode())
    return f"{header}.{claims}.{_b64url(os.urandom(256))}"


def _kubeconfig() -> str:
    return (
        "apiVersion: v1\nkind: Config\n"
        "clusters:\n- cluster: {server: 'https://10.0.0.1:6443', insecure-skip-tls-verify: true}\n  name: ml\n"
        "contexts:\n- context: {cluster: ml, user: ci}\n  name: ml\ncurrent-context: ml\n"
        f"users:\n- name: ci\n  user:\n    token: {_service_account_token()}\n"
    )


def _docker_config() -> str:
    auth = base64.b64encode(b"ci-bot:s3cr3t-registry-pa55").decode()
    return json.dumps({"auths": {"registry.example.com": {"auth": auth}}}, indent=2)


def _code_dir_with_six_secrets(root: Path) -> Path:
    """The six secrets of issue 58 in a git repo's code dir, beside ordinary files."""
    src = root / "src"
    shutil.copytree(ORDINARY, src)
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    (src / "sa-key.json").write_text(_service_account_key())
    (src / "kubeconfig").write_text(_kubeconfig())
    (src / ".docker" / "config.json").write_text(_docker_config())
    (src / ".env").write_text("METRICS_DB_PASSWORD=hunter2\n")
    (src / ".gitignore").write_text("private/\n!.env\n")  # `!.env`: a .gitignore cannot re-include a secret
    (src / "private").mkdir()
    (src / "private" / "notes.txt").write_text("the metrics db password is hunter2\n")
    (src / "shared").symlink_to("private")  # the ignored dir under another name
    (src / "local-creds.txt").write_text("user=ci password=hunter2\n")
    (src / ".git" / "info" / "exclude").write_text("local-creds.txt\n")
    return src


def _spec(root: Path):
    path = root / "cluster.yaml"
    path.write_text(
        "name: digits\nstrategy: mirrored\ncode: ./src\nprogram: {module: train}\nroles: {chief: {replicas: 1}}\n"
    )
    return load_file(path)


def test_the_six_secrets_stay_out_each_named_in_the_code_line_and_one_ships_on_purpose(tmp_path):
    src = _code_dir_with_six_secrets(tmp_path)
    bundle = code_bundle.pack(src)
    # .docker/config.json, credHelpers only in ordinary-code/, now holds auths
    ordinary = [str(p.relative_to(ORDINARY)) for p in ORDINARY.rglob("*") if p.is_file()]
    assert _names(bundle) == sorted({*ordinary, ".gitignore"} - {".docker/config.json"})
    assert dict(bundle.left_out) == {
        "sa-key.json": "GCP service-account key",
        "kubeconfig": "kubeconfig with credentials (token)",
        ".docker/config.json": "docker registry auths",
        ".env": "secret-looking",
        "private/": ".gitignore",
        "shared/": ".gitignore, as private/",
        "local-creds.txt": str(src / ".git" / "info" / "exclude"),
    }
    note = code_bundle.note(_spec(tmp_path), bundle)
    for rel in ("sa-key.json", "kubeconfig", ".docker/config.json", ".env", "shared/", "local-creds.txt"):
        assert rel in note.split("; left out: ")[1], note
    assert note.endswith("to ship one on purpose, add `!NAME` to code.exclude or .tfk8signore"), note

    (src / ".tfk8signore").write_text("!sa-key.json\n")
    assert "sa-key.json" in _names(code_bundle.pack(src))
    assert "kubeconfig" in _names(code_bundle.pack(src, ["!kubeconfig"]))  # code.exclude too


def test_ordinary_files_all_ship_none_taken_for_a_secret(tmp_path):
    """Python reading secrets from the environment, a PEM header as a constant, a kubeconfig
    with an exec plugin, docker credHelpers, a Secret manifest without data, a GPT-2 vocab,
    hash-pinned requirements, a notebook with a PNG, a TFRecord: all ship."""
    src = shutil.copytree(ORDINARY, tmp_path / "src")
    bundle = code_bundle.pack(src)
    assert len(bundle.files) == 22
    assert bundle.left_out == ()
    assert _names(bundle) == sorted(str(p.relative_to(ORDINARY)) for p in ORDINARY.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    "name, content, found",
    [
        ("settings.py", "AWS_ACCESS_KEY_ID = '" + "AKIA" + "IOSFODNN7EXAMPLE'\n", "AWS Access Key at line 1"),
        ("id_key.txt", "", "Private Key at line 1"),  # the PEM: made in the test
        ("ci.yml", "env:\n  GH: " + "ghp_" + "a1B2" * 9 + "\n", "GitHub Token at line 2"),
        ("maps.js", "const key = '" + "AIza" + "Sy" + "D" * 33 + "';\n", "Google API key at line 1"),
        (
            "adc.json",
            json.dumps({"type": "authorized_user", "refresh_token": "1//0g"}),
            "gcloud user credentials (refresh_token)",
        ),
        ("k8s.yaml", "apiVersion: v1\nkind: Secret\ndata: {password: aHVudGVyMg==}\n", "Kubernetes Secret with data"),
    ],
)
def test_a_credential_is_found_by_what_the_file_holds(tmp_path, name, content, found):
    path = tmp_path / name
    path.write_text(content or _private_key_pem())
    assert credential(path, path.stat().st_size) == found


def test_a_pem_header_without_a_key_and_binary_files_are_not_secrets(tmp_path):
    header = tmp_path / "keys.py"
    header.write_text('HEADER = "-----BEGIN PRIVATE KEY-----"\nFOOTER = "-----END PRIVATE KEY-----"\n')
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\0" + _private_key_pem().encode())
    assert credential(header, header.stat().st_size) is None
    assert credential(binary, binary.stat().st_size) is None


def test_git_excludes_files_are_read_as_git_reads_them(tmp_path, monkeypatch):
    """core.excludesFile (from the global config) and .git/info/exclude beneath the .gitignore
    files, as `git ls-files --others --exclude-standard` lists; in a linked worktree too."""
    repo = tmp_path / "repo"
    src = repo / "src"
    src.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name in ("train.py", "scratch.ipynb", "keep.ipynb", "notes.md", "todo.md"):
        (src / name).write_text("x\n")
    global_ignore = tmp_path / "global-ignore"
    global_ignore.write_text("*.ipynb\nnotes.md\n")
    config = tmp_path / "gitconfig"
    config.write_text(f"[core]\n\texcludesFile = {global_ignore}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    (repo / ".git" / "info" / "exclude").write_text("todo.md\n!notes.md\n")
    (src / ".gitignore").write_text("!keep.ipynb\n")

    def git_lists(where: Path) -> list[str]:
        done = subprocess.run(
            ["git", "-C", str(where), "ls-files", "--others", "--exclude-standard"],
            check=True,
            capture_output=True,
            text=True,
        )
        return sorted(done.stdout.split())

    assert _names(code_bundle.pack(src)) == git_lists(src) == [".gitignore", "keep.ipynb", "notes.md", "train.py"]

    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], check=True
    )
    linked = tmp_path / "linked"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(linked)], check=True)
    for name in ("scratch.ipynb", "todo.md"):
        (linked / "src" / name).write_text("x\n")  # untracked there: left out by the same files
    assert "todo.md" not in _names(code_bundle.pack(linked / "src"))
    assert "scratch.ipynb" not in _names(code_bundle.pack(linked / "src"))
