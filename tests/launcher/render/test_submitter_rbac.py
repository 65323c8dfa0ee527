"""docs/security.md's submitter Role covers every object `render` makes, for every example and
the optional parts (JobSet, PodMonitor), with what submit and delete do to each: server-side
apply (create, patch), list by label, get, delete."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from launcher.cluster_spec.loader import load_data, load_file
from launcher.plan.plan import plan
from launcher.render import render

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
# The kinds render makes, by their RBAC resource name (a kind the table lacks fails below).
RESOURCES = {
    "ConfigMap": "configmaps",
    "Service": "services",
    "ServiceAccount": "serviceaccounts",
    "Job": "jobs",
    "JobSet": "jobsets",
    "NetworkPolicy": "networkpolicies",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "PodMonitor": "podmonitors",
}
MANAGED = {"get", "list", "create", "patch", "delete"}


def submitter_role() -> dict:
    text = (REPO / "docs" / "security.md").read_text()
    [block] = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "name: tfk8s-submitter" in b]
    return yaml.safe_load(block)


def granted(role: dict, group: str, resource: str) -> set[str]:
    return {
        verb
        for rule in role["rules"]
        if group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }


def rendered(example: Path) -> list[dict]:
    spec = load_file(example)
    return render.render(plan(spec))


def with_everything() -> list[dict]:
    """The ps example as a JobSet with a PodMonitor: the optional kinds."""
    data = yaml.safe_load((REPO / "examples" / "ps.yaml").read_text())
    data.update(workload="jobset", metrics={"podMonitor": True})
    return render.render(plan(load_data(data)))


@pytest.mark.parametrize("objects", [*(rendered(e) for e in EXAMPLES), with_everything()])
def test_the_documented_role_may_apply_list_and_delete_every_rendered_object(objects):
    role = submitter_role()
    for obj in objects:
        group = obj["apiVersion"].rpartition("/")[0]
        verbs = granted(role, group, RESOURCES[obj["kind"]])
        assert MANAGED <= verbs, f"{obj['kind']} ({group or 'core'}): the Role lacks {sorted(MANAGED - verbs)}"


def test_it_holds_what_the_job_watch_role_grants():
    """Kubernetes lets a user create a Role, and bind it, only with rights the user holds."""
    role = submitter_role()
    for obj in with_everything():
        if obj["kind"] == "Role":
            for rule in obj["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        assert set(rule["verbs"]) <= granted(role, group, resource), rule
