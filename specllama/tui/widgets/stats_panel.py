"""The side panel: how fast, how much of the draft is accepted, what is set, what is loaded."""

from __future__ import annotations

from collections import deque

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Digits, Sparkline, Static

from specllama.decoding.engine import Summary
from specllama.tui.settings import ChatSettings
from specllama.tui.streaming import LiveStats
from specllama.tui.widgets.chat_message import ORIGIN_LABELS, ORIGIN_STYLES

SPARK_POINTS = 40  # steps shown: about the panel's width
LABEL_WIDTH, VALUE_WIDTH = 12, 22  # what fits beside a label in the panel


def _rows(*rows: tuple[str, str], heading: str = "") -> Content:
    """Aligned "label  value" lines under an optional heading; values are plain text, so model
    names need no escaping. A value too long to sit beside its label goes on its own indented
    line instead of wrapping under the labels."""
    parts: list[tuple[str, str] | str] = [(heading, "bold $text-accent")] if heading else []
    for i, (label, value) in enumerate(rows):
        parts.append((("\n" if i or heading else "") + f"{label:<{LABEL_WIDTH}}", "$text-muted"))
        parts.append(value if len(value) <= VALUE_WIDTH else "\n  " + value)
    return Content.assemble(*parts)


class StatsPanel(VerticalScroll, can_focus=False):
    DEFAULT_CSS = """
    StatsPanel {
        width: 38;
        max-width: 50%;  /* shown with F9 in a narrow terminal: the chat keeps half */
        height: 1fr;
        padding: 0 1;
        border-left: vkey $foreground 20%;
        scrollbar-size-vertical: 1;
    }
    StatsPanel > Static { height: auto; }
    StatsPanel .section { border-top: solid $foreground 20%; }
    StatsPanel .heading { color: $text-accent; text-style: bold; }
    StatsPanel Digits { width: auto; color: $text-success; }
    StatsPanel Sparkline { height: 2; margin: 0 0 1 0; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._rates: deque[float] = deque(maxlen=SPARK_POINTS)
        self._model_names: tuple[str, str | None, int] = ("loading…", None, 0)
        self._context_used = (0, 0)  # (tokens in the target's cache, its size)
        self._lines: dict[str, int] = {}  # selector -> line count of what it shows

    def compose(self) -> ComposeResult:
        # Few widgets on purpose: every layout while an answer streams repaints each of them.
        yield Static("tokens/s", classes="heading")
        yield Digits("0.0", id="speed")
        yield Sparkline([], id="rates", summary_function=max)
        yield Static(id="answer")
        yield Static(id="settings", classes="section")
        yield Static(id="models", classes="section")
        yield Static(id="legend", classes="section")

    def on_mount(self) -> None:
        self.show_answer(LiveStats(), finish="")
        self._refresh_models()
        self.show_legend(False)

    def reset(self) -> None:
        self._rates.clear()
        self.query_one("#rates", Sparkline).data = []
        self.query_one("#speed", Digits).update("0.0")
        self.show_answer(LiveStats(), finish="")
        used, total = self._context_used
        self.show_context(0, total)

    def add_rates(self, step_rates: tuple[float, ...]) -> None:
        """Every step's speed joins the sparkline, shown at the next repaint."""
        self._rates.extend(step_rates)

    def show_live(self, stats: LiveStats, context: tuple[int, int]) -> None:
        """The live numbers, painted at the app's cadence with the answer (tui/cadence.py)."""
        self.show_context(*context)
        self.query_one("#rates", Sparkline).data = list(self._rates)
        self.query_one("#speed", Digits).update(f"{stats.tokens_per_s:.1f}")
        self.show_answer(stats, finish="generating…")

    def show_summary(self, summary: Summary, why: str | None = None, headline: str | None = None) -> None:
        """At the end of an answer: the engine's own totals replace the live estimate; the headline
        (`run --stats`'s, runtime/stats.py) is the tooltip of the speed, where it does not push the
        panel's other sections down."""
        self.query_one("#speed", Digits).tooltip = headline
        self.query_one("#rates", Sparkline).data = list(self._rates)
        self.query_one("#speed", Digits).update(f"{summary.tokens_per_s:.1f}")
        stats = LiveStats(summary.tokens, summary.tokens_per_s, summary.steps, summary.drafted, summary.accepted,
                          summary.k_total)
        self.show_answer(stats, finish=summary.finish_reason, reused=summary.reused_tokens, why=why)

    def show_answer(self, s: LiveStats, finish: str, reused: int | None = None, why: str | None = None) -> None:
        acceptance = f"{s.acceptance:.1%} ({s.accepted}/{s.drafted})" if s.acceptance is not None else "–"
        rows = [("acceptance", acceptance),
                ("mean accept", f"{s.mean_accepted:.2f} tokens/step" if s.steps else "–"),
                ("mean K", f"{s.mean_k:.2f} drafts asked/step" if s.steps else "–"),
                ("tokens", f"{s.tokens}" + (f" ({finish})" if finish else ""))]
        if reused is not None:
            rows.append(("cache reuse", f"{reused} prompt tokens"))
        content = _rows(*rows)
        if why:  # e.g. mean K 0.00 with a drafter on: the cost model's reason
            content = content + Content.styled("\n" + why, "$text-warning")
        self._set("#answer", content)

    def show_settings(self, settings: ChatSettings) -> None:
        self._set("#settings", _rows(
            # The keys beside each value: a letter (with a message selected) and its F-key alias.
            ("drafter", f"{settings.drafter:<8} d F2"),
            ("K", f"{str(settings.effective_k):<8} k K F3 F4"),
            ("temperature", f"{settings.temperature:<8.1f} t T F5 F6" if settings.temperature else "greedy   t T F5 F6"),
            ("p_min", f"{settings.p_min:<8.2f} p P F7 F8"),
            heading="settings"))

    def show_models(self, target: str, draft: str | None, threads: int) -> None:
        self._model_names = (target, draft, threads)
        self._refresh_models()

    def show_context(self, used: int, total: int) -> None:
        self._context_used = (used, total)
        self._refresh_models()

    def _refresh_models(self) -> None:
        target, draft, threads = self._model_names
        used, total = self._context_used
        self._set("#models", _rows(
            ("target", target), ("draft", draft or "–"), ("threads", str(threads or "–")),
            ("context", f"{used} / {total} tokens" if total else "–"),
            heading="models"))

    def _set(self, selector: str, content: Content) -> None:
        """Updates a block of rows, laying the screen out again only if its line count changed:
        these numbers change at every step, and a repaint costs far less than a layout."""
        static = self.query_one(selector, Static)
        lines = content.plain.count("\n")
        static.update(content, layout=lines != self._lines.get(selector))
        self._lines[selector] = lines

    def show_legend(self, on: bool) -> None:
        """The sources' names in their styles (so the legend reads without colour too): the three
        draft sources on one line, the target's two kinds of token on the next."""
        parts: list[tuple[str, str] | str] = []
        for origin, (label, _) in ORIGIN_LABELS.items():
            end = "\n" if origin in ("grammar", "bonus") else "  "
            parts += [(label.split(" ")[0], ORIGIN_STYLES[origin] if on else "$text-muted"), end]
        parts.append(("colours on · ctrl+o: rendered" if on else "colours off (rendered) · ctrl+o", "$text-muted"))
        self.query_one("#legend", Static).update(Content.assemble(*parts))
