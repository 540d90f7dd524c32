"""The chat's keys. Every action is on a key that terminals pass through: a ctrl key for the ones
used while typing, a plain key for the ones used between answers (they act while a message is
selected, i.e. outside the input box: tab selects the last message), and each of them is in the
command palette (ctrl+p). The F-keys of earlier versions stay as aliases: desktops and terminals
take several first (F1 help, F10 menu, F11 full screen) and Mac laptops need fn for all of them.

Ctrl keys left alone on purpose: ctrl+c (Textual: copy in the input, never quit), ctrl+z (undo in
the input; suspend elsewhere), ctrl+h / ctrl+i / ctrl+m / ctrl+[ (terminals send backspace, tab,
enter and escape for them), ctrl+a / ctrl+k / ctrl+u / ctrl+w / ctrl+d (the input's line editing).
ctrl+q quits: the terminal's XON/XOFF flow control is off while Textual runs (it clears IXON).
"""

from __future__ import annotations

from textual.binding import Binding

# In the order the footer shows them (what does not fit the terminal's width is cut from the right).
CHAT_KEYS = [
    Binding("ctrl+g,f1", "help", "help", key_display="^g", tooltip="this screen"),
    Binding("escape", "stop", "stop", tooltip="stop the answer; what it wrote so far stays"),
    Binding("ctrl+n", "new_conversation", "new", tooltip="new conversation (models stay loaded)"),
    Binding("ctrl+r", "regenerate", "regenerate", tooltip="a new answer in place of the last one"),
    Binding("ctrl+e", "edit_last", "edit", tooltip="the last question back in the input to edit and resend"),
    Binding("tab", "select_messages", "select",
            tooltip="select a message: ↑ ↓, enter / y copies it, esc returns"),
    Binding("ctrl+y", "copy_answer", "copy", tooltip="copy the last answer to the clipboard"),
    Binding("ctrl+b", "copy_code", "copy code", show=False, tooltip="copy the last code block of the last answer"),
    Binding("ctrl+l,f10", "history", "history", key_display="^l", tooltip="saved conversations: reopen, search, export"),
    Binding("m,f12", "models", "models", show=False, tooltip="pick models; they load while these answer"),
    Binding("ctrl+t,f11", "settings", "settings", key_display="^t", tooltip="settings: prompt, sampling, K; save defaults"),
    Binding("ctrl+o", "toggle_origins", "view", tooltip="answers: rendered Markdown / coloured by origin"),
    Binding("h", "toggle_thinking", "thinking", show=False,
            tooltip="thinking: folded / shown (dimmed)"),
    Binding("s,f9", "toggle_panel", "panel", show=False, tooltip="side panel on / off (off below 80 columns)"),
    Binding("d,f2", "next_drafter", "drafter", show=False, tooltip="drafter: auto → suffix → model → none"),
    Binding("k,f3", "step_k(-1)", "K −", show=False, tooltip="K − 1: fewer drafts per step (below 1: auto)"),
    Binding("K,f4", "step_k(1)", "K +", show=False, tooltip="K + 1: more drafts per step"),
    Binding("t,f5", "step_temperature(-1)", "temp −", show=False, tooltip="temperature − 0.1 (0 = greedy)"),
    Binding("T,f6", "step_temperature(1)", "temp +", show=False, tooltip="temperature + 0.1"),
    Binding("p,f7", "step_p_min(-1)", "p_min −", show=False, tooltip="p_min − 0.05 (0 = always draft K)"),
    Binding("P,f8", "step_p_min(1)", "p_min +", show=False, tooltip="p_min + 0.05: stop drafts less sure than this"),
    Binding("ctrl+q", "quit", "quit", show=False, priority=True, tooltip="quit"),
]

# The input box's own key in the footer, after the binding of the action named.
FOOTER_HINTS = {"edit_last": ("↑", "recall")}
