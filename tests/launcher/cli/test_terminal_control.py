"""A task's output reaches `status` (a failed task's last line is its message) and `logs`: what
they print carries no terminal control, so a program cannot fake a line the launcher printed or
write the terminal's clipboard (OSC 52); `logs --raw` gives the output as written (issue 61)."""

from __future__ import annotations

import sys

from launcher import cli
from launcher.status.lines import printable

# Erase the line, back to its start, print a fake verdict; then a clipboard write (OSC 52).
FAKE_VERDICT = "\x1b[2K\r[Succeeded] chief 1/1"
CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
HOSTILE = (
    "import sys; sys.stdout.write('bell\\x07 c1\\x9b31m csi, tab\\tkept' + chr(10)); "
    f"sys.stdout.write({FAKE_VERDICT + CLIPBOARD + ' done'!r} + chr(10)); sys.stdout.flush(); sys.exit(1)"
)
CONTROL = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))]


def has_control(text: str) -> bool:
    return any(c in text for c in CONTROL)


def test_status_and_logs_print_no_terminal_control_from_a_tasks_output(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hostile.yaml").write_text(
        f"name: hostile\nstrategy: mirrored\ncommand: [{sys.executable}, -c, {HOSTILE!r}]\n"
        "roles: {chief: {replicas: 1}}\nrestartPolicy: Never\nbackoffLimit: 0\n"
    )
    assert cli.main(["submit", "hostile.yaml", "--local", "--workdir", str(tmp_path / "runs")]) == 1
    submitted = capsys.readouterr()
    assert not has_control(submitted.out + submitted.err), submitted

    assert cli.main(["status", "hostile", "--workdir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cluster local/hostile: Failed - chief-0 exited 1: [Succeeded] chief 1/1 done\n"), out
    assert not has_control(out.replace("\n", "")), out

    assert cli.main(["logs", "hostile", "--role", "chief", "--workdir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "bell c1 csi, tab\tkept\n[Succeeded] chief 1/1 done\n" in out, out
    assert not has_control(out.replace("\n", "").replace("\t", "")), out

    assert cli.main(["logs", "hostile", "--all", "--workdir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "[chief-0] [Succeeded] chief 1/1 done\n" in out and not has_control(out.replace("\n", "").replace("\t", ""))

    assert cli.main(["logs", "hostile", "--role", "chief", "--raw", "--workdir", str(tmp_path / "runs")]) == 0
    assert FAKE_VERDICT + CLIPBOARD + " done\n" in capsys.readouterr().out


def test_printable_removes_whole_sequences_and_keeps_text():
    assert printable(FAKE_VERDICT + CLIPBOARD + " done") == "[Succeeded] chief 1/1 done"
    assert printable("a\x1b]52;c;ZXZpbA==\x1b\\b") == "ab"  # OSC ended by ST
    assert printable("\x1bP1$qm\x1b\\x\x1b(By\x9b1;31mz\x9d0;title\x9c.") == "xyz."  # DCS, charset, C1 CSI, C1 OSC
    assert printable("unended \x1b]0;title\nnext line\n") == "unended \nnext line\n"
    assert printable("tab\there é 中 ✓\n") == "tab\there é 中 ✓\n"
