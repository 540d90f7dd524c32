"""The Textual chat app (`specllama chat`)."""

from specllama.tui.app import ChatApp
from specllama.tui.settings import ChatSettings

__all__ = ["ChatApp", "ChatSettings"]
