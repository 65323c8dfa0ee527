"""The fields a cluster.yaml has once (image, command, port, restartPolicy, the checkpoint claim,
the service account), from the TFJob replicas' role fields (pure; convert.py calls it)."""

from __future__ import annotations

from collections.abc import Callable

from launcher import k8s_contract
from worker.contract import Role, Strategy

# ExitCode: TFJob retries 128 and up (a signal), fails at once on 1-127; tfk8s's reserved codes
# (the supervisor's 7, the Keras check's 78) keep their own meaning.
JOBSET = k8s_contract.Workload.JOBSET.value
RESERVED_BELOW_128 = sorted(c for c in k8s_contract.RESERVED_EXIT_CODES if c < 128)
PERMANENT_EXIT_CODES = [c for c in range(1, 128) if c not in RESERVED_BELOW_128]


ImageCommand = Callable[[str], "tuple[list[str], list[str], str] | None"]


def common(
    roles: dict[Role, dict], strategy: Strategy, spec: dict, note, refuse, image_command: ImageCommand | None = None
) -> None:
    """The fields one cluster.yaml has once (image, command, restartPolicy, ...) from the roles'.
    image_command: an image's (ENTRYPOINT, CMD, where read) or None (image_config.py)."""
    order = [r for r in (Role.CHIEF, Role.WORKER, Role.PS, Role.EVALUATOR) if r in roles]
    first = roles[order[0]]
    _entrypoints(roles, order, strategy, spec, note, refuse, image_command)
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


def _entrypoints(roles, order, strategy: Strategy, spec: dict, note, refuse, image_command) -> None:
    """A tensorflow container without a command runs its image's ENTRYPOINT (with its args; with
    none, the image's CMD too), as under TFJob: written out where the image is on this machine,
    else `command: []`, which under parameter_server or with an evaluator runs as a JobSet (the
    supervisor that ends those tasks as Jobs cannot wrap an entrypoint it does not know)."""
    missing = [r for r in order if "command" not in roles[r]]
    if not missing:
        return
    unresolved = []
    read: dict[str, tuple | None] = {}  # one look at each image (the roles usually share it)
    for r in missing:
        image = roles[r].get("image", "")
        if image_command and image not in read:
            read[image] = image_command(image)
        found = read.get(image)
        if found is None:
            unresolved.append(r)
            continue
        entrypoint, cmd, where = found
        command = [*entrypoint, *(cmd if "args" not in roles[r] else [])]
        if not command:
            refuse(
                f"{roles[r]['_src']}.template.spec.containers",
                f"the tensorflow container has no command and its image {roles[r].get('image')} no ENTRYPOINT or "
                "CMD: give the command",
            )
            continue
        roles[r]["command"] = command
        note(
            f"{roles[r]['_src']}.template.spec.containers",
            f"no command: the image's ENTRYPOINT{'' if 'args' in roles[r] else ' and CMD'} {command}, read by "
            f"{where}, written out as command (tfk8s runs it as TFJob did; a rebuilt image with another "
            "ENTRYPOINT needs the import again)",
            "command" if r == order[0] else f"roles.{r.value}",
        )
    if not unresolved:
        return
    if len(unresolved) != len(order):
        refuse(
            f"{roles[unresolved[0]]['_src']}.template.spec.containers",
            "this replica runs its image's ENTRYPOINT (no command) and others a command: write its command "
            "(docker image inspect IMAGE shows the entrypoint), or pull the image here and import again",
        )
        return
    for r in order:
        roles[r]["command"] = []
    wrapped = [r for r in (*k8s_contract.traits(strategy).servers, Role.EVALUATOR) if r in roles]
    jobset = spec.get("workload") == JOBSET
    if wrapped and not jobset:
        spec["workload"] = JOBSET
    evaluator = Role.EVALUATOR in roles
    ended = " and ".join(r.value for r in wrapped if r is not Role.EVALUATOR)
    note(
        f"{roles[order[0]]['_src']}.template.spec.containers",
        "no command: each task runs its image's ENTRYPOINT (command: [], the args kept), as under TFJob; the "
        "image is not on this machine, so tfk8s cannot name the entrypoint"
        + (
            f"; tfk8s's supervisor cannot wrap it, so the cluster runs as one JobSet (workload: jobset; needs "
            f"JobSet installed), whose success policy ends the {ended or 'tasks'}"
            if wrapped and not jobset
            else ""
        )
        + (
            "; the evaluator is not ended by tfk8s: it must exit by itself after the final checkpoint (the "
            "built-in worker does), or the cluster never succeeds"
            if evaluator
            else ""
        )
        + ". To keep every guarantee, pull the image here and import again, or write the command",
        "command",
    )


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
    said = set()
    for r, image, tag in always:
        if image in said:
            continue
        said.add(image)
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
