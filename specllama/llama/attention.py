"""Whether llama.cpp computes attention with its flash-attention kernel (`--flash-attn`).

llama.cpp's own default (auto) turns it on wherever the backend has the kernel, CPUs included, and
llama-server does the same. On a CPU that is the slower choice for what speculation does most:
ggml's CPU flash attention walks the cache once per query row, so a verify batch of n rows reads
the whole cache n times, where the plain path multiplies all rows against the cache at once.
Measured in-process on the 2-core machine (Qwen2.5-Coder-1.5B Q4_K_M, logits at every row,
bench/measured/vm-20261125-flash-attention):

  cache fill 4096 (interleaved off/on twice): one token 57-59 ms on, 51-55 off; 16 rows 596-604 ms
  on, 390-397 off; 32 rows 1100 on, 676-692 off; prompt (512-token chunks) 84-87 tok/s on, 78.5 off
  cache fill 12288: one token 110 ms on, 94 off; 16 rows 1294 on, 641 off; prompt 52 tok/s either way

  cache fill 300:   one token 35-37 ms on, 37-39 off; 16 rows about the same; prompt 102-105 tok/s on, 93-94 off

So the kernel pays on a CPU only near an empty cache, and loses from a fill of a couple of thousand
tokens on, more the deeper. A context is asked for as large as its fills are expected to get: on a
CPU, auto is off for contexts of OFF_MIN_CTX tokens or more a sequence (an agent's -c 32768:
every token at depth decodes 7-15 % faster and a verify batch costs a third to a half less, a long
prompt is prefilled up to 10 % slower), and llama.cpp's own choice (on) below that, where short
prompts keep their few percent. Elsewhere (Metal, CUDA, any offloaded layer) llama.cpp's auto
stands: its kernels there batch rows. Exact mode always turns it on (its row-independent path is
the point, llama/context.py).

Without flash attention the KQ scores of a prompt chunk are materialised: n_ubatch x cache cells x
heads floats (512 x 32768 x 12 x 4 B = 768 MiB for the 1.5B at -c 32768), which llama.cpp
allocates once as its compute buffer. `off_buffer_bytes` says what that costs, and auto keeps
flash attention on where that buffer would exceed OFF_BUFFER_MAX.
"""

from __future__ import annotations

CHOICES = ("auto", "on", "off")
# Contexts (tokens a sequence) from which auto turns it off on a CPU: twice the default -c 4096,
# past the ~2k-token fill where off starts to win (bench/measured/vm-20261125-flash-attention).
OFF_MIN_CTX = 8192
# Beyond this compute buffer (bytes), auto keeps flash attention on a CPU: an 8B model at 32k
# context (32 heads) would need 2 GiB for scores alone, more than its speed is worth on a laptop.
OFF_BUFFER_MAX = 1 << 30


def off_buffer_bytes(n_ubatch: int, n_ctx: int, n_head: int) -> int:
    """The KQ scores of one prompt chunk without flash attention: the compute buffer it needs."""
    return n_ubatch * n_ctx * n_head * 4


def flash_attention(asked: str, *, exact: bool, offloaded: bool, n_ubatch: int, n_ctx: int, n_head: int,
                    n_ctx_seq: int | None = None) -> str:
    """"on", "off" or "auto" (llama.cpp decides) for a context: what `asked` (--flash-attn) means here.
    n_ctx: the cache's cells (all sequences); n_ctx_seq: one sequence's (default n_ctx)."""
    if asked not in CHOICES:
        raise ValueError(f"flash attention must be one of {', '.join(CHOICES)}, got {asked!r}")
    if exact:
        return "on"
    if asked != "auto":
        return asked
    if offloaded or (n_ctx_seq or n_ctx) < OFF_MIN_CTX:
        return "auto"
    return "off" if off_buffer_bytes(n_ubatch, n_ctx, n_head) <= OFF_BUFFER_MAX else "on"
