"""The fields a cluster.yaml has once (image, command, port, restartPolicy, the checkpoint claim,
the service account), from the TFJob replicas' role fields (pure; convert.py calls it)."""

from __future__ import annotations

from launcher import k8s_contract
from worker.contract import Role, Strategy

# ExitCode: TFJob retries 128 and up (a signal), fails at once on 1-127; tfk8s's reserved codes
# (the supervisor's 7, the Keras check's 78) keep their own meaning.
RESERVED_BELOW_128 = sorted(c for c in k8s_contract.RESERVED_EXIT_CODES if c < 128)
PERMANENT_EXIT_CODES = [c for c in range(1, 128) if c not in RESERVED_BELOW_128]


def common(roles: dict[Role, dict], strategy: Strategy, spec: dict, note, refuse) -> None:
    """The fields one cluster.yaml has once (image, command, restartPolicy, ...) from the roles'."""
    order = [r for r in (Role.CHIEF, Role.WORKER, Role.PS, Role.EVALUATOR) if r in roles]
    first = roles[order[0]]
    if any("command" not in roles[r] for r in order):
        missing = next(r for r in order if "command" not in roles[r])
        refuse(
            f"{roles[missing]['_src']}.template.spec.containers",
            "the tensorflow container has no command (the image's entrypoint ran): write it as command "
            "(`docker image inspect IMAGE --format '{{.Config.Entrypoint}} {{.Config.Cmd}}'` shows it)",
        )
    for key in ("image", "command"):
        if key in first:
            spec[key] = first[key]
    if "args" in first:
        spec["args"] = first["args"]
    _image_pull_policy(roles, order, note)
    for key in ("_imagePullPolicy", "_priorityClassName", "_port", "_workingDir"):
        values = {str(roles[r].get(key)) for r in order if key in roles[r]}
        if len(values) > 1:
            refuse(roles[order[0]]["_src"], f"the replicas differ in {key[1:]}: tfk8s has one for the cluster")
        elif values:
            name = key[1:]
            value = next(roles[r][key] for r in order if key in roles[r])
            if spec.get(name, value) != value:  # schedulingPolicy.priorityClass said another
                refuse(roles[order[0]]["_src"], f"the pods' {name} {value} is not the runPolicy's {spec[name]}")
            spec[name] = value
    secrets = [s for r in order for s in roles[r].get("_imagePullSecrets", [])]
    if secrets:
        spec["imagePullSecrets"] = [dict(t) for t in {tuple(sorted(s.items())) for s in secrets}]
        spec["imagePullSecrets"].sort(key=lambda s: s.get("name", ""))
    graces = {roles[r]["_terminationGracePeriodSeconds"] for r in order if "_terminationGracePeriodSeconds" in roles[r]}
    if graces:
        spec["terminationGracePeriodSeconds"] = max(graces)
    security = [roles[r].get("_securityContext") for r in order if roles[r].get("_securityContext")]
    if security:
        if any(s != security[0] for s in security):
            refuse(first["_src"], "the replicas run as different users: tfk8s has one securityContext")
        spec["securityContext"] = security[0]
    _restart(roles, order, spec, note)
    _checkpoint_claim(roles, order, strategy, spec, note)
    _user(first, spec, note)
    accounts = {roles[r].get("serviceAccountName") for r in order}
    if accounts - {None}:
        note(
            f"{first['_src']}.template.spec.serviceAccountName",
            "the account's token is mounted only in tfk8s's job-watch container, never where TF's "
            "unauthenticated gRPC server runs: a program that calls the Kubernetes API needs another way "
            "(docs/security.md); cloud credentials by workload identity still work",
            "serviceAccountName" if len(accounts) == 1 and None not in accounts else "",
        )
    if len(accounts) == 1 and None not in accounts:
        spec["serviceAccountName"] = accounts.pop()
        for r in order:
            roles[r].pop("serviceAccountName")
    else:
        has_evaluator = Role.EVALUATOR in roles
        supervised = k8s_contract.supervised_roles(
            strategy, has_evaluator, k8s_contract.Workload(spec.get("workload", "jobs"))
        )
        for r in order:
            if roles[r].get("serviceAccountName") and r in supervised:
                refuse(
                    f"{roles[r]['_src']}.template.spec.serviceAccountName",
                    "the replicas' service accounts differ, and tfk8s's supervised roles use the cluster's",
                )
    spec["roles"] = {}
    for r in order:
        fields = {k: v for k, v in roles[r].items() if not k.startswith("_")}
        for key in ("image", "command", "args"):
            if key in fields and fields[key] == spec.get(key):
                fields.pop(key)
        if "command" in fields and "args" not in fields and "args" in spec:
            fields["args"] = []
        spec["roles"][r.value] = fields


def _image_pull_policy(roles: dict[Role, dict], order: list[Role], note) -> None:
    """Kubernetes' default where the TFJob set none (Always for :latest or no tag, else
    IfNotPresent), written out: tfk8s's own default is IfNotPresent for every image."""
    if any("_imagePullPolicy" in roles[r] for r in order):
        return  # the TFJob's own (one for the cluster: common() checks)
    always = []
    for r in order:
        image = roles[r].get("image", "")
        name = image.split("@")[0]
        tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else None
        if image and "@" not in image and tag in (None, "latest"):
            always.append((r, image, tag))
    for r in order:
        roles[r]["_imagePullPolicy"] = "Always" if always else "IfNotPresent"
    for r, image, tag in always:
        note(
            f"{roles[r]['_src']}.template.spec.containers",
            f"{image} has {'no tag' if tag is None else 'the tag latest'}: pulled Always, Kubernetes' "
            "default for it, written out (one policy for the cluster)",
            "imagePullPolicy",
        )


def _user(first: dict, spec: dict, note) -> None:
    """The pods' user: tfk8s's pods are Pod Security restricted, non-root."""
    if "securityContext" in spec and "runAsUser" in spec["securityContext"]:
        return
    note(
        f"{first['_src']}.template.spec",
        "the tasks run as uid 1000 (gid 1000) with HOME=/tmp, not as the image's user (Pod Security "
        "restricted: non-root); set securityContext.runAsUser to the image's user if it is not root",
        "",
    )


_THE = {Role.CHIEF: "the chief", Role.WORKER: "the workers", Role.EVALUATOR: "the evaluator"}


def _checkpoint_claim(roles: dict[Role, dict], order: list[Role], strategy: Strategy, spec: dict, note) -> None:
    """The claim every task that writes or reads checkpoints mounts writable at one path is where
    the program keeps them: tfk8s's checkpoint volume (the evaluator and MWMS workers need one).
    Those tasks: the chief and the evaluator under parameter_server (its workers and ps never
    write checkpoints), every task but the ps otherwise."""
    if strategy is Strategy.PARAMETER_SERVER:
        writers = [r for r in order if r in (Role.CHIEF, Role.EVALUATOR)]
    else:
        writers = [r for r in order if r is not Role.PS]
    shared = None
    for r in writers:
        volumes = {v.get("name"): v for v in roles[r].get("volumes", [])}
        claims = {
            (volumes[m["name"]]["persistentVolumeClaim"]["claimName"], m["mountPath"])
            for m in roles[r].get("volumeMounts", [])
            if "persistentVolumeClaim" in volumes.get(m.get("name"), {})
            and not m.get("readOnly")
            and not volumes[m["name"]]["persistentVolumeClaim"].get("readOnly")
            and "subPath" not in m
        }
        shared = claims if shared is None else shared & claims
    if len(shared or ()) != 1:
        return
    [(claim, mount_path)] = shared
    for r in order:  # the claim's writable mounts at that path and their volumes; a read-only one stays
        names = {
            m["name"]
            for m in roles[r].get("volumeMounts", [])
            if m.get("mountPath") == mount_path and not m.get("readOnly") and "subPath" not in m
        }
        for key in ("volumes", "volumeMounts"):
            kept = [item for item in roles[r].get(key, []) if item.get("name") not in names]
            roles[r].pop(key, None)
            roles[r].update({key: kept} if kept else {})
    spec["checkpoint"] = {"volume": {"persistentVolumeClaim": {"claimName": claim}, "mountPath": mount_path}}
    note(
        roles[writers[0]]["_src"] + ".template.spec.volumes",
        f"the claim {claim} {' and '.join(_THE[r] for r in writers)} write is the checkpoint volume, at "
        f"{mount_path} as before, now mounted in every task (TFK8S_MODEL_DIR: {mount_path}/<namespace>/<name> "
        "on it; your program writes where it did)",
        "checkpoint",
    )


def _restart(roles: dict[Role, dict], order: list[Role], spec: dict, note) -> None:
    """One restartPolicy for the cluster from the replicas'."""
    policies = {r: roles[r]["_restart"] for r in order}
    if set(policies.values()) == {"Never"}:
        given = spec.get("backoffLimit")
        spec["backoffLimit"] = 0
        note(
            f"{roles[order[0]]['_src']}.restartPolicy",
            "Never (TFJob's default): the first failed pod fails the cluster, as under TFJob (backoffLimit 0"
            + (f", not the runPolicy's {given}, which TFJob applied only to restarts" if given else "")
            + "); a preempted pod or one on a lost node is still replaced, uncounted",
            "backoffLimit",
        )
        return
    if "backoffLimit" not in spec:
        spec["backoffLimit"] = 6
        note(
            "spec.runPolicy",
            "no backoffLimit: TFJob restarted failed pods without a limit; tfk8s retries each role's pods "
            "up to 6 times (set backoffLimit for more)",
            "backoffLimit",
        )
    if set(policies.values()) == {"OnFailure"}:
        spec["restartPolicy"] = "OnFailure"
        return
    for r, policy in policies.items():
        src = f"{roles[r]['_src']}.restartPolicy"
        if policy == "OnFailure":
            note(
                src,
                "OnFailure: a failed pod is replaced (restartPolicy Never) as the other roles' are",
                "restartPolicy",
            )
        elif policy == "Always":
            note(src, "Always: a failed pod is replaced; one that exits 0 is done", "restartPolicy")
    if "ExitCode" in policies.values():
        spec["fatalExitCodes"] = PERMANENT_EXIT_CODES
        roles_ = ", ".join(r.value for r, p in policies.items() if p == "ExitCode")
        note(
            "spec.tfReplicaSpecs",
            f"ExitCode ({roles_}): exit codes 1-127 fail the cluster at once for every role (but tfk8s's "
            f"own {' and '.join(map(str, RESERVED_BELOW_128))}, which keep their meaning), 128 and up are retried",
            "fatalExitCodes",
        )
