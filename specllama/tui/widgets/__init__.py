"""The chat's widgets; each keeps its CSS beside it (DEFAULT_CSS)."""

from .bars import KeyBar, TitleBar
from .chat_message import ORIGIN_LABELS, ORIGIN_STYLES, ChatMessage
from .loading_panel import LoadingPanel
from .stats_panel import StatsPanel

__all__ = ["ChatMessage", "KeyBar", "LoadingPanel", "StatsPanel", "TitleBar", "ORIGIN_LABELS", "ORIGIN_STYLES"]
