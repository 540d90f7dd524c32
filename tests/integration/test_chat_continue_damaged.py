"""`chat --continue` over a damaged history file says once, on one line, that no conversation
can be reopened and how to chat anyway, and exits 1 (issue 33, item 9: it said "chatting without
history" and then exited 1). A real terminal (a pty) on stdin, since the chat refuses without one."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from tests.support.live_serve import REPO


@pytest.mark.parametrize("flag", [["--continue"], ["--conversation", "3"]])
def test_continue_over_a_damaged_history_is_one_clear_line(tiny_models, tmp_path, flag):
    (tmp_path / "chats.sqlite3").write_bytes(b"this is not a database" * 100)
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "specllama", "chat", *flag, "--target", str(tiny_models["a"])],
                              cwd=REPO, stdin=terminal, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(REPO), "SPECLLAMA_DATA": str(tmp_path)})
    finally:
        os.close(terminal)
        os.close(controller)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "chatting without history" not in lines[0]
    assert flag[0] in lines[0] and "not a database" in lines[0] and "without it" in lines[0]
