"""Screens shown over the chat."""

from specllama.tui.screens.help import HelpScreen

__all__ = ["HelpScreen"]
