"""The screen as plain text: what `export_screenshot()` draws, without the SVG.

Used by the snapshot tests (a text file reviews well in a diff, an SVG does not) and by the
overhead script. It renders the compositor's full update exactly as `App.export_screenshot` does.
"""

from __future__ import annotations

import io

from rich.console import Console
from textual.app import App


def screen_text(app: App) -> str:
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    lines = console.export_text(styles=False).splitlines()
    return "\n".join(line.rstrip() for line in lines) + "\n"
