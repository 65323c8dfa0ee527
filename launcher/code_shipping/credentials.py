"""Files that hold credentials, found by what they hold rather than by their names (`code:` leaves
them out; launcher/code_shipping/code_files.py decides when).

Two kinds of evidence, both cheap enough for every small file of a code dir:

- documents parsed by their shape (JSON, YAML): a GCP service-account key or gcloud user
  credentials, a kubeconfig whose users carry credentials, docker registry auths, a Kubernetes
  Secret manifest with data. No detector we know reads these structures; parsing them is exact
  where a regex on a field name guesses (a kubeconfig with an `exec:` plugin holds no secret);
- Yelp's detect-secrets detectors for tokens of a known shape (private key PEM blocks, AWS and
  Azure keys, GitHub/GitLab/PyPI/npm/OpenAI/Slack/Stripe/SendGrid/Square/Twilio tokens, JWTs):
  their maintained patterns, run on the whole text. Not its scan_file (1-2 ms a line through
  its plugin and filter machinery: 0.7 s for a 500-line module), not the guessing detectors
  (high-entropy strings, keyword assignments: false positives on hashes, vocabularies and
  `password = os.environ[...]`), not BasicAuth (docstring URLs like `user:pass@host`), not the
  slow, rare ones (Cloudant, IBM, Softlayer, Artifactory, Mailchimp, Telegram, Discord: each
  over 1 s on 60 MiB of ordinary files, where the chosen set takes 5 s together).

Binary files (a NUL in the first 8 KiB: TFRecords, images, checkpoints) and files over
SNIFF_MAX_BYTES are not read.
"""

from __future__ import annotations

import importlib
import json
import re
from functools import lru_cache
from pathlib import Path

import yaml

SNIFF_MAX_BYTES = 1024 * 1024
# (module in detect_secrets.plugins, class): see the module doc for the ones left out and why.
DETECTORS = (
    ("private_key", "PrivateKeyDetector"),
    ("aws", "AWSKeyDetector"),
    ("azure_storage_key", "AzureStorageKeyDetector"),
    ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"),
    ("pypi_token", "PypiTokenDetector"),
    ("npm", "NpmDetector"),
    ("openai", "OpenAIDetector"),
    ("slack", "SlackDetector"),
    ("stripe", "StripeDetector"),
    ("sendgrid", "SendGridDetector"),
    ("square_oauth", "SquareOAuthDetector"),
    ("twilio", "TwilioKeyDetector"),
    ("jwt", "JwtTokenDetector"),
)
# detect-secrets has no detector for Google API keys (a GCP access key that needs no other part).
GOOGLE_API_KEY = re.compile(r"AIza[0-9A-Za-z_-]{35}")
# PrivateKeyDetector matches the header alone, which code that writes or parses keys spells out
# too: a key is a header followed by its base64 body (newlines raw, or escaped as in a JSON string).
_PEM_BODY = re.compile(r"[^\n]{0,40}?(?:\\n|\s)+[A-Za-z0-9+/]{40,}")
# only these YAML files are parsed (a pure-Python parse of every YAML file would cost more than
# the regexes): a kubeconfig's `users:` or a Secret's `kind: Secret`
_YAML_HINT = re.compile(r"^(?:users\s*:|kind\s*:\s*[\"']?Secret\b)", re.MULTILINE)
_KUBE_USER_SECRETS = ("token", "client-key-data", "password")
_AUTH_PROVIDER_SECRETS = ("access-token", "refresh-token", "id-token", "client-secret")
_DOCKER_AUTH_SECRETS = ("auth", "identitytoken", "password", "registrytoken")


@lru_cache(maxsize=1)
def _detectors() -> tuple:
    # imported on first use: the plugins pull in requests (~0.1 s), needed only when code ships
    return tuple(
        getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)() for module, name in DETECTORS
    )


def credential(path: Path, size: int) -> str | None:
    """What credential the file at `path` (of `size` bytes) holds, e.g. 'GCP service-account key',
    'AWS Access Key at line 3'; None when none was found or it is not sniffed (binary, large)."""
    if size == 0 or size > SNIFF_MAX_BYTES:
        return None
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    text = data.decode("utf-8", errors="replace")
    return _in_documents(text) or _in_text(text)


def _in_documents(text: str) -> str | None:
    documents: list = []
    if text.lstrip().startswith(("{", "[")):
        try:
            documents = [json.loads(text)]
        except ValueError:
            pass
    if not documents and _YAML_HINT.search(text):
        try:
            documents = list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
        except yaml.YAMLError:
            pass
    for document in documents:
        if isinstance(document, dict) and (found := _in_document(document)):
            return found
    return None


def _in_document(doc: dict) -> str | None:
    kind = doc.get("type")
    if kind == "service_account" and doc.get("private_key"):
        return "GCP service-account key"
    if kind == "authorized_user" and doc.get("refresh_token"):
        return "gcloud user credentials (refresh_token)"
    if isinstance(doc.get("users"), list):
        held = sorted({key for user in doc["users"] for key in _kube_user_secrets(user)})
        if held:
            return f"kubeconfig with credentials ({', '.join(held)})"
    auths = doc.get("auths")
    if isinstance(auths, dict) and any(_docker_secrets(entry) for entry in auths.values()):
        return "docker registry auths"
    # the legacy ~/.dockercfg: registries at the top, each with its `auth`
    if doc and all(isinstance(entry, dict) and entry.get("auth") for entry in doc.values()):
        return "docker registry auths (.dockercfg)"
    if doc.get("kind") == "Secret" and (doc.get("data") or doc.get("stringData")):
        return "Kubernetes Secret with data"
    return None


def _kube_user_secrets(entry) -> list[str]:
    user = entry.get("user") if isinstance(entry, dict) else None
    if not isinstance(user, dict):
        return []
    held = [key for key in _KUBE_USER_SECRETS if user.get(key)]
    provider = user.get("auth-provider")
    config = provider.get("config") if isinstance(provider, dict) else None
    if isinstance(config, dict):
        held += [f"auth-provider {key}" for key in _AUTH_PROVIDER_SECRETS if config.get(key)]
    return held


def _docker_secrets(entry) -> bool:
    return isinstance(entry, dict) and any(entry.get(key) for key in _DOCKER_AUTH_SECRETS)


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def _in_text(text: str) -> str | None:
    for detector in _detectors():
        valid = getattr(detector, "is_formally_valid", None)  # JwtTokenDetector's own check
        for pattern in detector.denylist:
            for match in pattern.finditer(text):
                if valid is not None and not valid(match.group(0)):
                    continue
                if detector.secret_type == "Private Key" and not _PEM_BODY.match(text, match.end()):
                    continue
                return f"{detector.secret_type} at line {_line(text, match.start())}"
    if found := GOOGLE_API_KEY.search(text):
        return f"Google API key at line {_line(text, found.start())}"
    return None
