"""OWNER.json (worker/model_dir/ownership.py): which records a task accepts, and the claim itself on a
real directory through tf.io.gfile."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import threading
from pathlib import Path

import pytest

from worker import args, errors
from worker.context import TaskContext
from worker.contract import Role, Strategy
from worker.model_dir import ownership

ARGS = ["--steps", "20", "--data", "digits"]


def task(model_dir: str, name: str = "a", namespace: str = "default", role: Role = Role.CHIEF) -> TaskContext:
    return TaskContext(
        strategy=Strategy.MIRRORED,
        role=role,
        index=0,
        cluster={},
        model_dir=model_dir,
        program_module="worker.examples.fashion_mnist",
        peer_timeout_seconds=1.0,
        cluster_name=name,
        namespace=namespace,
    )


def record(name="a", namespace="default", argv=ARGS) -> dict:
    return ownership.record_for(task("/m", name, namespace), args.parse(argv), now=0.0)


def test_steps_and_saving_do_not_define_the_training():
    assert (
        record()["fingerprint"]
        == record(
            argv=[
                "--steps",
                "999",
                "--checkpoint-every",
                "7",
                "--max-checkpoints",
                "2",
                "--data",
                "digits",
                "--collective",
                "ring",
            ]
        )["fingerprint"]
    )
    assert ownership.conflict("/m", record(), record(argv=["--steps", "40", "--data", "digits"])) is None


def test_the_fit_loops_epoch_length_defines_it():
    fit = ["--loop", "fit", "--data", "digits"]
    assert record(argv=fit)["fingerprint"] != record(argv=[*fit, "--checkpoint-every", "7"])["fingerprint"]


def test_another_clusters_record_is_refused_whatever_its_training():
    line = ownership.conflict("/m", record("b", "team"), record())
    assert line == (
        "model dir /m belongs to cluster team/b (OWNER.json of 1970-01-01 00:00:00 UTC): two "
        "clusters in one dir restore each other's checkpoints. Set checkpoint.dir to another "
        "dir (unset, each cluster gets its own), or delete /m if team/b's training is no "
        "longer needed"
    )
    assert "\n" not in line and len(line) < 400  # one line, whole in `status`


def test_another_training_of_the_same_cluster_is_refused():
    line = ownership.conflict("/m", record(), record(argv=[*ARGS, "--global-batch-size", "32"]))
    assert line.startswith(
        "model dir /m holds another training of default/a (OWNER.json of "
        "1970-01-01 00:00:00 UTC: --global-batch-size 64 there, 32 now)"
    )
    assert line.endswith(
        "Run with the earlier arguments, set checkpoint.dir to another dir, or delete /m to start over"
    )


def test_the_writer_claims_an_empty_dir_and_a_rerun_accepts_it(tmp_path):
    options = args.parse(ARGS)
    assert ownership.check(task(str(tmp_path)), options) is True
    written = json.loads((tmp_path / "OWNER.json").read_text())
    assert (written["namespace"], written["cluster"], written["written_by"]) == ("default", "a", "chief-0")
    assert written["training"] == {
        "program": "worker.examples.fashion_mnist",
        "strategy": "mirrored",
        "loop": "custom",
        "global_batch_size": 64,
        "data": "digits",
        "mixed_precision": False,
    }
    assert ownership.check(task(str(tmp_path)), args.parse(["--steps", "80", "--data", "digits"]))
    assert json.loads((tmp_path / "OWNER.json").read_text()) == written  # not rewritten
    assert [p.name for p in tmp_path.iterdir()] == ["OWNER.json"]  # no temporary file left


def test_only_the_writer_writes_a_record(tmp_path):
    assert ownership.check(task(str(tmp_path), role=Role.EVALUATOR), args.parse(ARGS)) is False
    assert not (tmp_path / "OWNER.json").exists()


def test_every_task_refuses_another_clusters_dir(tmp_path):
    ownership.check(task(str(tmp_path), name="a"), args.parse(ARGS))
    for role in (Role.CHIEF, Role.EVALUATOR):
        with pytest.raises(errors.ConfigError, match=r"belongs to cluster default/a") as caught:
            ownership.check(task(str(tmp_path), name="b", role=role), args.parse(ARGS))
        assert caught.value.exit_code == 2


def test_a_dir_without_a_record_is_adopted_with_a_line(tmp_path, capsys):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint").write_text("model_checkpoint_path: 'ckpt-5'\n")
    assert ownership.check(task(str(tmp_path)), args.parse(ARGS))
    assert capsys.readouterr().out == (
        f"tfk8s: model dir {tmp_path} has no OWNER.json (written by a tfk8s before owner "
        "records): adopting it for default/a; its checkpoints are resumed as this cluster's\n"
    )
    assert json.loads((tmp_path / "OWNER.json").read_text())["cluster"] == "a"


def test_a_malformed_record_is_refused_with_the_fix(tmp_path):
    (tmp_path / "OWNER.json").write_text("{not json")
    with pytest.raises(errors.ConfigError, match=r"is not a valid owner record .*delete it"):
        ownership.check(task(str(tmp_path)), args.parse(ARGS))


def on(platform: str | None, model_dir: str, name: str = "a") -> TaskContext:
    return dataclasses.replace(task(model_dir, name), platform=platform)


def test_one_cluster_name_on_two_platforms_is_refused_in_one_line(tmp_path):
    """Two Kubernetes clusters (or machines) each running a cluster `default/a` on one gs://
    dir or shared volume: the second is refused, with the way to move the training on purpose."""
    assert ownership.check(on("kubernetes:uid-one", str(tmp_path)), args.parse(ARGS))
    assert ownership.check(on("kubernetes:uid-one", str(tmp_path)), args.parse(ARGS))  # a restart
    with pytest.raises(errors.ConfigError) as refused:
        ownership.check(on("kubernetes:uid-two", str(tmp_path)), args.parse(ARGS))
    line = str(refused.value)
    assert "\n" not in line
    assert line == (
        f"model dir {tmp_path} belongs to cluster default/a on another platform (kubernetes:uid-one "
        f"there, kubernetes:uid-two here; OWNER.json of 1970-01-01 00:00:00 UTC): two clusters of one "
        f"name in one dir restore each other's checkpoints. Set checkpoint.dir to another dir; to "
        f"resume that training here, delete {tmp_path}/OWNER.json (the checkpoints stay)"
    ).replace("1970-01-01 00:00:00 UTC", ownership._when(json.loads((tmp_path / "OWNER.json").read_text())))


def test_an_unnamed_platform_is_another_platform_not_a_wildcard(tmp_path):
    """TFK8S_PLATFORM unset (`helm template` without the chart's value platform) on either side
    is compared like a name: a twin with one named and one unnamed platform does not train in
    the dir beside the other."""
    named, unnamed = tmp_path / "named", tmp_path / "unnamed"
    assert ownership.check(on("kubernetes:ca-one", str(named)), args.parse(ARGS))
    with pytest.raises(errors.ConfigError, match=r"on another platform \(kubernetes:ca-one there, unnamed here;"):
        ownership.check(on(None, str(named)), args.parse(ARGS))
    assert ownership.check(on(None, str(unnamed)), args.parse(ARGS))
    assert ownership.check(on(None, str(unnamed)), args.parse(ARGS))  # a restart
    with pytest.raises(errors.ConfigError, match=r"on another platform \(unnamed there, kubernetes:ca-one here;"):
        ownership.check(on("kubernetes:ca-one", str(unnamed)), args.parse(ARGS))


@pytest.mark.parametrize("first", ["a", "b"])
def test_two_writers_claiming_at_once_one_wins_whichever_links_first(tmp_path, monkeypatch, first):
    """The interleaving a read-back cannot catch: both temporary records written, then both
    claims, then both read-backs. A rename lets both writers see their own record in turn;
    create-if-absent lets exactly one claim, and the other reads its record and is refused."""
    both_written = threading.Barrier(2)
    turn = {name: threading.Event() for name in ("a", "b")}
    link = os.link

    def interleaved_link(source, target):
        both_written.wait(timeout=30)
        me = claims[source.rsplit("-", 1)[1]]  # the cluster whose temporary record this is
        if me != first:
            turn[first].wait(timeout=30)  # the other links first
        try:
            return link(source, target)
        finally:
            turn[me].set()

    claims: dict[str, str] = {}
    record_for = ownership.record_for

    def recording(task_context, options, now=None):
        record = record_for(task_context, options, now)
        claims[record["claim"]] = task_context.cluster_name
        return record

    monkeypatch.setattr(ownership, "record_for", recording)
    monkeypatch.setattr(ownership.os, "link", interleaved_link)
    outcome: dict[str, str] = {}

    def writer(name):
        try:
            ownership.check(task(str(tmp_path), name), args.parse(ARGS))
            outcome[name] = "claimed"
        except errors.ConfigError as exc:
            outcome[name] = str(exc)

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    second = "b" if first == "a" else "a"
    assert outcome[first] == "claimed"
    assert outcome[second].startswith(f"model dir {tmp_path} belongs to cluster default/{first} ")
    assert json.loads((tmp_path / "OWNER.json").read_text())["cluster"] == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OWNER.json"]  # no temporary left


def test_create_if_absent_many_racers_one_winner(tmp_path):
    """Eight threads, twenty fresh names: each name is created by exactly one of them, whole."""
    for attempt in range(20):
        path = str(tmp_path / f"OWNER-{attempt}.json")
        start, won = threading.Barrier(8), []
        threads = [threading.Thread(target=_race, args=(path, start, won, tag)) for tag in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(won) == 1, won
        assert Path(path).read_text() == f"{won[0]}\n"


def _race(path: str, start: threading.Barrier, won: list, tag: int) -> None:
    start.wait(timeout=30)
    if ownership.create_if_absent(path, f"{tag}\n", tag=str(tag)):
        won.append(tag)


def test_a_filesystem_without_hard_links_claims_by_rename_and_says_so(tmp_path, monkeypatch, capsys):
    def no_links(source, target):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(ownership.os, "link", no_links)
    assert ownership.check(task(str(tmp_path)), args.parse(ARGS))
    assert "this filesystem has no hard links (Operation not permitted); claiming by rename" in capsys.readouterr().out
    assert json.loads((tmp_path / "OWNER.json").read_text())["cluster"] == "a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OWNER.json"]


def test_without_hard_links_a_rival_renaming_after_us_wins_and_we_are_refused(tmp_path, monkeypatch):
    """A rename claim (gs://, or a filesystem without hard links) cannot refuse a rival that
    renames its record over ours a moment later; the read-back after the claim is what finds it:
    the first writer stops instead of training into the rival's dir."""
    replace = os.replace
    rival = record(name="b")

    def rival_renames_after_us(source, target):
        replace(source, target)
        if Path(target).name == "OWNER.json" and json.loads(Path(target).read_text())["cluster"] == "a":
            Path(f"{target}.rival").write_text(json.dumps(rival))
            replace(f"{target}.rival", target)

    def no_links(source, target):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(ownership.os, "link", no_links)
    monkeypatch.setattr(ownership.os, "replace", rival_renames_after_us)
    with pytest.raises(errors.ConfigError) as refused:
        ownership.check(task(str(tmp_path), "a"), args.parse(ARGS))
    assert str(refused.value).startswith(f"model dir {tmp_path} belongs to cluster default/b "), refused.value
    assert json.loads((tmp_path / "OWNER.json").read_text())["claim"] == rival["claim"]
