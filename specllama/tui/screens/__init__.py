"""Screens shown over the chat."""

from .help import HelpScreen

__all__ = ["HelpScreen"]
