"""Api.apply asks again when an admission webhook did not answer (a 500 `failed calling
webhook`, seen on kind when Kueue's webhook pod was not serving), and not on anything else."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import BadRequestError, InternalServerError

from launcher.backends.kubernetes import api as api_module
from launcher.backends.kubernetes.api import Api

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "iso-on-chief", "namespace": "t"}}
UNANSWERED = (
    'Internal error occurred: failed calling webhook "vjob.kb.io": failed to call webhook: Post '
    '"https://kueue-webhook-service.kueue-system.svc:443/validate-batch-v1-job?timeout=10s": EOF'
)


def server_error(cls, status: int, message: str):
    error = ApiException(status=status, reason="error")
    error.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "code": status})
    return cls(error)


class Applied:
    def to_dict(self):
        return JOB


class Server:
    """What the dynamic client's server_side_apply meets: `errors` first, then success."""

    def __init__(self, *errors):
        self.errors, self.calls = list(errors), 0

    def server_side_apply(self, resource, **_):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return Applied()


def api_with(server: Server) -> Api:
    api = Api(kubeconfig=None, context=None)
    api._dyn, api.resource = server, lambda *_: None
    return api


def test_an_unanswered_webhook_is_asked_again(monkeypatch):
    monkeypatch.setattr(api_module, "WEBHOOK_RETRY_SECONDS", 0.0)
    server = Server(
        server_error(InternalServerError, 500, UNANSWERED), server_error(InternalServerError, 500, UNANSWERED)
    )
    assert api_with(server).apply(JOB, dry_run=False) == JOB
    assert server.calls == 3


def test_a_webhook_that_never_answers_fails_the_apply_after_the_last_attempt(monkeypatch):
    monkeypatch.setattr(api_module, "WEBHOOK_RETRY_SECONDS", 0.0)
    server = Server(*[server_error(InternalServerError, 500, UNANSWERED)] * api_module.WEBHOOK_ATTEMPTS)
    with pytest.raises(InternalServerError):
        api_with(server).apply(JOB, dry_run=False)
    assert server.calls == api_module.WEBHOOK_ATTEMPTS


def test_a_refusal_is_not_asked_again():
    server = Server(server_error(BadRequestError, 400, 'admission webhook "vjob.kb.io" denied the request'))
    with pytest.raises(BadRequestError):
        api_with(server).apply(JOB, dry_run=False)
    assert server.calls == 1
