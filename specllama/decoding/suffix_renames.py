"""What a text renames in what it copies: the suffix drafter's copies follow the text's renames.

An edit that renames (a variable, a field, a function) copies its source but for the name, at every
occurrence. A plain copy breaks at each one: the draft says the old name, the target writes the new.
Then the text's end ("... buffer +=") occurs nowhere in the source, whose line says "tmp +=", so the
copy resumes only once a few tokens after the name have matched again. Traced on the 2-core machine
(bench/prompts_unseen2.jsonl's edit-rename, scripts/measure/trace_drafts.py): five drafts of 7-15
tokens broke at "tmp", one accepted nothing.

A break that the text's next tokens show to be a substitution is learnt as a rule: the copy said
`old` (1 to MAX_OLD tokens) where the text wrote `new` (1 to MAX_NEW tokens), and right after them
the text went on as the copy did for RESYNC tokens. With rules, the drafter looks the text's end up
twice, as written and with each new name read back as its old one (`as_source`), and writes the new
names into what the source continues with (`as_text`). A rename replaces every occurrence: once the text
itself writes the old name again after the break that taught it, the rule goes, as it does when drafts
find it wrong as often as right, and the text never learns that pair again. Why both: a text that
repeats itself with a surprise now and then (tests/unit/test_closed_loop.py's quoting texts) breaks its
copies with the same pair again and again, and followed as renames those drafts lost 2.8 % where plain
copying lost under 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

MAX_OLD = 3  # tokens of a name the copy had
MAX_NEW = 4  # tokens of the name the text wrote instead
RESYNC = 3  # tokens after both that must agree before a break is read as a rename
WATCH = MAX_NEW + RESYNC  # text tokens after a break within which it must be read, or never
MAX_RULES = 16  # renames one text keeps (an edit renames a few names; a rewrite is no rename)
MAX_PENDING = 8  # breaks awaiting the text's next tokens
SEEN_BEFORE_USE = 2  # breaks a rename must explain before copies follow it (see below)


@dataclass
class _Break:
    at: int  # where in the text the copy broke
    copy: tuple[int, ...]  # what the copy said from there on
    read: int = 0  # new names up to this many tokens long were tried against the text already


@dataclass
class _Rule:
    new: tuple[int, ...]
    since: int  # where in the text the first break it explains was: the text's old name is no rename after it
    seen: int = 1  # breaks it explained
    right: int = 1  # the breaks it was read from, and its tokens in drafts judged right since
    wrong: int = 0

    @property
    def used(self) -> bool:
        return self.seen >= SEEN_BEFORE_USE


@dataclass
class Renames:
    """One text's renames, learnt from where its copies broke."""
    rules: dict[tuple[int, ...], _Rule] = field(default_factory=dict)  # old -> its rule
    pending: list[_Break] = field(default_factory=list)
    banned: set[tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=set)  # (old, new) found no rename
    scanned: int = 0  # the text is searched for the rules' old names up to here

    def follow(self, text: Sequence[int]) -> bool:
        """Catch up with the text: read the watched breaks it now reaches past, and drop each rule
        whose old name the text wrote itself since its first break. True when a rule came into use."""
        if not self.rules and not self.pending:  # most steps of most texts
            self.scanned = len(text)
            return False
        learnt = self.learn(text) if self.pending else False
        start = max(0, self.scanned - MAX_OLD + 1)
        for old, rule in list(self.rules.items()):
            lo = max(start, rule.since + len(rule.new))
            if lo < len(text) and _occurs(old, text[lo:]):
                self._drop(old)
        self.scanned = len(text)
        return learnt

    def broke(self, at: int, copy: Sequence[int]) -> None:
        """A copy's token at text position `at` was wrong; `copy`: its tokens from that one on."""
        if len(copy) <= RESYNC or any(b.at == at for b in self.pending):
            return  # too short to show a resync, or that break is already watched (proposals overlap)
        self.pending.append(_Break(at, tuple(copy)))
        del self.pending[:max(0, len(self.pending) - MAX_PENDING)]

    def learn(self, text: Sequence[int]) -> bool:
        """Read the watched breaks that the text now reaches past; True when a rule was learnt."""
        learnt, waiting = False, []
        for b in self.pending:
            ahead = len(text) - b.at
            rename = None
            if ahead - RESYNC > b.read:  # a longer new name can be tried now (asked every step: tried once)
                rename = _rename(b.copy, tuple(text[b.at:b.at + WATCH]), b.read + 1)
                b.read = ahead - RESYNC
            if rename is not None:
                old, new = rename
                rule = self.rules.get(old)
                if rule is not None and rule.new == new:
                    rule.seen += 1
                    learnt = learnt or rule.seen == SEEN_BEFORE_USE
                elif len(self.rules) < MAX_RULES and (old, new) not in self.banned:
                    self.rules[old] = _Rule(new, since=b.at)
            elif ahead < WATCH:
                waiting.append(b)
        self.pending = waiting
        return learnt

    def judged(self, old: tuple[int, ...], right: bool) -> None:
        """A draft's token written by the rule for `old` was judged."""
        rule = self.rules.get(old)
        if rule is None:
            return
        if right:
            rule.right += 1
        else:
            rule.wrong += 1
            if rule.wrong >= rule.right:
                self._drop(old)

    def _drop(self, old: tuple[int, ...]) -> None:
        rule = self.rules.pop(old)
        self.banned.add((old, rule.new))

    def as_source(self, tail: Sequence[int]) -> list[int]:
        """The text's end with each new name read back as the old one it replaced."""
        back = {rule.new: old for old, rule in self.rules.items() if rule.used}
        return _substitute(tail, back)[0]

    def as_text(self, copy: Sequence[int]) -> tuple[list[int], list[int], list[tuple[int, ...] | None]]:
        """What the source continues with, the new names written in: (tokens, for each the index
        of the copy's token it stands for, for each the old name whose rule wrote it or None)."""
        return _substitute(copy, {old: rule.new for old, rule in self.rules.items() if rule.used})

    @property
    def any_used(self) -> bool:
        return any(rule.used for rule in self.rules.values())


def _rename(copy: Sequence[int], text: Sequence[int], shortest: int = 1) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(old, new) when the text is the copy with its first len(old) tokens written as `new` (at least
    `shortest` tokens long) and the next RESYNC alike, the shortest new name first, then the shortest
    old; None when the text does not show one (yet)."""
    copy, text = tuple(copy), tuple(text)
    for m in range(max(1, shortest), MAX_NEW + 1):
        if len(text) < m + RESYNC:
            break
        resumed = text[m:m + RESYNC]
        for k in range(1, MAX_OLD + 1):
            if copy[k:k + RESYNC] == resumed and copy[:k] != text[:m]:
                return copy[:k], text[:m]
    return None


def _occurs(name: tuple[int, ...], tokens: Sequence[int]) -> bool:
    if len(name) == 1:
        return name[0] in tokens
    first = name[0]
    return any(tokens[i] == first and tuple(tokens[i:i + len(name)]) == name for i in range(len(tokens) - len(name) + 1))


def _substitute(tokens: Sequence[int], rules: dict[tuple[int, ...], tuple[int, ...]]):
    """`tokens` with every occurrence of a rule's key replaced by its value, left to right, the
    longest key first; with, per output token, the input index it comes from and the key that
    wrote it (None: copied as it was)."""
    out, origin, by = [], [], []
    if not rules or {key[0] for key in rules}.isdisjoint(tokens):  # the usual case, at C speed
        return list(tokens), list(range(len(tokens))), [None] * len(tokens)
    lengths = sorted({len(k) for k in rules}, reverse=True)
    i, n = 0, len(tokens)
    while i < n:
        for size in lengths:
            key = tuple(tokens[i:i + size])
            if len(key) == size and key in rules:
                value = rules[key]
                out += value
                origin += [i] * len(value)
                by += [key] * len(value)
                i += size
                break
        else:
            out.append(tokens[i])
            origin.append(i)
            by.append(None)
            i += 1
    return out, origin, by
