"""The grammar engine behind a request's Constraint (constraint.py): llguidance's matcher, per request.

Why llguidance (over xgrammar and outlines-core): it has no dependencies (xgrammar needs torch), it
builds its tokenizer from a llama.cpp vocabulary (llguidance.llamacpp), it rolls back consumed
tokens (a draft is tried, then undone), it says how many of a draft's tokens the grammar allows
without changing its state (`validate_tokens`), it computes the tokens the grammar forces
(`compute_ff_tokens`: free drafts), and it reads JSON schemas, Lark (with %json) and regexes.

A Guide is one request's grammar state. The engine consults it at three points of a step:
  shape(proposal, room)   after drafting: cut the draft at the first token the grammar forbids,
                          then append the tokens the grammar forces after it (source "grammar");
  mask(draft, rows)       before judging: the target's rows with every forbidden token at -inf
                          (greedy then takes the argmax among allowed tokens; sampling samples
                          from the masked, renormalised distribution);
  advance(token)          for each emitted token; `complete` once the grammar admits nothing more.
The matcher's state moves only with emitted tokens: shape and mask consume a draft tentatively and
roll it back before returning, so a rejected draft leaves no trace.

A lazy constraint (`trigger`) is inactive until the emitted text ends with the trigger; a draft
that contains the trigger is checked (and its rows masked) from the token that completes it on.
"""

from __future__ import annotations

import functools
import threading
import time
import warnings
import weakref
from collections import OrderedDict
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from specllama.decoding.constraint import Constraint, check_constraint, engine_panics, grammar_text
from specllama.decoding.draft_rows import DraftRows
from specllama.decoding.drafters import Proposal
from specllama.errors import SpecllamaError

GRAMMAR = "grammar"  # the source name of forced drafts (--stats, the chat's colours, drafted_by)
PROBE_TOKENS = 16  # a new grammar is walked this far before it is accepted (its limits show early)
PROBE_SECONDS = 2.0  # ... or for this long at most: the check is bounded in time as well as in steps
COMPILED_KEEP = 16  # compiled grammars kept, so the engine thread copies one instead of compiling it again

_tokenizers: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
# (tokenizer id, grammar) -> a fresh, probed matcher, or the GrammarFault that refused it
_compiled: "OrderedDict[tuple[int, str], Any]" = OrderedDict()
_compiled_lock = threading.Lock()


class GrammarFault(SpecllamaError):
    """A request's grammar cannot go on: it broke one of llguidance's limits (too many Earley items
    in a step, too many alternatives in a row) or refused a token. That request fails; others go on."""


def _fails_the_request(method):
    """A Guide call whose llguidance panic (constraint.engine_panics) fails this request, not the engine
    thread: the engine catches a request's Exception, and a panic is not one."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        with engine_panics("the grammar engine stopped this answer", GrammarFault):
            return method(self, *args, **kwargs)
    return guarded


def _limits():
    """llguidance's default limits, with short errors: a verbose error spells out the whole
    grammar (255 KB for one schema), which then reached logs and, through /health, other clients."""
    from llguidance import LLParserLimits  # noqa: PLC0415

    return LLParserLimits(verbose_errors=False)


def _error_line(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip() and line.strip() != "<non-verbose/>"]
    return lines[0] if lines else "unknown error"


def grammar_tokenizer(model) -> Any:
    """llguidance's tokenizer for a GGUFModel's vocabulary, built once per model (about a second
    for a 150k vocabulary: every token's bytes are read). Every end-of-generation token counts as
    the grammar's end, so a finished JSON may be followed by whichever one the model prefers."""
    tokenizer = _tokenizers.get(model)
    if tokenizer is None:
        from llguidance.llamacpp import lltokenizer_from_vocab  # noqa: PLC0415 (loads llama_cpp's module)

        with warnings.catch_warnings():  # it calls a deprecated llama.cpp name once per token
            warnings.simplefilter("ignore", DeprecationWarning)
            tokenizer = lltokenizer_from_vocab(model.vocab_pointer, eos_token=model.eog_ids or None)
        _tokenizers[model] = tokenizer
    return tokenizer


class Guide:
    """One request's grammar: see the module docstring."""

    def __init__(self, constraint: Constraint, tokenizer: Any, n_vocab: int, piece: Callable[[int], bytes],
                 drafts: bool = True):
        from llguidance import LLMatcher  # noqa: PLC0415

        self.matcher = _matcher(constraint, tokenizer, LLMatcher)
        self.n_vocab = n_vocab
        self.piece = piece
        self.drafts = drafts  # append forced tokens as drafts (not under plain decoding)
        self.trigger = constraint.trigger.encode("utf-8") if constraint.trigger else b""
        self.active = not self.trigger
        self._tail = b""  # the emitted text's last bytes, while waiting for the trigger
        self.complete = False

    # --- the engine's three calls --------------------------------------------------------------

    @_fails_the_request
    def shape(self, proposal: Proposal, room: int) -> Proposal:
        """The proposal cut at its first forbidden token, with the forced tokens after it (at
        most `room` tokens in all; none when this request does not draft)."""
        draft = list(proposal.tokens)
        start = self._activation(draft)
        if start is None:  # unconstrained through the whole draft
            return proposal
        m = self.matcher
        n = start + m.validate_tokens(draft[start:])
        proposal = proposal.keep(n)
        if not self.drafts or n >= room:
            return proposal
        consumed = 0
        for token in draft[start:n]:
            if m.is_stopped():  # complete: what follows is an end of generation, not counted (mask's note)
                break
            if not m.consume_token(token):
                m.rollback(consumed)
                raise GrammarFault(f"the grammar engine stopped this answer: {_error_line(m.get_error())}")
            consumed += 1
        forced = [] if m.is_stopped() else m.compute_ff_tokens()[:room - n]
        m.rollback(consumed)
        return _append(proposal, forced, GRAMMAR) if forced else proposal

    @_fails_the_request
    def mask(self, draft: Sequence[int], rows: np.ndarray, greedy: bool) -> np.ndarray:
        """The target's rows (row i scored after draft[:i]) with the tokens the grammar forbids
        at -inf. Greedy needs a row's mask only where its argmax is forbidden (the argmax among
        allowed tokens is then the masked row's), so an allowed argmax costs one token check."""
        start = self._activation(draft)
        if start is None:
            return rows
        m, out, consumed = self.matcher, rows, 0
        try:
            for i in range(start, len(rows)):
                if i > start:
                    # Complete (the draft's last token closed it): only an end of generation may follow, and
                    # the rows after it are never read. llguidance takes that end on a stopped matcher without
                    # counting it, so consuming it here made the rollback below undo one real token too many:
                    # a JSON answer whose draft `"C++"]}<|im_end|>` was turned away at `C` then failed on the
                    # target's valid `Java` ("the grammar engine stopped this answer").
                    if m.is_stopped():
                        break
                    if not m.consume_token(draft[i - 1]):
                        break  # a draft token the grammar forbids (shape cut it; a bug otherwise): later rows are never read
                    consumed += 1
                if greedy and m.validate_tokens([int(np.argmax(rows[i]))]) == 1:
                    continue
                if out is rows:
                    out = rows.copy()
                out[i, ~self._allowed()] = -np.inf
        finally:
            m.rollback(consumed)
        return out

    @_fails_the_request
    def advance(self, token: int) -> None:
        """One emitted token (never an end-of-generation one: the engine stops before those)."""
        if self.complete:
            return
        if not self.active:
            self._tail = (self._tail + self.piece(token))[-len(self.trigger):]
            self.active = self._tail.endswith(self.trigger)
            return
        if not self.matcher.consume_token(token):
            raise GrammarFault(f"the grammar engine stopped this answer: {_error_line(self.matcher.get_error())}")
        self.complete = self.matcher.is_stopped()

    # --- helpers ---------------------------------------------------------------------------------

    def _activation(self, draft: Sequence[int]) -> int | None:
        """How many of the draft's tokens come before the grammar applies: 0 when active, the
        index after the trigger's completion, None when the draft never reaches it."""
        if self.active:
            return 0
        tail = self._tail
        for i, token in enumerate(draft):
            tail = (tail + self.piece(token))[-len(self.trigger):]
            if tail.endswith(self.trigger):
                return i + 1
        return None

    def _allowed(self) -> np.ndarray:
        bits = np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint8)
        if self.matcher.is_error():  # a limit hit while computing the mask: nothing may be sampled from it
            raise GrammarFault(f"the grammar engine stopped this answer: {_error_line(self.matcher.get_error())}")
        allowed = np.unpackbits(bits, bitorder="little").astype(bool)
        if len(allowed) < self.n_vocab:
            allowed = np.concatenate([allowed, np.zeros(self.n_vocab - len(allowed), dtype=bool)])
        return allowed[:self.n_vocab]


def _matcher(constraint: Constraint, tokenizer: Any, matcher_type) -> Any:
    """A fresh matcher for the constraint: compiled and probed once (on the thread that checks a
    request, off the engine's), then copied for each request that uses it; a SpecllamaError naming
    what cannot be enforced or which of llguidance's limits the grammar breaks."""
    text = grammar_text(constraint)
    key = (id(tokenizer), text)
    with _compiled_lock:
        fresh = _compiled.get(key)
        if fresh is not None:
            _compiled.move_to_end(key)
            if isinstance(fresh, GrammarFault):  # refused before: a client repeating it costs no second compile
                raise GrammarFault(str(fresh))
            return fresh.deep_copy()
    check_constraint(constraint, tokenizer, text)
    try:
        with engine_panics("the constraint cannot be enforced: the grammar engine failed on it", GrammarFault):
            fresh = matcher_type(tokenizer, text, log_level=0, limits=_limits())
            if fresh.is_error():
                raise GrammarFault(f"the constraint cannot be enforced: {_error_line(fresh.get_error())}")
            _probe(fresh.deep_copy(), tokenizer)
    except GrammarFault as e:
        _keep_compiled(key, e)
        raise
    _keep_compiled(key, fresh)
    with _compiled_lock:
        return fresh.deep_copy()


def _keep_compiled(key: tuple[int, str], value: Any) -> None:
    with _compiled_lock:
        _compiled[key] = value
        while len(_compiled) > COMPILED_KEEP:
            _compiled.popitem(last=False)


def _probe(m: Any, tokenizer: Any) -> None:
    """Walk a copy of a new grammar a few tokens (its forced tokens, else its lowest allowed one),
    so a grammar that breaks a limit of llguidance's at its first steps (a schema whose every
    instance is infinite, a row of more than 2,000 alternatives) is refused before decoding,
    not found by the engine mid-answer. Bounded in steps and in time."""
    deadline = time.monotonic() + PROBE_SECONDS
    eos = set(getattr(tokenizer, "eos_tokens", ()) or ())
    for _ in range(PROBE_TOKENS):
        if m.is_stopped() or time.monotonic() > deadline:
            return
        forced = m.compute_ff_tokens()
        if not m.is_error() and not forced:
            bits = np.unpackbits(np.frombuffer(m.compute_bitmask(), dtype=np.uint8), bitorder="little")
            ids = np.flatnonzero(bits)
            allowed = [t for t in ids[:64].tolist() if t not in eos]
            if not m.is_error() and not allowed:
                if len(ids):
                    return  # only the end may follow: the grammar is satisfied
                raise GrammarFault("the constraint admits no answer: no token can begin or continue it")
            forced = allowed[:1]
        if m.is_error() or not m.consume_tokens(forced):
            raise GrammarFault(f"the constraint breaks a limit of the grammar engine: {_error_line(m.get_error())}")


def guide_for(constraint: Constraint | None, model, drafts: bool) -> Guide | None:
    """The request's guide (None without a constraint); a SpecllamaError when it cannot be enforced."""
    if constraint is None:
        return None
    return Guide(constraint, grammar_tokenizer(model), model.n_vocab, lambda t: model.piece(t, special=True), drafts)


def guide_drafts(running: Sequence[Any], proposals: dict[int, Proposal], target,
                 exact_rows: int | None) -> dict[int, Proposal]:
    """After drafting, before the target decodes: each constrained slot's draft cut at its first
    forbidden token, then the tokens its grammar forces appended, within what the slot may send
    (its verifier's room, its max tokens, a fixed K) and exact mode's rows for the whole batch.
    Returns the proposals as shaped."""
    guided = [s for s in running if s.guide is not None]
    if not guided:
        return proposals
    proposals = dict(proposals)
    spare = None if exact_rows is None else exact_rows - sum(len(proposals[s.index].tokens) + 1 for s in running)
    for slot in guided:
        proposal = proposals[slot.index]
        before = len(proposal.tokens)
        room = min(slot.verifier.max_k(target, slot.index), slot.config.max_tokens - slot.summary.tokens - 1)
        if slot.config.fixed_k is not None:
            room = min(room, slot.config.fixed_k)
        if spare is not None:
            room = min(room, before + max(spare, 0))
        if slot.fault:
            proposals[slot.index] = proposal.keep(0)
            continue
        try:
            proposal = slot.guide.shape(proposal, max(room, 0))
        except Exception as e:  # this request's grammar failed: it alone ends (engine.py), with no draft now
            slot.fail(e)
            proposal = proposal.keep(0)
        proposals[slot.index] = proposal
        if spare is not None:
            spare -= len(proposal.tokens) - before
    return proposals


def _append(proposal: Proposal, tokens: list[int], source: str) -> Proposal:
    """Forced tokens after a draft: certain (confidence 1), deterministic (one-hot q rows), and
    marked per token with their own source."""
    n = len(proposal.tokens)
    own = proposal.source or source
    q = proposal.q
    if isinstance(q, DraftRows):
        q = q[:n].plus(tokens)
    elif q is not None:
        forced_q = np.zeros((len(tokens), q.shape[1]), dtype=q.dtype)
        forced_q[np.arange(len(tokens)), tokens] = 1.0
        q = np.concatenate([q[:n], forced_q])
    confidence = proposal.confidence
    if confidence is not None or n == 0:
        confidence = tuple(confidence or ())[:n] + (1.0,) * len(tokens)
    return replace(proposal, tokens=tuple(proposal.tokens) + tuple(tokens), q=q, confidence=confidence,
                   source=source if n == 0 else proposal.source,
                   sources=tuple(proposal.sources or (own,) * n) + (source,) * len(tokens))
