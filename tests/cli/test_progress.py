"""Progress bars: on stderr, and only at a terminal, so piped output holds the results alone."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

from gpudvfs.cli.progress import progress_bars


def test_bars_are_drawn_on_a_terminal_stderr_only(capsys, monkeypatch):
    with progress_bars() as update:  # capsys: neither stream is a terminal
        update("stage", 3, 4, "label")
    assert capsys.readouterr() == ("", "")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich's stand-in for a terminal
    with progress_bars() as update:
        update("stage", 3, 4, "label")
    out, err = capsys.readouterr()
    assert out == "" and "3/4" in err and "label" in err
    with progress_bars(disable=True) as update:
        update("stage", 3, 4, "label")
    assert capsys.readouterr() == ("", "")


def test_govern_run_piped_prints_no_bar_on_stdout(tmp_path):
    """The command as a user pipes it, stderr a pseudo-terminal: the bar goes there, the report
    (or the JSON alone) to the pipe."""
    cmd = [sys.executable, "-c", "from gpudvfs.cli.app import cli; cli()", "govern", "run", "--device", "sim",
           "--duration", "10", "--sim-phase-s", "5", "--workdir", str(tmp_path / "wd")]
    env = {k: v for k, v in os.environ.items() if k not in ("TTY_COMPATIBLE", "FORCE_COLOR")}
    for args in ([], ["--json"]):
        main, side = pty.openpty()
        with os.fdopen(main, "rb", buffering=0) as terminal:
            r = subprocess.run(cmd + args, stdout=subprocess.PIPE, stderr=side, env=env, timeout=300, check=False)
            os.close(side)
            err = b""
            try:
                while chunk := terminal.read(4096):
                    err += chunk
            except OSError:  # EIO: the pseudo-terminal's other side is closed and drained
                pass
        out = r.stdout.decode()
        assert r.returncode == 0, (out, err)
        if args:
            assert json.loads(out)["intervals"] == 10
            assert b"10/10" not in err  # --json: no bar at all
        else:
            assert "governor daemon" in out and "10/10" not in out and "ETA" not in out
            assert b"10/10" in err and b"ETA" in err
