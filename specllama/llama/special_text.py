"""Where a text holds the text of a special token (`<|im_end|>`, `<tool_call>`), found in one pass.

llama.cpp splits a text at special tokens before tokenizing (tokenizer_st_partition): for each
special token, longest first, it searches every fragment found so far, and each search runs to the
end of the *whole* text. So a text holding many special tokens costs the square of its size: 220 KB
of `<|im_end|>x` took 1.2 s, 440 KB nearly 5 s, and an 8 MB chat body never finished. This module
finds the same occurrences with one regular expression (a trie of the texts, so a position costs a
few character tests however many special tokens the vocabulary has), which lets GGUFModel.tokenize

- tell whether a user's message holds control text (a plain search, not two tokenizations),
- count the special tokens a text must become, and refuse it when they alone overflow the context,
- cut a text before its special tokens and hand llama.cpp the pieces, whose work is then linear.

The pieces tokenize to exactly what the whole text does when the split points are boundaries
of llama.cpp's own partition. They are, for vocabularies whose special texts never overlap (no
proper suffix of one is a proper prefix of another; true of `<|...|>` and `<tag>` style vocabularies):
then the leftmost-longest occurrences found here are the fragments llama.cpp's longest-first search
finds. Where texts can overlap (`overlap_free` is False) the text is tokenized whole, as before.
"""

from __future__ import annotations

import re
from typing import Iterable

# llama.cpp's token attributes (llama.h: enum llama_token_attr)
ATTR_UNKNOWN = 1 << 0
ATTR_CONTROL = 1 << 3
ATTR_USER_DEFINED = 1 << 4
ATTR_LSTRIP = 1 << 7
C_SPACE = " \t\n\v\f\r"  # what C's isspace() strips around an LSTRIP / RSTRIP token


class TooManySpecialTokens(Exception):
    """More special tokens than the caller's budget: each is one token, so the text cannot fit."""

    def __init__(self, count: int):
        super().__init__(count)
        self.count = count


class SpecialTexts:
    """The special-token texts of one vocabulary, from its (text, attributes) pairs."""

    def __init__(self, tokens: Iterable[tuple[str, int]]):
        self.control: set[str] = set()  # parsed only with parse_special (CONTROL, UNKNOWN)
        self.user_defined: set[str] = set()  # parsed always, even with parse_special off
        self.lstrip: set[str] = set()
        for text, attr in tokens:
            if not text:
                continue
            if attr & (ATTR_CONTROL | ATTR_UNKNOWN):
                self.control.add(text)
            elif attr & ATTR_USER_DEFINED:
                self.user_defined.add(text)
            else:
                continue
            if attr & ATTR_LSTRIP:
                self.lstrip.add(text)
        self._control_re = trie_regex(self.control)
        self._parsed_re = {True: trie_regex(self.control | self.user_defined), False: trie_regex(self.user_defined)}
        self.overlap_free = not overlapping(self.control | self.user_defined)

    def holds_control(self, text: str) -> bool:
        """Whether `text` holds a control token's text (what parse_special would turn into one)."""
        return self._control_re is not None and self._control_re.search(text) is not None

    def starts(self, text: str, parse_special: bool, most: int | None = None) -> list[int]:
        """Where each special token's text in `text` starts (user-defined ones only, unless
        parse_special), moved left over the whitespace an LSTRIP token strips, so that it goes
        with the token as llama.cpp drops it. More than `most` raise TooManySpecialTokens."""
        pattern = self._parsed_re[parse_special]
        if pattern is None:
            return []
        starts, floor = [], 0
        for match in pattern.finditer(text):
            if most is not None and len(starts) >= most:
                raise TooManySpecialTokens(len(starts) + 1)
            at = match.start()
            if match.group() in self.lstrip:
                while at > floor and text[at - 1] in C_SPACE:
                    at -= 1
            starts.append(at)
            floor = match.end()
        return starts


def split_at(text: str, starts: list[int]) -> list[str]:
    """`text` cut at each of `starts` (ascending); no empty pieces."""
    bounds = [0] + [at for at in starts if at > 0] + [len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def trie_regex(texts: Iterable[str]) -> re.Pattern | None:
    """One pattern matching any of `texts`, the longest at a position first; shared prefixes are
    tested once (a trie), so thousands of texts cost little more per position than a few."""
    trie: dict = {}
    for text in texts:
        node = trie
        for ch in text:
            node = node.setdefault(ch, {})
        node[""] = True  # a text ends here
    return re.compile(_pattern(trie)) if trie else None


def _pattern(node: dict) -> str:
    out = ""
    while True:  # a chain of single children is literal text: no recursion for it
        ends = "" in node
        children = [(ch, child) for ch, child in node.items() if ch != ""]
        if len(children) == 1 and not ends:
            ch, node = children[0]
            out += re.escape(ch)
            continue
        if not children:
            return out
        branches = "|".join(re.escape(ch) + _pattern(child) for ch, child in sorted(children))
        return out + "(?:" + branches + ")" + ("?" if ends else "")


def overlapping(texts: set[str]) -> bool:
    """Whether a proper suffix of one text is a proper prefix of one (the same or another): then
    two occurrences can overlap and which one a tokenizer takes depends on its search order."""
    prefixes = {text[:i] for text in texts for i in range(1, len(text))}
    return any(text[i:] in prefixes for text in texts for i in range(1, len(text)))
