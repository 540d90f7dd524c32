"""The chat's widgets; each keeps its CSS beside it (DEFAULT_CSS)."""

from specllama.tui.widgets.bars import KeyBar, TitleBar
from specllama.tui.widgets.chat_message import ORIGIN_LABELS, ORIGIN_STYLES, ChatMessage
from specllama.tui.widgets.conversation_view import ConversationView
from specllama.tui.widgets.loading_panel import LoadingPanel
from specllama.tui.widgets.prompt_input import PromptInput
from specllama.tui.widgets.stats_panel import StatsPanel

__all__ = ["ChatMessage", "ConversationView", "KeyBar", "LoadingPanel", "PromptInput", "StatsPanel", "TitleBar",
           "ORIGIN_LABELS", "ORIGIN_STYLES"]
