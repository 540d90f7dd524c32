"""The speculative step loop: one loop for every mode, plain decoding being K = 0.

A step reads as its phases, the way gpt-fast's `speculative_decode` does:
  draft   - the request's drafter proposes up to K tokens after the committed sequence;
  verify  - the target decodes [last] + drafts (the request's verifier: causal or stairs) and the
            drafts are accepted by greedy match or modified rejection sampling;
  commit  - the target's cache keeps [last] + the accepted drafts, the draft's cache its accepted
            prefix (both rollbacks side by side, each checked by the adapter);
  emit    - token events (whose texts concatenate to the output) and a step event.
A generation ends with a DoneEvent carrying its Summary.
"""

from __future__ import annotations

import time
from typing import Iterator, Mapping, Sequence

import numpy as np

from specllama.decoding.adaptive_k import AdaptiveK
from specllama.decoding.drafters import Drafter, NoDrafter, Proposal
from specllama.decoding.events import DoneEvent, Event, Generation, Origin, StepEvent, Summary, TokenEvent
from specllama.decoding.request import AUTO, GenerationConfig
from specllama.decoding.sampling import probabilities
from specllama.decoding.stop import StopMatcher
from specllama.decoding.verifiers import VERIFIERS, Verifier
from specllama.decoding.verify import Verdict, verify_greedy, verify_sampling
from specllama.errors import ContextOverflowError, SpecllamaError
from specllama.llama.model import StreamDecoder

# Re-exported: most callers want the request and its results from one place.
__all__ = ["Engine", "GenerationConfig", "Generation", "Summary", "TokenEvent", "StepEvent", "DoneEvent"]


class Engine:
    """A target context and the drafters a request may name. One generation at a time.

    `drafters` maps a drafter name to the drafter (the runtime owns them, with their caches);
    `policies` maps it to its -k auto chooser, kept across generations so it remembers its record.
    """

    def __init__(self, target, drafters: Mapping[str, Drafter] | None = None,
                 policies: Mapping[str, AdaptiveK] | None = None):
        self.target = target
        self.drafters: dict[str, Drafter] = {"none": NoDrafter(), **(drafters or {})}
        self.policies: dict[str, AdaptiveK] = dict(policies or {})
        self._cancel = False

    def cancel(self) -> None:
        """Ask the running generation to stop after the current step (from any thread)."""
        self._cancel = True

    def reset(self) -> None:
        """Forget every cache: the next generation starts from an empty context (a failed decode
        can leave a cache out of step with its token list; a benchmark run must not inherit one)."""
        self.target.clear()
        for drafter in self.drafters.values():
            drafter.reset()

    def drafter_for(self, config: GenerationConfig) -> Drafter:
        if not config.drafts:
            return self.drafters["none"]
        drafter = self.drafters.get(config.drafter)
        if drafter is None:
            hint = " (no draft model is loaded: pass --draft or a pair)" if config.drafter == "model" else ""
            raise SpecllamaError(f"the {config.drafter} drafter is not available{hint}")
        return drafter

    def policy_for(self, config: GenerationConfig, drafter: Drafter) -> AdaptiveK | None:
        if config.k != AUTO or isinstance(drafter, NoDrafter):
            return None
        policy = self.policies.get(drafter.name)
        if policy is None:
            raise SpecllamaError("-k auto needs this machine's cost curve: load the runtime with auto_k")
        return policy

    def generate(self, prompt: Sequence[int], config: GenerationConfig) -> Generation:
        """Checks the request now (a prompt that cannot fit fails here, before any decoding) and
        returns the generation to iterate."""
        target = self.target
        if not prompt:
            raise ValueError("empty prompt")
        if len(prompt) + 1 > target.n_ctx:
            raise ContextOverflowError(
                f"the prompt is {len(prompt)} tokens but the context holds {target.n_ctx} "
                f"(raise --ctx, at most the model's {target.model.n_ctx_train}, or shorten the prompt)")
        drafter = self.drafter_for(config)
        verifier = VERIFIERS[config.verify]
        policy = self.policy_for(config, drafter)
        if config.verify == "stairs":
            verifier.max_k(target)  # refuses a context without sequences to spare, before anything runs
        self._cancel = False
        return Generation(self._run(list(prompt), config, drafter, verifier, policy))

    def _run(self, prompt: list[int], config: GenerationConfig, drafter: Drafter, verifier: Verifier,
             policy: AdaptiveK | None) -> Iterator[Event]:
        target, model, params = self.target, self.target.model, config.sampling
        rng = np.random.default_rng(params.seed)
        summary = Summary(prompt_tokens=len(prompt), drafter=config.drafter if config.drafts else "none")
        decoder, stops = StreamDecoder(model), StopMatcher(config.stop)
        pieces: list[str] = []
        if policy:
            policy.verify_tokens = verifier.batch_tokens
            policy.new_text()

        # --- prefill: the prompt minus its last token, which every step decodes as [last] -------
        t0 = time.perf_counter()
        summary.reused_tokens = min(target.reuse_prefix(prompt), len(prompt) - 1)
        target.rollback(summary.reused_tokens)
        target.decode(prompt[target.n_past:-1], logits="none")
        # With -k auto, a drafter that cannot pay even at 100 % acceptance is never used at all.
        may_draft = not isinstance(drafter, NoDrafter) and (policy.best_possible_rate() > 1.0 if policy else True)
        # Under -k auto the draft digests the prompt only once a step wants drafts (a long prompt
        # costs the draft seconds); propose() catches up by itself then.
        if may_draft and (policy is None or policy.choose() > 0):
            drafter.prefill(prompt)
        committed = prompt
        summary.t_prompt = time.perf_counter() - t0

        t_start = time.perf_counter()
        finish = ""
        while not finish:
            if self._cancel:
                finish = "cancelled"
                break
            if target.n_ctx - target.n_past - 1 < 0:  # no cache slot left for [last]
                finish = "context"
                break
            # --- draft ---------------------------------------------------------------------------
            t_a = time.perf_counter()
            wanted = 0 if not may_draft else (policy.choose() if policy else int(config.k))
            k = max(0, min(wanted, verifier.max_k(target), config.max_tokens - summary.tokens - 1))
            proposal = drafter.propose(committed, k, config, rng) if k else Proposal([])
            draft = proposal.tokens[:k]
            # --- verify --------------------------------------------------------------------------
            t_b = time.perf_counter()
            n_past, last = target.n_past, committed[-1]
            logits = verifier.decode(target, last, draft)
            t_c = time.perf_counter()
            verdict = _judge(draft, proposal, logits, config, rng)
            # --- commit: both caches keep what was accepted --------------------------------------
            verifier.commit(target, n_past, last, draft, verdict.n_accepted)
            if draft:
                drafter.rollback(len(committed) + verdict.n_accepted)
            if policy:
                policy.observe(len(draft), verdict.n_accepted)
            # --- emit ----------------------------------------------------------------------------
            new = draft[:verdict.n_accepted] + [verdict.token]
            origins: list[Origin] = ["draft"] * verdict.n_accepted + ["bonus" if verdict.bonus and draft else "target"]
            events: list[TokenEvent] = []
            for token, origin in zip(new, origins):
                if model.is_eog(token):
                    finish = "stop"
                    break
                committed.append(token)
                summary.tokens += 1
                text, hit = stops.feed(decoder.feed(token))
                pieces.append(text)
                events.append(TokenEvent(token, text, origin))
                if hit:
                    finish = "stop_string"
                elif summary.tokens >= config.max_tokens:
                    finish = "length"
                if finish:
                    break
            step = StepEvent(k, len(draft), verdict.n_accepted, t_b - t_a, t_c - t_b, time.perf_counter() - t_c)
            summary.record(step)
            yield from events
            yield step

        tail = "" if finish == "stop_string" else stops.flush(decoder.flush())
        pieces.append(tail)
        summary.t_generate = time.perf_counter() - t_start
        summary.finish_reason = finish
        summary.text = "".join(pieces)
        yield DoneEvent(tail, summary)


def _judge(draft: list[int], proposal: Proposal, logits: np.ndarray, config: GenerationConfig,
           rng: np.random.Generator) -> Verdict:
    if config.sampling.greedy:
        return verify_greedy(draft, logits)
    p = probabilities(logits, config.sampling)
    q = proposal.q[:len(draft)] if proposal.q is not None else None
    return verify_sampling(draft, q, p, rng)
