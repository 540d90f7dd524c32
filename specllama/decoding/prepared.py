"""A request checked once and made ready once: what `Engine.check` returns and the engine admits as it is.

Checking a request means building what it runs with: its draft policy (policy/registry.py) and its
grammar's matcher (grammar.py: a compile and a probe, up to seconds for a large schema). A server
checks on its preparing threads (server/prepare.py), so that a request that cannot run is a 400
before it is queued; the engine thread then admits the same objects instead of building them again
(it built them three times before: the server's check, the scheduler's, the admission's).

A policy is built off the engine thread, so its construction must read nothing a step changes. The
step costs and the engine's record are only held by reference there (read when the policy asks,
on the engine thread); the acceptance records are the one thing a policy reads as it is made (a
text's view starts from the record: acceptance.PositionAcceptance.for_text), so the kit a policy is
built from hands it a `LateRecord`, whose view is taken when the policy first uses it: at its
`start`, on the engine thread, when the request is admitted (as before).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Hashable

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.request import Request

if TYPE_CHECKING:
    from specllama.decoding.grammar import Guide
    from specllama.decoding.policy import DraftPolicy


@dataclass
class Prepared(Request):
    """A request the engine has checked, with the policy and grammar it runs with (each made once).
    It is a Request (prompt, config, tag, cancel), so a scheduler reads it as any other."""

    policy: DraftPolicy = field(kw_only=True)
    guide: Guide | None = field(default=None, kw_only=True)  # the compiled grammar's state; None without a constraint

    @classmethod
    def of(cls, request: Request, policy: DraftPolicy, guide: Guide | None) -> Prepared:
        return cls(request.prompt, request.config, request.tag, request.cancel, policy=policy, guide=guide)

    def tagged(self, tag: Hashable) -> Prepared:
        """The same prepared request under the tag a scheduler names its events by (a server's
        worker gives it one when it is queued, after it was checked)."""
        return replace(self, tag=tag)


class LateRecord:
    """A drafter's shared acceptance record as a policy's kit holds it: `for_text` gives a view
    that is taken from the record only when the policy first reads or calls it (on the engine
    thread), so building a policy on a preparing thread reads nothing the engine is updating."""

    def __init__(self, shared: PositionAcceptance):
        self.shared = shared

    def for_text(self) -> "_LateView":
        return _LateView(self.shared)


class _LateView:
    """PositionAcceptance.for_text(), deferred to first use; attributes set before then (the kit
    sets `verify_tokens`) are applied to the view when it is taken."""

    def __init__(self, shared: PositionAcceptance):
        object.__setattr__(self, "_shared", shared)
        object.__setattr__(self, "_view", None)
        object.__setattr__(self, "_pending", {})

    def _taken(self) -> PositionAcceptance:
        view = object.__getattribute__(self, "_view")
        if view is None:
            view = object.__getattribute__(self, "_shared").for_text()
            for name, value in object.__getattribute__(self, "_pending").items():
                setattr(view, name, value)
            object.__setattr__(self, "_view", view)
        return view

    def __getattr__(self, name: str) -> Any:
        return getattr(self._taken(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if object.__getattribute__(self, "_view") is None:
            object.__getattribute__(self, "_pending")[name] = value
        else:
            setattr(object.__getattribute__(self, "_view"), name, value)
