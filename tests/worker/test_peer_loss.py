"""A lost peer is not counted against backoffLimit only after this attempt saved progress beyond
the step it restored (pure: no TF)."""

from worker import errors, progress


def test_without_a_save_the_counted_error_stands(monkeypatch):
    monkeypatch.setitem(progress._saved, "step", None)
    monkeypatch.setitem(progress._saved, "start", None)
    counted = errors.LostParameterServer("lost contact with ps-0")
    assert errors.after_peer_loss(str(counted), counted, progress.saved_step()) is counted
    assert errors.after_peer_loss("collective failed", None, progress.saved_step()) is None


def test_after_a_save_the_loss_is_exit_peer_lost(monkeypatch, capsys):
    monkeypatch.setitem(progress._saved, "step", None)
    monkeypatch.setitem(progress._saved, "start", None)
    progress.report("checkpoint", step=120, path="/ckpt/ckpt-120")
    assert progress.saved_step() == 120
    lost = errors.after_peer_loss("lost contact with ps-0", errors.LostParameterServer("x"), progress.saved_step())
    assert isinstance(lost, errors.PeerLost) and lost.exit_code == errors.EXIT_PEER_LOST == 6
    assert str(lost).startswith("lost contact with ps-0; this attempt had saved step 120")
    assert "not counted against backoffLimit" in str(lost)
    capsys.readouterr()


def test_other_events_are_no_save(monkeypatch, capsys):
    monkeypatch.setitem(progress._saved, "step", None)
    monkeypatch.setitem(progress._saved, "start", None)
    progress.report("step", step=50, target=100)
    progress.report("start", step=40, restored_from=None, target=100)
    assert progress.saved_step() is None
    progress.report("epoch", epoch=1, step=80)  # fit: BackupAndRestore saved at the epoch end
    assert progress.saved_step() == 80
    capsys.readouterr()


def test_a_save_at_the_restored_step_is_no_progress(monkeypatch, capsys):
    monkeypatch.setitem(progress._saved, "step", None)
    monkeypatch.setitem(progress._saved, "start", None)
    progress.report("start", step=100, restored_from="/ckpt/ckpt-100", target=400)
    progress.report("checkpoint", step=100, path="/ckpt/ckpt-100")
    assert progress.saved_step() is None
    assert errors.after_peer_loss("lost", None, progress.saved_step()) is None
    progress.report("checkpoint", step=150, path="/ckpt/ckpt-150")
    assert progress.saved_step() == 150
    capsys.readouterr()
