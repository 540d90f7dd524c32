"""One GGUF file's weights and vocabulary: tokenize, pieces of any length, chat template, end ids.

A small owner of one C resource, in the spirit of llama-cpp-python's `_internals.py`. Its
detokenizer grows the piece buffer (llama-cpp-python's stops at 32 bytes, and 240 Qwen2 tokens are
longer) and `StreamDecoder` holds back bytes of a UTF-8 character split across tokens.
"""

from __future__ import annotations

import codecs
import ctypes
import functools
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from specllama.errors import ContextOverflowError, ModelFileError, SpecllamaError, Stopped
from specllama.llama.backend import C, ensure_backend, last_llama_error
from specllama.llama.exact_rows import EXACT_MAX_BATCH, exact_max_batch
from specllama.llama.gguf_meta import read_info
from specllama.llama.special_text import SpecialTexts, TooManySpecialTokens, split_at

# Below this many (special tokens x bytes) llama.cpp's own split costs little (a chat's template
# markers in a long message); above it the text goes to llama.cpp in pieces (special_text.py).
SPLIT_WORK = 1 << 22
SPLIT_FROM_BYTES = 4096  # shorter texts are never worth a search


class GGUFModel:
    """Weights and vocabulary of one GGUF file."""

    def __init__(self, path: str | Path, *, n_gpu_layers: int = 0, vocab_only: bool = False, exact: bool = False,
                 load_mtp: bool = False):
        self.path = Path(path)
        self.info = read_info(self.path)  # clear errors for missing / not GGUF / truncated files
        ensure_backend()
        params = C.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        params.vocab_only = vocab_only
        # Exact mode: no repacked weight buffers. ggml's repacked GEMM kernels (CPU_REPACK) take
        # over from 4 rows up and accumulate in another order than the one-row path, so a greedy
        # near-tie could flip with the batch shape; without them every row is the same dot product.
        params.use_extra_bufts = not exact
        params.load_mtp = load_mtp  # its multi-token-prediction layers, for an MTP draft context (llama/mtp.py)
        self.exact = exact
        self.n_gpu_layers = n_gpu_layers
        self._exact_max_batch: int | None = None
        self._model = C.llama_model_load_from_file(str(self.path).encode(), params)
        if not self._model:
            raise ModelFileError(f"llama.cpp could not load {self.path}: {last_llama_error()}")
        self._vocab = C.llama_model_get_vocab(self._model)
        self.n_vocab: int = C.llama_vocab_n_tokens(self._vocab)
        self.add_bos: bool = bool(C.llama_vocab_get_add_bos(self._vocab))
        self.bos_id: int = C.llama_vocab_bos(self._vocab)
        self.eos_id: int = C.llama_vocab_eos(self._vocab)
        self.n_ctx_train: int = C.llama_model_n_ctx_train(self._model)
        self._piece_cache: dict[int, bytes] = {}
        self._max_token_bytes: int | None = None
        self._special_texts: SpecialTexts | None = None
        self._eog = np.array([C.llama_vocab_is_eog(self._vocab, t) for t in range(self.n_vocab)], dtype=bool)

    @property
    def name(self) -> str:
        return self.info.name or self.path.stem

    @property
    def exact_max_batch(self) -> int:
        """The most rows a decode may hold in exact mode with each row's logits the same as its
        one-row decode: EXACT_MAX_BATCH, or 1 where the weight types make batches sum otherwise
        (see llama/exact_rows.py). Read from the file's tensor directory on first use."""
        if self._exact_max_batch is None:
            self._exact_max_batch = exact_max_batch(self.path, EXACT_MAX_BATCH)
        return self._exact_max_batch

    def close(self) -> None:
        if getattr(self, "_model", None):
            C.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:
        self.close()

    # --- vocabulary -----------------------------------------------------------------------

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = True,
                 max_tokens: int | None = None, stop: Callable[[], bool] | None = None) -> list[int]:
        """`max_tokens`: a text that certainly yields more tokens is refused before tokenizing (a
        10 MB line once took 2.2 GB on its way to the context-overflow error; a text holding more
        special tokens than that is refused too). The work is linear in the text: one holding many
        special tokens goes to llama.cpp in pieces (special_text.py), and `stop()` is asked between
        pieces; when it says True, Stopped is raised."""
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as e:  # a lone surrogate: undecodable bytes in argv, or JSON's \ud800
            raise SpecllamaError(f"the text is not valid UTF-8 (character {e.start + 1} is an undecodable byte "
                                 "or a lone surrogate); give the prompt as UTF-8 text") from None
        if max_tokens is not None:
            self._refuse_certainly_too_long(len(data), max_tokens)
        pieces = self._pieces(text, len(data), parse_special, max_tokens)
        if pieces is None:
            return self._tokenize_bytes(data, add_special, parse_special)
        tokens = [self.bos_id] if add_special and self.add_bos and self.bos_id >= 0 else []
        for piece in pieces:
            if stop is not None and stop():
                raise Stopped
            tokens += self._tokenize_bytes(piece.encode("utf-8"), False, parse_special)
        if add_special and C.llama_vocab_get_add_eos(self._vocab) and self.eos_id >= 0:
            tokens.append(self.eos_id)
        return tokens

    def _pieces(self, text: str, n_bytes: int, parse_special: bool, max_tokens: int | None) -> list[str] | None:
        """`text` cut before its special tokens when llama.cpp's search over it whole would cost
        much (None: tokenize it whole). Only for BPE vocabularies, whose tokenizer keeps no state
        from one fragment to the next (SentencePiece's adds a space after a special token: likely
        the same, but no such model is at hand to check it against)."""
        if n_bytes < SPLIT_FROM_BYTES or C.llama_vocab_type(self._vocab) != C.LLAMA_VOCAB_TYPE_BPE:
            return None
        try:
            starts = self.special_texts.starts(text, parse_special, most=max_tokens)
        except TooManySpecialTokens as e:
            raise ContextOverflowError(
                f"the prompt holds more than {e.count - 1} special-token texts (such as <|im_end|>), each one token, "
                f"more than the {max_tokens} tokens the context holds: shorten it") from None
        if not self.special_texts.overlap_free or len(starts) * n_bytes <= SPLIT_WORK:
            return None
        return split_at(text, starts)

    def _tokenize_bytes(self, data: bytes, add_special: bool, parse_special: bool) -> list[int]:
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

    @property
    def special_texts(self) -> SpecialTexts:
        """The vocabulary's special-token texts (control, user-defined), read once."""
        if self._special_texts is None:
            wanted = C.LLAMA_TOKEN_ATTR_CONTROL | C.LLAMA_TOKEN_ATTR_USER_DEFINED | C.LLAMA_TOKEN_ATTR_UNKNOWN
            tokens = []
            for token in range(self.n_vocab):
                attr = C.llama_vocab_get_attr(self._vocab, token)
                if attr & wanted:
                    try:  # a text that is not UTF-8 cannot occur in a str: nothing to find
                        tokens.append((C.llama_vocab_get_text(self._vocab, token).decode("utf-8"), attr))
                    except UnicodeDecodeError:
                        pass
            self._special_texts = SpecialTexts(tokens)
        return self._special_texts

    def _refuse_certainly_too_long(self, n_bytes: int, max_tokens: int) -> None:
        """Every token stands for at most `max_token_bytes` bytes of input, so a text of more than
        max_tokens * max_token_bytes bytes has more than max_tokens tokens. That holds for
        tokenizers that never drop input (BPE, SentencePiece); others (UGM collapses whitespace,
        WPM strips accents) are left to the token count. Twice the bound covers normalisation that
        composes characters; the refusal can then never hit a prompt that would fit."""
        if n_bytes <= max_tokens * 16:  # cheap pre-check: no vocabulary scan for ordinary prompts
            return
        if C.llama_vocab_type(self._vocab) not in (C.LLAMA_VOCAB_TYPE_SPM, C.LLAMA_VOCAB_TYPE_BPE):
            return
        if n_bytes > 2 * max_tokens * self.max_token_bytes:
            raise ContextOverflowError(
                f"the prompt is {n_bytes:,} bytes, far more than {max_tokens} tokens can hold (a token of "
                f"this vocabulary covers at most {self.max_token_bytes} bytes); raise --ctx, at most the "
                f"model's {self.n_ctx_train}, or shorten the prompt")

    @property
    def max_token_bytes(self) -> int:
        """The longest token's bytes (special tokens as their text), over the whole vocabulary."""
        if self._max_token_bytes is None:
            size = 256
            buf = ctypes.create_string_buffer(size)
            longest = 1
            for token in range(self.n_vocab):
                n = C.llama_token_to_piece(self._vocab, token, buf, size, 0, True)
                if n < 0:  # longer than the buffer: it says how long
                    size = -n
                    buf = ctypes.create_string_buffer(size)
                    n = C.llama_token_to_piece(self._vocab, token, buf, size, 0, True)
                longest = max(longest, n)
            self._max_token_bytes = longest
        return self._max_token_bytes

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

    @property
    def vocab_pointer(self):
        """The llama_vocab pointer, for libraries that read a llama.cpp vocabulary themselves
        (llguidance builds its grammar tokenizer from it)."""
        return self._vocab

    def is_eog(self, token: int) -> bool:
        return bool(self._eog[token]) if 0 <= token < self.n_vocab else False

    @property
    def eog_ids(self) -> list[int]:
        return [int(t) for t in np.flatnonzero(self._eog)]

    # --- chat -----------------------------------------------------------------------------

    @property
    def chat_template(self) -> str | None:
        return self.info.chat_template

    def render_chat(self, messages: list[dict], *, add_generation_prompt: bool = True, tools: list[dict] | None = None,
                    template_kwargs: dict | None = None) -> str:
        """The GGUF's own Jinja chat template, rendered as Transformers would (llama-cpp-python's
        Jinja2ChatFormatter), with `tools` (OpenAI's function list) handed to the template as
        Transformers does, and `template_kwargs` as further variables (enable_thinking,
        reasoning_effort). Without a template, the turns are joined as plain text."""
        if not self.chat_template:
            return "\n\n".join(m["content"] for m in messages) + ("\n\n" if add_generation_prompt else "")
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        bos = self.token_text(self.bos_id) if self.bos_id >= 0 else ""
        eos = self.token_text(self.eos_id) if self.eos_id >= 0 else ""
        formatter = Jinja2ChatFormatter(self.chat_template, eos_token=eos, bos_token=bos,
                                        add_generation_prompt=add_generation_prompt)
        try:
            return formatter(messages=messages, tools=tools or None, **(template_kwargs or {})).prompt
        except Exception as e:  # a broken template in a user's GGUF is their data, not our bug
            raise SpecllamaError(f"the chat template of {self.path.name} failed to render: {e}") from None

    @functools.cached_property
    def tool_call_format(self) -> str | None:
        """How the chat template has the model call tools: None when it puts no tool list into the
        prompt (found by rendering a probe tool whose name must appear, as llama.cpp finds template
        capabilities), "hermes" when it asks for <tool_call> JSON (Qwen2.5, Qwen3, Hermes), else
        "other" (a format the server does not parse). A template that ignores `tools` would drop
        them silently, so a server refuses them instead."""
        probe = "specllama_probe_tool_7f3a"
        tool = {"type": "function", "function": {"name": probe, "description": "", "parameters": {"type": "object"}}}
        try:
            text = self.render_chat([{"role": "user", "content": "x"}], tools=[tool])
        except SpecllamaError:
            return None
        if probe not in text:
            return None
        dialect = self.dialect
        return dialect.name if dialect is not None and dialect.regions else "other"

    @functools.cached_property
    def dialect(self):
        """How the template has the model write thinking and tool calls (dialects/), found
        from the template's text; None when it names no dialect known here."""
        from specllama.dialects import detect

        return detect(self.chat_template)

    @functools.cached_property
    def shown_controls(self) -> frozenset[int]:
        """Control tokens the answer's text shows: its dialect's markers that are one control token
        each (Llama's <|python_tag|>, Mistral's [TOOL_CALLS], harmony's <|channel|>), which llama.cpp
        leaves out of a token's text unless asked, as llama-server renders its preserved tokens. The
        parser needs them; every other control token (an end of turn) stays unseen."""
        dialect = self.dialect
        shown = set()
        for marker in dialect.markers if dialect is not None else ():
            try:
                tokens = self.tokenize(marker, add_special=False, parse_special=True)
            except SpecllamaError:
                continue
            if len(tokens) == 1 and self.piece(tokens[0]) != marker.encode() \
                    and self.piece(tokens[0], special=True) == marker.encode():
                shown.add(tokens[0])
        return frozenset(shown)

    @functools.cached_property
    def thinks(self) -> bool:
        """The template holds its dialect's reasoning markers (Qwen3's does, Qwen2.5's does not)."""
        dialect = self.dialect
        return bool(dialect and dialect.think and self.chat_template
                    and (dialect.think[0] in self.chat_template or dialect.think[1] in self.chat_template))

    def prompt_tokens(self, prompt: str, system: str | None = None, *, max_tokens: int | None = None) -> list[int]:
        """One user turn (after an optional system message), templated and tokenized. `max_tokens`
        (the context size) refuses a prompt that certainly cannot fit before tokenizing it."""
        messages = [{"role": "system", "content": system}] if system else []
        return self.chat_tokens(messages + [{"role": "user", "content": prompt}], max_tokens=max_tokens)

    def chat_tokens(self, messages: list[dict], *, add_generation_prompt: bool = True,
                    max_tokens: int | None = None, stop: Callable[[], bool] | None = None,
                    tools: list[dict] | None = None, continue_last: bool = False,
                    template_kwargs: dict | None = None) -> list[int]:
        """The conversation templated and tokenized; `max_tokens` and `stop` as for tokenize().
        `tools` go to the template; `continue_last`: the last message is the start of the
        assistant's answer (a prefill), continued rather than closed: the turns before it are
        templated with the assistant's opening and its text follows as plain text (what llama-server
        does), so the model writes on from its last character."""
        if continue_last:
            prefix = self.chat_tokens(messages[:-1], max_tokens=max_tokens, stop=stop, tools=tools,
                                      template_kwargs=template_kwargs)
            text = messages[-1].get("content") or ""
            return prefix + (self.tokenize(text, add_special=False, parse_special=False, max_tokens=max_tokens,
                                           stop=stop) if text else [])
        text = self.render_chat(messages, add_generation_prompt=add_generation_prompt, tools=tools,
                                template_kwargs=template_kwargs)
        if max_tokens is not None:
            self._refuse_certainly_too_long(len(text.encode("utf-8", "surrogatepass")), max_tokens)
        if any(self._holds_control_text(m.get("content")) for m in messages):
            tokens = self._tokenize_turns(text, messages, add_generation_prompt, max_tokens, stop, tools, template_kwargs)
        else:  # the common case, tokenized whole exactly as llama.cpp's own server does
            tokens = self.tokenize(text, add_special=False, max_tokens=max_tokens, stop=stop)
        # The template writes BOS itself when it wants one; add it only if the model needs it and
        # the template did not, so it is never doubled.
        if self.add_bos and self.bos_id >= 0 and (not tokens or tokens[0] != self.bos_id):
            tokens.insert(0, self.bos_id)
        return tokens

    # --- what users wrote is text, what the template wrote may be control tokens --------------
    # A message holding "<|im_end|>\n<|im_start|>system" must not open a system turn: its text is
    # tokenized with parse_special off (llama.cpp's switch), the template's own text with it on.

    def _holds_control_text(self, content: object) -> bool:
        """A plain search for control-token texts: tokenizing it both ways to compare, as this
        once did, cost the square of its size in llama.cpp (special_text.py)."""
        return isinstance(content, str) and bool(content) and self.special_texts.holds_control(content)

    def _tokenize_turns(self, text: str, messages: list[dict], add_generation_prompt: bool,
                        max_tokens: int | None, stop: Callable[[], bool] | None, tools: list[dict] | None,
                        template_kwargs: dict | None = None) -> list[int]:
        """`text` (the rendered chat) tokenized piece by piece: each message's content as text,
        the template's text between them with its special tokens."""
        # private-use marks, in no message; an empty content stays empty (a template may test it)
        marks = [f"\ue000{i}\ue001" if m.get("content") else "" for i, m in enumerate(messages)]
        marked = self.render_chat([{**m, "content": mark} for m, mark in zip(messages, marks)],
                                  add_generation_prompt=add_generation_prompt, tools=tools, template_kwargs=template_kwargs)
        pieces: list[tuple[str, bool]] = []  # (text, is a message's content)
        rest = marked
        for message, mark in zip(messages, marks):
            if not mark:
                continue
            before, found, rest = rest.partition(mark)
            if not found or mark in rest:
                pieces = []
                break
            pieces += [(before, False), (message["content"], True)]
        pieces.append((rest, False))
        if "".join(piece for piece, _ in pieces) != text:  # the template rewrites messages: no clean split
            raise SpecllamaError(f"a message holds the text of a control token (such as an end-of-turn marker), "
                                 f"and the chat template of {self.path.name} changes messages, so it cannot be "
                                 "kept apart as plain text; remove the marker from the message")
        tokens: list[int] = []
        for piece, is_content in pieces:
            if piece:
                tokens += self.tokenize(piece, add_special=False, parse_special=not is_content, max_tokens=max_tokens,
                                        stop=stop)
        return tokens


class StreamDecoder:
    """Token ids -> text pieces, holding back bytes of a UTF-8 character split across tokens."""

    def __init__(self, model: GGUFModel):
        self._model = model
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._shown = getattr(model, "shown_controls", frozenset())  # tests' fake models have no vocabulary

    def feed(self, token: int) -> str:
        return self._utf8.decode(self._model.piece(token, special=token in self._shown))

    def flush(self) -> str:
        """The end of the text. Bytes still held back there are a character cut short (max_tokens
        or the context ended the answer inside it): they are dropped, as llama-server does, not
        turned into U+FFFD. Invalid bytes elsewhere were already replaced as they came."""
        self._utf8.reset()
        return ""


