"""The planner's check: does a draft source realise, on this text, more than plain decoding would?

Predictions rest on estimates (acceptance, step costs) that can be wrong for a while; this record
looks only at what happened. Per source, over the recent steps that used it (each older step
weighing DECAY as much), it compares

    tokens gained / (step seconds / T(1) at the time)

with 1, plain decoding's rate: one token per plain step. A source whose record falls below
1 - MARGIN after MIN_STEPS steps is benched for `pause` steps (doubling each time it is benched
again, up to MAX_PAUSE), so a wrong estimate cannot keep a losing choice for more than a few steps,
and a source that was only unlucky is tried again later.

Asking costs too: a free drafter's proposal (the suffix drafter's lookup, 0.03-0.2 ms of Python) is paid
on every step it is asked, also when nothing is sent. On 2 CPU cores that is 0.3-0.7 % of a step (timed in
the real process between two decodes: 0.165 ms of a 24-26 ms step, bench/measured/vm-20261128-r7-unseen4.md);
on a GPU whose step takes 2 ms it was 11 % (bench/measured/lent-20261126-gpu-heldout-t0: `auto`
0.93x of plain on held-out prompts, worst 0.77x, with the drafts alone promising 1.14x). So each
source also keeps a longer record over every step that asked it (DECAY_ASKED), where a step that
sent nothing gained its one token at 1 + (asking seconds / T(1)) plain steps; a source that does not
pay for its asking is benched like one whose drafts lose, and while benched it is not asked.

That verdict takes MIN_ASKED steps and starts afresh with every request, so a short answer paid for
asking on most of its steps: on the lent H200 at 084f315, `auto` ran 0.96x of plain on held-out
prompts of 96 tokens, and the five that drafted nothing at all still lost 4-10 % (median of 3 runs)
(bench/measured/lent-20261127-r2-gpu-heldout-t0). So where asking is a real share of a step
(ASK_SHARE), a source that has sent nothing yet on this text also backs off at once: after each ask
that sent nothing it skips one step, then three (MAX_GAP). Once one of its drafts is sent it is asked
every step for the rest of the text: a text that copied once copies again, and gaps there found the
restarts of the agentic replay's copies late (-1.5 % on its texts, replayed, where backing off
after every unsent ask). Replayed with the H200's learnt costs and 0.13 ms an ask
(bench/measured/xeon-20261127-policy-replay-sparse-asking.md): held-out 1.023x -> 1.045x of plain,
tuning 1.045x -> 1.060x, similar 0.967x -> 0.983x, copies 1.665x -> 1.692x, agentic 2.216x ->
2.219x; the CPU curves' decisions are unchanged (asking is 0.3-1 % of a step there).

A source back from the bench is on probation: it sends at most PROBATION tokens until one of its
drafts is judged (`allowed`: `auto` and the suffix drafter's policy cut a suffix draft to it; a
draft model or MTP head is asked for no more, so nothing is decoded to be cut). The bench says its
estimates were wrong on this text a moment ago, and the estimates are all that price its first draft
back: traced on a blind set at 0.7 (bench/measured/vm-20261129-r16-short-of-a-block,
summary-incident), the suffix drafter came back from a 16-step bench with a 31-token draft at
calibrated odds 0.95-0.98 on a batch size never timed (priced 12.2 plain steps, paid 15.5, nothing
kept) and was benched for 32 more. Replayed (same folder, section 5): level where benches are rare
(21 recorded sets 1.0773x -> 1.0776x, H200 costs 1.1876x -> 1.1874x) and +0.1 to +1.4 % on that
blind set's texts. Run for real, ABBA on two blind sets greedy and at 0.7
(bench/measured/vm-20261129-r17-probation): drafting's own net on a run's worst prompt -5.7 % ->
-4.2 % (mean of six pairs), tok/s within the machine's noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specllama.decoding.outcome import StepOutcome

DECAY = 0.8  # ~5 steps of memory: a text's character shows within a few steps
MIN_STEPS = 4  # evidence before a verdict
MARGIN = 0.03  # within 3 % of plain decoding is measurement noise on a shared machine
FIRST_PAUSE, MAX_PAUSE = 16, 256
DECAY_ASKED = 0.95  # ~20 steps: asking's cost shows only over many steps (most send nothing)
MIN_ASKED = 24  # steps asked before that verdict
# ... and only where asking is a real part of the cost. Below this share (2 CPU cores: 0.3-0.7 %, 16
# Xeon threads: ~1 %) the record over all steps adds nothing but a second, slower verdict on the
# drafts themselves, which the draft record already gives: replayed on recorded answers without the
# share, a failed copy in it benched the suffix drafter for the next copy (copies 1.13x -> 1.08x).
ASK_SHARE = 0.03
PROBATION = 3  # tokens a source back from the bench may send until one of its drafts is judged
MAX_GAP = 4  # where asking is dear, a source that sent nothing yet is asked at most every 4th step


@dataclass
class _Record:
    tokens: float = 0.0
    cost: float = 0.0  # in plain steps
    steps: int = 0
    pause: int = FIRST_PAUSE
    asking: float = 0.0  # of `cost`, what asking for the drafts cost (the record over every step asked)

    @property
    def gain(self) -> float:
        return self.tokens / self.cost if self.cost > 0 else 1.0


@dataclass
class RealisedSpeed:
    records: dict[str, _Record] = field(default_factory=dict)
    asked: dict[str, _Record] = field(default_factory=dict)  # every step that asked the source
    benched: dict[str, int] = field(default_factory=dict)  # source -> steps left on the bench
    # Benched because asking did not pay: not even asked until back (a source benched for its drafts
    # is still asked, so that its calibration goes on learning from the proposals it would have sent).
    unasked: set[str] = field(default_factory=set)
    # Where asking is dear: steps between asks of a source that sent nothing yet on this text, steps
    # left before its next ask, and the sources that sent a draft on it (asked every step from then on).
    gap: dict[str, int] = field(default_factory=dict)
    waiting: dict[str, int] = field(default_factory=dict)
    sent: set[str] = field(default_factory=set)
    returning: set[str] = field(default_factory=set)  # back from the bench, no draft of theirs judged since

    def observe(self, source: str, tokens: int, seconds: float, t1: float | None, t_ask: float = 0.0) -> None:
        """A step that verified `source`'s draft emitted `tokens` in `seconds` (drafting
        included, of which asking for the draft took `t_ask`); t1 is plain decoding's step time now."""
        if not source or not t1 or seconds <= 0:
            return
        r = self.records.setdefault(source, _Record())
        r.tokens = r.tokens * DECAY + tokens
        r.cost = r.cost * DECAY + seconds / t1
        r.steps += 1
        self.sent.add(source)
        self.waiting.pop(source, None)
        if r.steps >= MIN_STEPS and r.gain < 1.0 - MARGIN:
            self._bench(source, r)
            return
        self._asked(source, tokens, seconds / t1, t_ask / t1)

    def observe_step(self, outcome: StepOutcome) -> None:
        """A lone request's step as a free drafter's policy sees it: its draft judged with what asking
        cost, or, when nothing was sent, what asking the source cost alone."""
        if outcome.drafted:
            self.observe(outcome.source, outcome.emitted, outcome.seconds, outcome.t1, outcome.t_draft)
        else:
            self.observe_unsent(outcome.asked_source, outcome.t_draft, outcome.t1)

    def observe_unsent(self, source: str, t_ask: float, t1: float | None) -> None:
        """A step asked `source` and sent nothing: its one token cost a plain step plus the asking."""
        if source and t1 and t_ask >= 0:
            self._asked(source, 1, 1.0 + t_ask / t1, t_ask / t1)
            if t_ask > ASK_SHARE * t1 and source not in self.sent:  # dear, and nothing sent yet: back off
                self.gap[source] = min(MAX_GAP, 2 * self.gap.get(source, 1))
                self.waiting[source] = self.gap[source] - 1

    def _asked(self, source: str, tokens: int, cost: float, asking: float) -> None:
        r = self.asked.setdefault(source, _Record())
        r.tokens = r.tokens * DECAY_ASKED + tokens
        r.cost = r.cost * DECAY_ASKED + cost
        r.asking = r.asking * DECAY_ASKED + asking
        r.steps += 1
        if r.steps >= MIN_ASKED and r.gain < 1.0 - MARGIN and r.asking > ASK_SHARE * r.cost:
            self._bench(source, self.records.setdefault(source, _Record()))
            self.unasked.add(source)

    def _bench(self, source: str, r: _Record) -> None:
        self.unasked.discard(source)
        self.benched[source] = r.pause
        self.records[source] = _Record(pause=min(MAX_PAUSE, r.pause * 2))  # evidence starts afresh
        self.asked.pop(source, None)

    def tick(self, judged: str = "") -> None:
        """One step went by; `judged`: the source whose draft it verified, if any (in a batch too,
        where the record above does not follow: its probation ends all the same)."""
        self.returning.discard(judged)
        for source in list(self.benched):
            self.benched[source] -= 1
            if self.benched[source] <= 0:
                del self.benched[source]
                self.returning.add(source)
                self.unasked.discard(source)
        for source in list(self.waiting):
            self.waiting[source] -= 1
            if self.waiting[source] <= 0:
                del self.waiting[source]

    def allowed(self, source: str, n: int) -> int:
        """How many of `source`'s n draft tokens may be sent: all, unless it is back from the bench
        and on probation."""
        return min(n, PROBATION) if source in self.returning else n

    def avoid(self) -> frozenset[str]:
        """Sources benched now."""
        return frozenset(self.benched)

    def not_asked(self) -> frozenset[str]:
        """Sources not to be asked this step for what asking them costs: benched for it, or backing off."""
        return frozenset(self.unasked | self.waiting.keys())
