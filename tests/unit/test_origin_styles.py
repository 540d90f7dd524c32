"""Every source of tokens looks different in the chat's origin view: by colour on the dark and the
light theme (the draft model's tokens and the target's were one colour, #ffa62b, in textual-dark:
its $text-accent is its $text-warning), and by a mark without colour (NO_COLOR). Checked on the
styles as the app resolves them, on a streamed answer (Pilot), and in a real terminal (tmux)."""

from __future__ import annotations

import itertools

import pytest
from textual.app import App
from textual.color import Color, rgb_to_lab

from specllama.tui.screens import HelpScreen
from specllama.tui.streaming import token_origin
from specllama.tui.widgets import ChatMessage
from specllama.tui.widgets.chat_message import ORIGIN_LABELS, ORIGIN_STYLES
from tests.support.chat_app import TALL, FakeRuntime, chat_app, run, send

SHOWN = ("suffix", "model", "mtp", "grammar", "target", "bonus")  # what a user can tell apart
DRAFT_SOURCES = ("suffix", "model", "mtp", "grammar")
# CIE76 distance: about 2.3 is the least a trained eye sees; 20 is plainly another colour.
PLAINLY_DIFFERENT = 20.0
NOT_THE_SAME = 3.0
DEFAULT_THEMES = ("textual-dark", "textual-light")


def colour_of(style: str, variables: dict[str, str]) -> str:
    name = next(word for word in style.split() if word.startswith("$"))
    return variables[name[1:]]


def marks(style: str) -> frozenset[str]:
    return frozenset(word for word in style.split() if not word.startswith("$"))


def delta_e(a: str, b: str) -> float:
    la, lb = rgb_to_lab(Color.parse(a)), rgb_to_lab(Color.parse(b))
    return ((la.L - lb.L) ** 2 + (la.a - lb.a) ** 2 + (la.b - lb.b) ** 2) ** 0.5


@pytest.fixture(scope="module")
def theme_variables() -> dict[str, dict[str, str]]:
    """Every built-in theme's CSS variables, as a running app resolves them."""
    import asyncio

    found: dict[str, dict[str, str]] = {}

    async def scenario():
        app = App()
        async with app.run_test() as pilot:
            for name in app.available_themes:
                if name.startswith("ansi"):  # the terminal's own palette: not known here
                    continue
                app.theme = name
                await pilot.pause()
                found[name] = app.get_css_variables()
    asyncio.run(scenario())
    return found


@pytest.mark.parametrize("theme", DEFAULT_THEMES)
def test_every_source_has_a_plainly_different_colour_on_the_default_themes(theme_variables, theme):
    colours = {o: colour_of(ORIGIN_STYLES[o], theme_variables[theme]) for o in SHOWN}
    for a, b in itertools.combinations(SHOWN, 2):
        assert delta_e(colours[a], colours[b]) >= PLAINLY_DIFFERENT, (theme, a, b, colours[a], colours[b])


def test_no_two_sources_share_a_colour_on_any_built_in_theme(theme_variables):
    assert len(theme_variables) >= 10
    for theme, variables in theme_variables.items():
        colours = {o: colour_of(ORIGIN_STYLES[o], variables) for o in SHOWN}
        for a, b in itertools.combinations(SHOWN, 2):
            assert delta_e(colours[a], colours[b]) > NOT_THE_SAME, (theme, a, b, colours[a], colours[b])


def test_without_colour_each_draft_source_keeps_a_mark_of_its_own():
    # NO_COLOR: Textual paints in greys, text styles stay. The target's tokens are the unmarked ones.
    seen = [marks(ORIGIN_STYLES[o]) for o in DRAFT_SOURCES]
    assert all(seen) and len(set(seen)) == len(seen)
    assert not marks(ORIGIN_STYLES["target"]) and not marks(ORIGIN_STYLES["bonus"])
    assert {ORIGIN_LABELS[o][1] for o in DRAFT_SOURCES} == {"underlined", "bold", "bold underlined", "italic"}


def test_a_grammar_forced_token_is_the_grammars_whatever_its_origin_label():
    assert token_origin("draft", "grammar") == "grammar"
    assert token_origin("target", "grammar") == "grammar"
    assert token_origin("draft", "suffix") == "suffix" and token_origin("bonus", "") == "bonus"
    assert token_origin("draft", "mtp") == "mtp"  # the MTP head's drafts are its own colour, not "draft"


SOURCES_SCRIPT = [
    [("copied", "draft", "suffix"), (" guessed", "draft", "model"), (" headed", "draft", "mtp"), (" own", "target")],
    [("{", "draft", "grammar"), (" extra", "bonus")],
]


def test_a_streamed_answer_styles_each_source_and_the_help_screen_shows_the_legend():
    async def scenario():
        app = chat_app(FakeRuntime(SOURCES_SCRIPT))
        async with app.run_test(size=TALL) as pilot:
            await pilot.press("ctrl+o")  # the origin view
            await send(pilot, "hi")
            reply = app.query(ChatMessage).last()
            styled = {(reply.text[s.start:s.end], str(s.style)) for s in reply.content.spans}
            assert {("copied", ORIGIN_STYLES["suffix"]), (" guessed", ORIGIN_STYLES["model"]),
                    (" headed", ORIGIN_STYLES["mtp"]),
                    (" own", ORIGIN_STYLES["target"]), ("{", ORIGIN_STYLES["grammar"]),
                    (" extra", ORIGIN_STYLES["bonus"])} <= styled
            await pilot.press("ctrl+g")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            legend = HelpScreen._legend()
            for origin, (label, mark) in ORIGIN_LABELS.items():
                assert (label, ORIGIN_STYLES[origin]) in {(legend.plain[s.start:s.end], str(s.style)) for s in legend.spans}
                assert f"{label} ({mark})" in legend.plain
    run(scenario)
