"""Cloud clients from the pod's identity: Workload Identity on GKE, or a key file whose path
GOOGLE_APPLICATION_CREDENTIALS names (a service-account JSON: {"type": "service_account",
"private_key": "-----BEGIN PRIVATE KEY-----\\n...", "client_email": ...}) mounted from a Secret."""

import json
import os

from google.cloud import storage
from google.oauth2 import service_account

PEM_HEADER = "-----BEGIN PRIVATE KEY-----"


def storage_client() -> storage.Client:
    key_file = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if not key_file:
        return storage.Client()
    with open(key_file) as f:
        info = json.load(f)
    if info.get("type") != "service_account" or not info.get("private_key", "").startswith(PEM_HEADER):
        raise ValueError(f"{key_file}: not a service-account key")
    credentials = service_account.Credentials.from_service_account_info(info)
    return storage.Client(credentials=credentials, project=info["project_id"])
