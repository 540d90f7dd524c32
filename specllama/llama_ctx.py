"""The only module that touches llama.cpp.

Two small owners of one C resource each, in the spirit of llama-cpp-python's `_internals.py`:
`GGUFModel` (weights + vocabulary: tokenize, pieces, chat template, end-of-generation ids) and
`DecodeContext` (a KV cache: batched decode with logits only where asked, checked rollback,
sequence copies for the "stairs" verifier). We use the low-level API rather than `Llama` because
`Llama(logits_all=True)` allocates n_ctx x n_vocab floats (2.5 GB for Qwen at 4096) and its
detokenizer truncates pieces longer than 32 bytes.
"""

from __future__ import annotations

import codecs
import ctypes
import os
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

# OpenMP reads this when the library loads: with 2 cores shared with the UI, spinning barriers
# turn a 77 ms decode into seconds whenever another process takes a core.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import llama_cpp as C  # noqa: E402
import numpy as np  # noqa: E402

from .errors import ContextOverflowError, ModelFileError, SpecllamaError  # noqa: E402
from .gguf_meta import read_info  # noqa: E402

_init_lock = threading.Lock()
_backend_ready = False
_recent_log: deque[str] = deque(maxlen=20)


@C.llama_log_callback
def _log_to_ring(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    # llama.cpp talks a lot on stderr; keep the last lines so a failure can quote them instead.
    line = text.decode("utf-8", errors="replace").rstrip()
    if line:
        _recent_log.append(line)
    if os.environ.get("SPECLLAMA_VERBOSE"):
        print(line, file=__import__("sys").stderr)


def _ensure_backend() -> None:
    global _backend_ready
    with _init_lock:
        if not _backend_ready:
            C.llama_log_set(_log_to_ring, ctypes.c_void_p(0))
            C.llama_backend_init()
            _backend_ready = True


def _last_llama_error() -> str:
    errors = [line for line in _recent_log if "error" in line.lower() or "failed" in line.lower()]
    return (errors or list(_recent_log) or ["no details"])[-1]


def default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS
        return max(1, os.cpu_count() or 1)


def system_info() -> str:
    _ensure_backend()
    return C.llama_print_system_info().decode(errors="replace").strip()


def library_version() -> str:
    return C.__version__


class GGUFModel:
    """Weights and vocabulary of one GGUF file."""

    def __init__(self, path: str | Path, *, n_gpu_layers: int = 0, vocab_only: bool = False):
        self.path = Path(path)
        self.info = read_info(self.path)  # clear errors for missing / not GGUF / truncated files
        _ensure_backend()
        params = C.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        params.vocab_only = vocab_only
        self._model = C.llama_model_load_from_file(str(self.path).encode(), params)
        if not self._model:
            raise ModelFileError(f"llama.cpp could not load {self.path}: {_last_llama_error()}")
        self._vocab = C.llama_model_get_vocab(self._model)
        self.n_vocab: int = C.llama_vocab_n_tokens(self._vocab)
        self.add_bos: bool = bool(C.llama_vocab_get_add_bos(self._vocab))
        self.bos_id: int = C.llama_vocab_bos(self._vocab)
        self.eos_id: int = C.llama_vocab_eos(self._vocab)
        self.n_ctx_train: int = C.llama_model_n_ctx_train(self._model)
        self._piece_cache: dict[int, bytes] = {}
        self._eog = np.array([C.llama_vocab_is_eog(self._vocab, t) for t in range(self.n_vocab)], dtype=bool)

    @property
    def name(self) -> str:
        return self.info.name or self.path.stem

    def close(self) -> None:
        if getattr(self, "_model", None):
            C.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:
        self.close()

    # --- vocabulary -----------------------------------------------------------------------

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buf = (C.llama_token * capacity)()
        n = C.llama_tokenize(self._vocab, data, len(data), buf, capacity, add_special, parse_special)
        if n < 0:  # the buffer was too small: llama.cpp says how large it must be
            capacity = -n
            buf = (C.llama_token * capacity)()
            n = C.llama_tokenize(self._vocab, data, len(data), buf, capacity, add_special, parse_special)
            if n < 0:
                raise SpecllamaError(f"could not tokenize {len(data)} bytes of text")
        return list(buf[:n])

    def piece(self, token: int, *, special: bool = False) -> bytes:
        """The bytes of one token, whatever their length (llama-cpp-python stops at 32)."""
        key = token if not special else -1 - token
        cached = self._piece_cache.get(key)
        if cached is not None:
            return cached
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = C.llama_token_to_piece(self._vocab, token, buf, size, 0, special)
            if n >= 0:
                piece = buf.raw[:n]
                break
            size = -n  # negative: the size it needs
        self._piece_cache[key] = piece
        return piece

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> str:
        return b"".join(self.piece(t, special=special) for t in tokens).decode("utf-8", errors="replace")

    def token_text(self, token: int) -> str:
        """The vocabulary's stored text for a token (as in the GGUF), not its decoded bytes."""
        return C.llama_vocab_get_text(self._vocab, token).decode("utf-8", errors="replace")

    def is_eog(self, token: int) -> bool:
        return bool(self._eog[token]) if 0 <= token < self.n_vocab else False

    @property
    def eog_ids(self) -> list[int]:
        return [int(t) for t in np.flatnonzero(self._eog)]

    # --- chat -----------------------------------------------------------------------------

    @property
    def chat_template(self) -> str | None:
        return self.info.chat_template

    def render_chat(self, messages: list[dict], *, add_generation_prompt: bool = True) -> str:
        """The GGUF's own Jinja chat template, rendered as Transformers would (llama-cpp-python's
        Jinja2ChatFormatter). Without a template, the turns are joined as plain text."""
        if not self.chat_template:
            return "\n\n".join(m["content"] for m in messages) + ("\n\n" if add_generation_prompt else "")
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        bos = self.token_text(self.bos_id) if self.bos_id >= 0 else ""
        eos = self.token_text(self.eos_id) if self.eos_id >= 0 else ""
        formatter = Jinja2ChatFormatter(self.chat_template, eos_token=eos, bos_token=bos,
                                        add_generation_prompt=add_generation_prompt)
        try:
            return formatter(messages=messages).prompt
        except Exception as e:  # a broken template in a user's GGUF is their data, not our bug
            raise SpecllamaError(f"the chat template of {self.path.name} failed to render: {e}") from None

    def prompt_tokens(self, prompt: str, system: str | None = None) -> list[int]:
        """One user turn (after an optional system message), templated and tokenized."""
        messages = [{"role": "system", "content": system}] if system else []
        return self.chat_tokens(messages + [{"role": "user", "content": prompt}])

    def chat_tokens(self, messages: list[dict], *, add_generation_prompt: bool = True) -> list[int]:
        text = self.render_chat(messages, add_generation_prompt=add_generation_prompt)
        # The template writes BOS itself when it wants one; add it only if the model needs it and
        # the template did not, so it is never doubled.
        tokens = self.tokenize(text, add_special=False)
        if self.add_bos and self.bos_id >= 0 and (not tokens or tokens[0] != self.bos_id):
            tokens.insert(0, self.bos_id)
        return tokens


class StreamDecoder:
    """Token ids -> text pieces, holding back bytes of a UTF-8 character split across tokens."""

    def __init__(self, model: GGUFModel):
        self._model = model
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token: int) -> str:
        return self._utf8.decode(self._model.piece(token))

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)


@dataclass
class _Batch:
    """A reusable llama_batch sized for the largest decode we submit."""

    capacity: int
    n_seq_max: int

    def __post_init__(self) -> None:
        self.raw = C.llama_batch_init(self.capacity, 0, self.n_seq_max)

    def fill(self, tokens: Sequence[int], positions: Sequence[int], seqs: Sequence[Sequence[int]],
             want_logits: Sequence[bool]) -> None:
        b = self.raw
        b.n_tokens = len(tokens)
        for i, (tok, pos, seq_ids, want) in enumerate(zip(tokens, positions, seqs, want_logits)):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = len(seq_ids)
            for j, s in enumerate(seq_ids):
                b.seq_id[i][j] = s
            b.logits[i] = 1 if want else 0

    def free(self) -> None:
        if self.raw is not None:
            C.llama_batch_free(self.raw)
            self.raw = None


class DecodeContext:
    """One KV cache over a GGUFModel. Sequence 0 is the conversation; `tokens` mirrors what it holds."""

    def __init__(self, model: GGUFModel, *, n_ctx: int = 4096, n_threads: int | None = None,
                 n_threads_batch: int | None = None, n_batch: int = 512, n_seq_max: int = 1):
        self.model = model
        threads = n_threads or default_threads()
        params = C.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        params.n_seq_max = n_seq_max
        # Sequences copied from sequence 0 share its cells only in a unified cache; a split cache
        # would also give each sequence just n_ctx / n_seq_max positions.
        params.kv_unified = n_seq_max > 1
        params.n_threads = threads
        params.n_threads_batch = n_threads_batch or threads
        self._ctx = C.llama_init_from_model(model._model, params)
        if not self._ctx:
            raise SpecllamaError(f"llama.cpp could not create a context of {n_ctx} tokens for "
                                 f"{model.path.name}: {_last_llama_error()}")
        self._memory = C.llama_get_memory(self._ctx)
        self.n_ctx: int = C.llama_n_ctx(self._ctx)
        # llama.cpp clamps n_batch to n_ctx and aborts the process on a larger batch: chunk by its value.
        self.n_batch: int = min(C.llama_n_batch(self._ctx), C.llama_n_ubatch(self._ctx))
        self.n_seq_max = n_seq_max
        self.n_threads = threads
        self.n_threads_batch = n_threads_batch or threads
        self._batch = _Batch(self.n_batch, max(1, n_seq_max))
        self.tokens: list[int] = []  # what sequence 0 holds, position by position

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def close(self) -> None:
        if getattr(self, "_batch", None):
            self._batch.free()
        if getattr(self, "_ctx", None):
            C.llama_free(self._ctx)
            self._ctx = None

    def __del__(self) -> None:
        self.close()

    def set_threads(self, n_threads: int, n_threads_batch: int | None = None) -> None:
        self.n_threads, self.n_threads_batch = n_threads, n_threads_batch or n_threads
        C.llama_set_n_threads(self._ctx, self.n_threads, self.n_threads_batch)

    # --- decoding -------------------------------------------------------------------------

    def decode(self, tokens: Sequence[int], logits: str | Sequence[int] = "last") -> np.ndarray:
        """Append tokens to sequence 0. Returns copied logits, one row per requested position:
        logits = "last" | "all" | "none" | indices into `tokens`. Long inputs go in n_batch chunks."""
        n = len(tokens)
        if n == 0:
            return np.empty((0, self.model.n_vocab), dtype=np.float32)
        if self.n_past + n > self.n_ctx:
            raise ContextOverflowError(
                f"context full: {self.n_past} tokens held + {n} new > n_ctx {self.n_ctx} "
                f"(raise --ctx, at most the model's {self.model.n_ctx_train})")
        if logits == "last":
            wanted = {n - 1}
        elif logits == "all":
            wanted = set(range(n))
        elif logits == "none":
            wanted = set()
        else:
            wanted = set(logits)
        rows = []
        for start in range(0, n, self.n_batch):
            chunk = tokens[start:start + self.n_batch]
            want = [start + i in wanted for i in range(len(chunk))]
            positions = range(self.n_past, self.n_past + len(chunk))
            rows += self._submit(chunk, positions, [(0,)] * len(chunk), want)
            self.tokens.extend(chunk)
        return np.stack(rows) if rows else np.empty((0, self.model.n_vocab), dtype=np.float32)

    def decode_multi(self, tokens: Sequence[int], positions: Sequence[int], seqs: Sequence[Sequence[int]],
                     want_logits: Sequence[bool]) -> np.ndarray:
        """One raw batch over several sequences (for stairs verification); does not touch `tokens`."""
        if len(tokens) > self.n_batch:
            raise SpecllamaError(f"a multi-sequence batch of {len(tokens)} exceeds n_batch {self.n_batch}")
        if max(positions) >= self.n_ctx:
            raise ContextOverflowError(f"context full: position {max(positions)} >= n_ctx {self.n_ctx}")
        rows = self._submit(tokens, positions, seqs, want_logits)
        return np.stack(rows) if rows else np.empty((0, self.model.n_vocab), dtype=np.float32)

    def _submit(self, tokens, positions, seqs, want) -> list[np.ndarray]:
        self._batch.fill(tokens, positions, seqs, want)
        rc = C.llama_decode(self._ctx, self._batch.raw)
        if rc == 1:
            raise ContextOverflowError(f"llama.cpp found no room in the KV cache (n_ctx {self.n_ctx})")
        if rc != 0:
            raise SpecllamaError(f"llama_decode failed with code {rc}: {_last_llama_error()}")
        n_vocab = self.model.n_vocab
        # Copy: the logits buffer is reused by the next decode.
        return [np.ctypeslib.as_array(C.llama_get_logits_ith(self._ctx, i), shape=(n_vocab,)).copy()
                for i, w in enumerate(want) if w]

    # --- cache surgery ----------------------------------------------------------------------

    def rollback(self, n_past: int) -> None:
        """Keep the first n_past tokens of sequence 0, drop the rest."""
        if n_past > self.n_past:
            raise ValueError(f"cannot roll back to {n_past}: only {self.n_past} tokens held")
        if n_past == self.n_past:
            return
        self.remove(0, n_past, -1)
        del self.tokens[n_past:]

    def remove(self, seq: int, p0: int, p1: int = -1) -> None:
        if not C.llama_memory_seq_rm(self._memory, seq, p0, p1):
            raise SpecllamaError(
                f"{self.model.path.name} ({self.model.info.architecture}) cannot drop part of its cache "
                "(recurrent or hybrid model): speculative decoding needs a model whose cache can roll back")

    def copy_sequence(self, src: int, dst: int, p0: int = 0, p1: int = -1) -> None:
        C.llama_memory_seq_cp(self._memory, src, dst, p0, p1)

    def clear(self) -> None:
        C.llama_memory_clear(self._memory, True)
        self.tokens.clear()

    def reuse_prefix(self, tokens: Sequence[int]) -> int:
        """Drop whatever follows the longest common prefix of the cache and `tokens`; returns its
        length. Lets a chat decode only the new turn, not the whole history."""
        common = 0
        for held, new in zip(self.tokens, tokens):
            if held != new:
                break
            common += 1
        common = min(common, len(tokens) - 1)  # always leave one token to decode for fresh logits
        self.rollback(max(common, 0))
        return self.n_past


QUANT_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K")


def quantize(src: Path, dst: Path, type_name: str, n_threads: int | None = None) -> None:
    """llama.cpp's quantizer. Requantizing an already quantized file is allowed (the registry's
    drafts are Q4_K_M); the result is only as good as its source."""
    ftype = getattr(C, f"LLAMA_FTYPE_MOSTLY_{type_name.upper()}", None)
    if type_name.upper() not in QUANT_TYPES or ftype is None:
        raise SpecllamaError(f"unknown quantization type '{type_name}': choose one of {', '.join(QUANT_TYPES)}")
    _ensure_backend()
    params = C.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = n_threads or default_threads()
    params.allow_requantize = True
    if C.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) != 0:
        raise SpecllamaError(f"llama.cpp could not quantize {src.name} to {type_name}: {_last_llama_error()}")
