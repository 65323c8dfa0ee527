"""The chart's objects as data: `render.render` of sample specs, with holes (scripts/gen_chart.py).

The Helm chart does not rebuild the plan. For every shape the values can take (strategy,
workload, with or without an evaluator) this module renders a sample spec whose every free
value is a sentinel ("zzname", port 54321, ...) and turns the sentinels back into tokens:

  "@name@"                 a value; inside a longer string, its text
  "@+env@"                 (a list item) the items of a list value
  {"@+labels": 1}          (a dict key) the entries of a dict value; the object's own win
  {"@if": v, "@then": x, "@else": y}   x when value v is true, else y (either may be absent)

A token whose value the chart leaves unset is absent: its dict key or list item goes. What
changes the objects' structure rather than a value (a user's command, restartPolicy OnFailure,
no serviceAccountName, ...) is a variant: the sample rendered once more with that one change,
and the difference kept as "@if" nodes. The chart (templates/_helpers.tpl) computes the values
and fills the tokens; every format, order and rule comes from here, that is from the plan.
"""

from __future__ import annotations

import base64
import difflib
import json
import tempfile
from functools import lru_cache
from pathlib import Path

from launcher import k8s_contract
from launcher.cluster_spec import names
from launcher.cluster_spec.role_spec import GPU
from launcher.cluster_spec.spec import ClusterSpec
from launcher.code_shipping import code_bundle
from launcher.k8s_contract import Workload
from launcher.plan import tfconfig
from launcher.plan.plan import plan
from launcher.render import render
from worker import contract
from worker.contract import Role, Strategy

NAME, NS = "zzname", "zzns"
INTS = {
    "port": 54321,
    "backoffLimit": 977,
    "activeDeadlineSeconds": 876543,
    "ttlSecondsAfterFinished": 765432,
    "terminationGracePeriodSeconds": 86311,
    "runAsUser": 2111,
    "runAsGroup": 2112,
    "fsGroup": 2113,
}
REPLICAS = {Role.WORKER: 13, Role.PS: 11}  # chief and evaluator: 1 when present, by the rules
MOUNT, MODEL_DIR, REMOTE_DIR = "/zzmount/", "/zzmount/zzdir", "gs://zzbucket/zzdir"
MISSING = object()
# The variants: each names the value the chart sets true when the values take that branch.
VARIANTS = ("byo", "onFailure", "noUserSA", "noQueue", "noNetworkPolicy", "noNccl", "noCode")
# checkpoint storage: the samples' volume per kind (None: no volume)
STORAGE = {
    "pvc": {"persistentVolumeClaim": {"claimName": "zzclaim"}, "mountPath": MOUNT},
    "hostPath": {"hostPath": {"path": "/zzhost"}, "mountPath": MOUNT},
    "emptyDir": None,
    "remote": None,
}


def sample(
    strategy: Strategy,
    workload: Workload,
    evaluator: bool,
    variant: str | tuple = (),
    storage: str = "pvc",
    code_dir: Path | None = None,
) -> ClusterSpec | None:
    """The shape's sample spec with `variant` (a name or several) applied; None: cannot occur."""
    on = {variant} if isinstance(variant, str) else set(variant or ())
    counts = contract.ROLE_COUNTS[strategy]
    gpus = {r for r in k8s_contract.nccl_roles(strategy) if counts[r].maximum != 0}
    roles = {}
    for role in contract.ROLES:
        count = counts[role]
        n = (
            (1 if evaluator else 0)
            if role is Role.EVALUATOR
            else 0
            if count.maximum == 0
            else count.minimum
            if count.maximum == count.minimum
            else REPLICAS[role]
        )
        limits = {"cpu": f"10{contract.ROLES.index(role)}m"}
        if role in gpus and "noNccl" not in on:
            limits[GPU] = "1"
        roles[role.value] = {
            "replicas": n,
            "env": {f"ZZ_ENV_{role.name}": f"zzenv-{role.value}"},
            "resources": {"limits": limits},
            "nodeSelector": {f"zz/{role.value}": "zz"},
            "tolerations": [{"key": f"zz-{role.value}", "operator": "Exists"}],
        }
    if ("noNccl" in on and not gpus) or ("noQueue" in on and workload is Workload.JOBS):
        return None
    volume = STORAGE[storage]
    data = {
        "name": NAME,
        "namespace": NS,
        "strategy": strategy.value,
        "workload": workload.value,
        "image": "zz/image:1",
        "imagePullPolicy": "Always",
        "roles": roles,
        "env": {"ZZ_ENV": "zzenv"},
        "labels": {"zzlabel": "zzlabel-v"},
        "annotations": {"zzann": "zzann-v"},
        "serviceAccountName": "zzsa",
        "priorityClassName": "zzprio",
        "program": {"module": "zz.program", "args": ["zzparg"]},
        "checkpoint": {"dir": REMOTE_DIR}
        if storage == "remote"
        else {"dir": MODEL_DIR, **({"volume": volume} if volume else {})},
        "evaluatorGraceSeconds": 65431,
        "peerTimeoutSeconds": 43211,
        "restartPolicy": "Never",
        "securityContext": {k: INTS[k] for k in ("runAsUser", "runAsGroup", "fsGroup")},
        **{
            k: INTS[k]
            for k in (
                "port",
                "backoffLimit",
                "activeDeadlineSeconds",
                "ttlSecondsAfterFinished",
                "terminationGracePeriodSeconds",
            )
        },
    }
    if workload is Workload.JOBSET and "noQueue" not in on:
        data["queue"] = "zzqueue"
    if code_dir is not None and "noCode" not in on:
        data["code"] = str(code_dir)
    changes = {
        "byo": {"command": ["zzcmd"], "args": ["zzarg"], "program": None},
        "onFailure": {"restartPolicy": "OnFailure"},
        "noUserSA": {"serviceAccountName": None},
        "noNetworkPolicy": {"networkPolicy": False},
    }
    data.update({k: x for v in on for k, x in changes.get(v, {}).items()})
    return ClusterSpec.model_validate(data)


def tokens(spec: ClusterSpec, storage: bool = True) -> tuple[list, list, list]:
    """(whole, splices, texts): the sample's sentinels and their tokens.

    whole: (key or None, value, token), a node equal to value (under that dict key) is the
    token; splices: (item, token), list items or dict entries that are a value's items;
    texts: (text, token), replaced inside strings."""
    cluster = plan(spec)
    # The checkpoint storage first: its kind is the chart's `storage` table.
    whole: list = [(None, v, f"@ckpt{k.title()}@") for k, v in (storage_items("pvc") if storage else {}).items()]
    whole += [(None, v, f"@{k}@") for k, v in INTS.items()]
    whole += [
        (None, str(INTS["terminationGracePeriodSeconds"]), "@podGrace@"),
        (None, "65431", "@evaluatorGrace@"),
        (None, "43211", "@peerTimeout@"),
        (None, str(contract.server_linger_seconds(INTS["terminationGracePeriodSeconds"])), "@serverLinger@"),
        (None, MODEL_DIR, "@modelDir@"),
        (None, REMOTE_DIR, "@modelDir@"),
        (None, MOUNT, "@mountPath@"),
        (None, "zzclaim", "@claimName@"),
        (None, "/zzhost", "@hostPath@"),
        (None, "zz/image:1", "@image@"),
        (None, "zzprio", "@priorityClassName@"),
        (None, "zzsa", "@serviceAccountName@"),
        (None, "zzqueue", "@queue@"),
        (None, "zz.program", "@programModule@"),
        ("imagePullPolicy", "Always", "@imagePullPolicy@"),
        ("restartPolicy", spec.restart_policy, "@restartPolicy@"),
        ("value", spec.restart_policy, "@restartPolicy@"),
        (None, render.supervisor_sources(), "@rootData@"),
    ]
    splices: list = [
        ({"zzlabel": "zzlabel-v"}, "@+labels"),
        ({"zzann": "zzann-v"}, "@+annotations"),
        ({"name": "ZZ_ENV", "value": "zzenv"}, "@+env@"),
        ("zzparg", "@+programArgs@"),
        ("zzcmd", "@+command@"),
        ("zzarg", "@+args@"),
    ]
    for role in cluster.roles:
        r, cfg = role.role, spec.roles.get(role.role)
        if role.replicas in REPLICAS.values():
            whole.append((None, role.replicas, f"@replicas.{r.value}@"))
        resources = {k: v for k, v in (("requests", cfg.resources.requests), ("limits", cfg.resources.limits)) if v}
        whole += [
            (None, resources, f"@resources.{r.value}@"),
            (None, cfg.node_selector, f"@nodeSelector.{r.value}@"),
            (
                None,
                [t.model_dump(by_alias=True, exclude_none=True) for t in cfg.tolerations],
                f"@tolerations.{r.value}@",
            ),
        ]
        splices.append(({"name": f"ZZ_ENV_{r.name}", "value": f"zzenv-{r.value}"}, f"@+env.{r.value}@"))
    address = tfconfig.kubernetes_address(cluster)
    texts = [(json.dumps(cluster.tf_config(Role.CHIEF, 0, address)["cluster"], separators=(",", ":")), "@tfCluster@")]
    bundle = spec.code_bundle
    if bundle is not None:
        whole += [
            (None, base64.b64encode(bundle.archive).decode(), "@codeArchive@"),
            (None, bundle.digest, "@codeSha@"),
            (None, str(bundle.size), "@codeBytes@"),
        ]
        texts.append((bundle.object_name(spec.name), "@codeObject@"))
    return whole, splices, texts + [(NAME, "@name@"), (NS, "@ns@")]


def tokenize(node, pairs, key=None):
    whole, splices, texts = pairs
    for k, value, token in whole:
        if (k is None or k == key) and type(node) is type(value) and node == value:
            return token
    if isinstance(node, dict):
        out = {}
        for item, token in splices:
            if (
                isinstance(item, dict)
                and item
                and item.items() <= node.items()
                and all(isinstance(k, str) and k.startswith("zz") for k in item)
            ):
                node = {k: v for k, v in node.items() if k not in item}
                out[token] = 1
        return {**{k: tokenize(v, pairs, k) for k, v in node.items()}, **out}
    if isinstance(node, list):
        out = []
        for item in node:
            token = next((t for i, t in splices if i == item), None)
            out.append(token if token else tokenize(item, pairs))
        return out
    if isinstance(node, str):
        for text, token in texts:
            node = node.replace(text, token)
    return node


def merge(base, variants: dict):
    """One tree for the base and its variants ({name: tree or MISSING}), as "@if" nodes."""
    same = {v: t for v, t in variants.items() if t == base}
    rest = {v: t for v, t in variants.items() if v not in same}
    if not rest:
        return base
    kind = type(base)
    deep = {v: t for v, t in rest.items() if kind in (dict, list) and type(t) is kind}
    out = base
    if kind is dict and deep:
        keys = list(base) + [k for t in deep.values() for k in t if k not in base]
        keys = list(dict.fromkeys(keys))
        out = {}
        for k in keys:
            merged = merge(base.get(k, MISSING), {v: t.get(k, MISSING) for v, t in deep.items()})
            if merged is not MISSING:
                out[k] = merged
    elif kind is list and deep:
        out = _merge_lists(base, deep)
    for v, t in rest.items():
        if v not in deep:
            out = _choice(v, t, out)
    return out


def _choice(variant, then, otherwise):
    node = {"@if": variant}
    if then is not MISSING:
        node["@then"] = then
    if otherwise is not MISSING:
        node["@else"] = otherwise
    return node


def _merge_lists(base: list, variants: dict) -> list:
    """Items matched by position in the longest common runs; unmatched ones only in one side
    become "@if" items (absent in the other)."""
    key = lambda item: json.dumps(item, sort_keys=True)  # noqa: E731
    slots = [{} for _ in base]  # per base item: its counterpart in each variant
    extra = [[] for _ in range(len(base) + 1)]  # items a variant inserts before base item i
    for v, items in variants.items():
        matcher = difflib.SequenceMatcher(None, [key(i) for i in base], [key(i) for i in items], autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal" or (op == "replace" and i2 - i1 == j2 - j1):
                for i, j in zip(range(i1, i2), range(j1, j2)):
                    slots[i][v] = items[j]
                continue
            # Unequal runs: the same object (kind and name) or named item on both sides is one.
            unused = list(range(j1, j2))
            for i in range(i1, i2):
                j = next(
                    (
                        j
                        for j in unused
                        if _identity(items[j]) is not None and _identity(items[j]) == _identity(base[i])
                    ),
                    None,
                )
                slots[i][v] = MISSING if j is None else items[j]
                if j is not None:
                    unused.remove(j)
            extra[i1] += [_choice(v, items[j], MISSING) for j in unused]
    out = []
    for i, item in enumerate(base):
        out += extra[i]
        merged = merge(item, {v: slots[i].get(v, item) for v in variants})
        out.append(merged)
    return out + extra[len(base)]


def _identity(item):
    if not isinstance(item, dict):
        return None
    if "kind" in item:
        return item["kind"], json.dumps(item.get("metadata", {}).get("name"))
    return json.dumps(item["name"]) if "name" in item else None


def objects(shape: tuple, variant: str | tuple, code_dir: Path) -> list | None:
    """The shape's sample objects with `variant` (a name or several), tokenized (or None)."""
    spec = sample(*shape, variant, code_dir=code_dir)
    return None if spec is None else [tokenize(o, tokens(spec)) for o in render.render(spec)]


def shape_objects(strategy: Strategy, workload: Workload, evaluator: bool, code_dir: Path) -> list:
    """The shape's objects, tokenized, with every variant merged in."""
    shape = (strategy, workload, evaluator)
    variants = {v: t for v in VARIANTS if (t := objects(shape, v, code_dir)) is not None}
    return merge(objects(shape, (), code_dir), variants)


@lru_cache(maxsize=None)
def storage_items(kind: str) -> dict:
    """{"mount": ..., "volume": ...}: the checkpoint items of a pod under storage `kind`."""
    spec = sample(Strategy.MIRRORED, Workload.JOBS, False, "noCode", storage=kind)
    job = next(o for o in render.render(spec) if o["kind"] == "Job")["spec"]["template"]["spec"]
    pick = lambda items: next((i for i in items if i["name"] == "checkpoint"), None)  # noqa: E731
    found = {"mount": pick(job["containers"][0]["volumeMounts"]), "volume": pick(job["volumes"])}
    return {k: v for k, v in found.items() if v is not None}


def generate() -> dict:
    with tempfile.TemporaryDirectory(prefix="tfk8s-chart-") as code_dir:  # a sample's code:
        (Path(code_dir) / "train.py").write_text("")
        shapes = {
            f"{s.value}/{w.value}/{int(e)}": shape_objects(s, w, e, Path(code_dir))
            for s in Strategy
            for w in Workload
            for e in (False, True)
        }
    storage = {}
    for kind in STORAGE:
        pairs = tokens(sample(Strategy.MIRRORED, Workload.JOBS, False, "noCode", storage=kind), storage=False)
        storage[kind] = {k: tokenize(v, pairs) for k, v in storage_items(kind).items()}
    return {"shapes": shapes, "storage": storage, **name_formats()}


def name_formats() -> dict:
    """Generated names as tokenized strings: Jobs, TF addresses (@index@), the supervisor's
    account, the cluster's own model dir (@mountDir@: the mountPath, no end /), and
    names.generated_names as [role, kind, name] per workload (@index@: a role's last)."""
    spec = sample(Strategy.MIRRORED, Workload.JOBS, False, "noCode")
    spec = spec.model_copy(update={"checkpoint": spec.checkpoint.model_copy(update={"dir": None})})
    texts = [("98765", "@index@"), (str(INTS["port"]), "@port@"), (NAME, "@name@"), (NS, "@ns@")]
    text = lambda value: tokenize(value, ([], [], texts))  # noqa: E731
    out: dict = {"job": {}, "address": {}, "generated": {}}
    for w in Workload:
        cluster = plan(spec.model_copy(update={"workload": w}))
        address = tfconfig.kubernetes_address(cluster)
        for key, fn in (
            ("job", lambda r, w=w: names.job(NAME, r, w)),
            ("address", lambda r, address=address: address(r, 98765)),
        ):
            out[key][w.value] = {r.value: text(fn(r)) for r in contract.ROLES}
        out["generated"][w.value] = [
            [r, kind, text(n)]
            for r, kind, n in names.generated_names(NAME, w, {r.value: 98766 for r in contract.ROLES})
        ]
    code = code_bundle.Bundle(root="", archive=b"", files=())
    return {
        "names": {
            **out,
            "supervisor": text(names.supervisor_account(NAME)),
            "code": text(code.object_name(NAME)).replace(code.digest[:10], "@codeSha10@"),
            "modelDir": text(spec.model_dir).replace(MOUNT.rstrip("/"), "@mountDir@"),
        }
    }
