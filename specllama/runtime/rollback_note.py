"""What a loaded target's file means for drafting: how many state snapshots to ask llama.cpp for
(llama/rollback.py), the line that says how a recurrent or hybrid model takes drafts back, and
whether it carries MTP layers to draft with (llama/mtp.py)."""

from __future__ import annotations

from specllama.decoding.request import K_MAX
from specllama.llama.rollback import CHECKPOINTS, SNAPSHOTS
from specllama.runtime.notices import Notice


def snapshot_depth(model, exact: bool) -> int:
    """Snapshots reach back over the longest draft a verification may drop: K_MAX, or in exact
    mode the longest its row limit lets through. Each is a copy of every recurrent layer's state
    per sequence, so none are asked for past that."""
    return min(K_MAX, model.exact_max_batch - 1) if exact else K_MAX


def rollback_notice(ctx) -> Notice | None:
    """None for an attention-only model (nothing to say)."""
    arch = ctx.model.info.architecture
    if ctx.rollback_method == SNAPSHOTS:
        return Notice("rollback", f"{arch} is a hybrid model: rejected drafts are dropped from its state snapshots "
                                  f"(up to {ctx.snapshot_depth} tokens)", verbose_only=True)
    if ctx.rollback_method == CHECKPOINTS:
        return Notice("rollback", f"{arch} is a recurrent or hybrid model without state snapshots: each rejected "
                                  "draft costs a state restore and a decode of the accepted ones again (the cost "
                                  "model prices it; docs/models.md)")
    return None


def mtp_layers(path) -> int:
    """The multi-token-prediction (nextn) layers a GGUF carries, from its header."""
    from specllama.llama.gguf_header import read_header

    header = read_header(path, decode_arrays=False)
    value = header.get(f"{header.get('general.architecture')}.nextn_predict_layers")
    return int(value) if isinstance(value, int) else 0
