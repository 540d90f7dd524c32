"""Screens shown over the chat."""

from specllama.tui.screens.help import HelpScreen
from specllama.tui.screens.history import HistoryScreen

__all__ = ["HelpScreen", "HistoryScreen"]
