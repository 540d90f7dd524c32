"""The limits and types of what a request may set for drafting and sampling, each checked in one
place with one message (by the settings types, GenerationConfig and SamplingParams), whichever
front-end it was typed in (the command line, the chat's settings and chat.toml, bench
configurations, every API's body): they differ only in how they show the error (argparse's line,
a one-line SpecllamaError, a 400 in the API's own shape).
"""

from __future__ import annotations

import math

from specllama.errors import SpecllamaError

K_MAX = 16  # the longest draft a user may ask for (a batch of 17 is the largest cost-curve point)
AUTO = "auto"


class SettingError(SpecllamaError):
    """A setting out of its range or of the wrong type; `name` is the setting (an API's `param`)."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name


def draft_length(value: object) -> int | str:
    """K as given: "auto", or a whole number of draft tokens from 0 (no drafts) to K_MAX."""
    if value == AUTO or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= K_MAX):
        return value
    raise SettingError("k", f"k must be 'auto' or a whole number from 0 to {K_MAX}, got {value!r}")


def number(name: str, value: object) -> float:
    """A finite number (not a bool: JSON's true is no temperature), or SettingError naming the setting."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return value
    raise SettingError(name, f"{name} must be a number, got {value!r}")


def whole(name: str, value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise SettingError(name, f"{name} must be a whole number, got {value!r}")
