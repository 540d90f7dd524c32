"""Copying text: a real clipboard tool when one is on PATH, else the terminal's OSC 52.

OSC 52 asks the terminal to set the clipboard; many terminals (and most over ssh/tmux without
configuration) ignore it silently, so "copied" would be a claim we cannot check. The message
says which way the text went.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Callable

OSC52 = "sent to the terminal's clipboard (OSC 52)"


def clipboard_command() -> list[str] | None:
    """The first clipboard tool that fits this session, or None."""
    candidates: list[list[str]] = []
    if sys.platform == "darwin":
        candidates.append(["pbcopy"])
    if os.environ.get("WAYLAND_DISPLAY"):
        candidates.append(["wl-copy"])
    if os.environ.get("DISPLAY"):
        candidates += [["xclip", "-selection", "clipboard"], ["xsel", "--clipboard", "--input"]]
    for command in candidates:
        if shutil.which(command[0]):
            return command
    return None


def copy_text(text: str, osc52: Callable[[str], None]) -> str:
    """Copies `text`; returns how ("copied with xclip", or the OSC 52 sentence).
    `osc52` is the app's copy_to_clipboard: always called, so the app's own clipboard (paste
    inside the app) has the text whichever way it reached the system."""
    osc52(text)
    command = clipboard_command()
    if command is not None:
        try:
            subprocess.run(command, input=text.encode(), check=True, timeout=5,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return f"copied with {command[0]}"
        except (OSError, subprocess.SubprocessError):
            pass  # fall back to what the terminal may do
    return OSC52
