"""The Textual chat app (`specllama chat`)."""

from .app import ChatApp
from .settings import ChatSettings

__all__ = ["ChatApp", "ChatSettings"]
