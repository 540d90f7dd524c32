"""How the suffix drafter's odds are grouped: each draft token is calibrated (acceptance.Calibrator,
shared by all texts) and recorded per text (acceptance.TextRecord) in its draft group, the class of
the match's source and length times the token's position in the draft, and each group starts from
a cold floor before any draft was judged. Kept apart from suffix_drafter.py, which finds the matches
and follows its proposals, because the reports (`--stats`, `costs`) name the groups too."""

from __future__ import annotations

from specllama.decoding.acceptance import Calibrator

MATCH_GROUPS = 4  # calibration classes by match length: 1-2, 3-7, 8-15, 16+
MATCH_STARTS = (1, 3, 8, 16)  # each class's shortest match
MATCH_LABELS = ("1-2", "3-7", "8-15", "16+")
# ... and by the token's position in the draft: 0, 1, 2-3, 4-7, 8-15, 16-31, 32+. Why: what is
# estimated is P(token j accepted | the tokens before it accepted), and in a copy that falls with j
# far less than one odds per match class says. Judged on the agentic replay's texts (every proposal
# followed to its end, bench/measured/vm-20261126-greedy-answers): a draft's first token was right
# 0.86 of the time, each later one 0.97 given those before; one odds per class priced a 16-row
# draft after a 3-7 token match at 0.77x of plain where such drafts ran at 1.06-1.35x, so after
# every edit -k auto waited for the match to grow. Replayed with the costs known: auto 1.299x ->
# 1.354x of plain on the agentic texts, 1.321x -> 1.346x on held-out edit sessions, prose within
# +-0.5 %; from an empty cost cache even (1.292x -> 1.294x); finer match classes or fewer position
# classes did worse (bench/measured/vm-20261126-policy-replay-positions.md).
POSITION_EDGES = (0, 1, 3, 7, 15, 31)
POSITION_CLASSES = len(POSITION_EDGES) + 1
POSITION_LABELS = ("1st", "2nd", "3-4th", "5-8th", "9-16th", "17-32nd", "33rd+")
# ... and by where the match lies: in what the text was given (its prompt, the session's earlier
# texts, the corpus) or in its own output so far. Why: the first is a copy of a source (an edited
# file returned, a summary quoting its input), the second the text repeating its own structure (a
# YAML list's keys, a table's rows), which goes on differently far more often. Judged on every set
# of recorded answers, every proposal followed, sent or not
# (bench/measured/xeon-20261126-policy-replay-source.md): a 3-7 token match's first token was right
# 0.85 of the time in what the text was given (n=236) and 0.34 in its own output (n=290); 1-2 tokens
# 0.68 against 0.43. One calibration for both priced a copy's first tokens at their mix. Replayed on
# three machines' costs, auto gained on 15 of 18 sets (copies most: 1.825x -> 1.936x of plain on the
# Xeon's) and lost 0.4-1.3 % on three.
SOURCES = 2  # 0: an earlier text (the prompt, the history, the corpus); 1: the text's own output
SOURCE_LABELS = ("", " in its own output")
DRAFT_GROUPS = SOURCES * MATCH_GROUPS * POSITION_CLASSES
# What a match's length says before this run has judged any draft: the calibrator's prior per
# match-length class is at least this. A lone earlier occurrence (raw 0.5) was otherwise taken at
# its word, 0.55, whatever its length, and at 0.55 no draft promises planner.MIN_GAIN: a cold
# drafter never drafted text seen once, e.g. an agent's re-sent file (serve's agentic replay:
# auto 0.96x where a fixed K = 4 drafted 553 of 827 steps and ran at 1.10x). Measured with fixed
# K = 8 on 23 prompts none of bench/prompts.jsonl (bench/measured/vm-20261123-suffix-calibration.md),
# lone occurrences were accepted 0.82 (3-7 tokens matched, n=100), 0.95 (8-15, n=74) and 0.95
# (16+, n=110); 1-2 tokens 0.69, but mostly from near-identical prompts, so that class keeps its
# midpoint. The floors sit below what was observed: four judged drafts move a bin halfway to what
# this run sees (Calibrator.prior_weight).
COLD_FLOORS = (0.0, 0.75, 0.85, 0.9)
# The same for a match in the text's own output: a short one is a guess (see SOURCES), a long one
# a loop the text is in, which the position classes price as they judge it.
OWN_COLD_FLOORS = (0.0, 0.0, 0.85, 0.9)


def match_group(length: int) -> int:
    return 0 if length <= 2 else 1 if length <= 7 else 2 if length <= 15 else 3


# Each position's class, read for every token of every proposal: looked up, not searched for.
_POSITION_CLASS = tuple(next((i for i, edge in enumerate(POSITION_EDGES) if j <= edge), len(POSITION_EDGES))
                        for j in range(POSITION_EDGES[-1] + 2))


def position_class(j: int) -> int:
    return _POSITION_CLASS[min(j, len(_POSITION_CLASS) - 1)]


def _base(match_length: int, own: bool) -> int:
    return (own * MATCH_GROUPS + match_group(match_length)) * POSITION_CLASSES


def draft_group(match_length: int, j: int, own: bool = False) -> int:
    """The calibration group of a draft's token j: its match's source and length class, and its
    position. `own`: the match lies in the text's own output."""
    return _base(match_length, own) + position_class(j)


def draft_groups(match_length: int, n: int, own: bool = False) -> list[int]:
    base = _base(match_length, own)
    return [base + position_class(j) for j in range(n)]


def group_label(group: int) -> str:
    m, j = divmod(group, POSITION_CLASSES)
    own, m = divmod(min(m, SOURCES * MATCH_GROUPS - 1), MATCH_GROUPS)
    return f"match {MATCH_LABELS[m]}{SOURCE_LABELS[own]}, {POSITION_LABELS[j]} token"


def draft_floors() -> tuple[float, ...]:
    """The calibrator's floor per draft group: the cold floor of the match class the match has
    reached at that position if the tokens before were right (a 2-token match's 5th token is a
    7-token match's next one)."""
    first = (0,) + tuple(edge + 1 for edge in POSITION_EDGES)
    return tuple(floors[match_group(start + first[j])] for floors in (COLD_FLOORS, OWN_COLD_FLOORS)
                 for start in MATCH_STARTS for j in range(POSITION_CLASSES))


def suffix_calibrator(**kwargs) -> Calibrator:
    """The suffix drafter's calibrator: one per draft group, with the cold floors."""
    return Calibrator(groups=DRAFT_GROUPS, floors=draft_floors(), **kwargs)
