"""Screens shown over the chat."""

from specllama.tui.screens.help import HelpScreen
from specllama.tui.screens.history import HistoryScreen
from specllama.tui.screens.models import ModelPickerScreen
from specllama.tui.screens.settings import SettingsScreen

__all__ = ["HelpScreen", "HistoryScreen", "ModelPickerScreen", "SettingsScreen"]
