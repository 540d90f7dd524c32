"""OpenAI request bodies -> what the engine runs: the prompt's tokens and a GenerationConfig.

Fields the server uses are checked here, each wrong one answered with a 400 that names it (OpenAI's
`param`); fields it does not use (user, presence_penalty, logit_bias, ...) are ignored, as llama.cpp's
and vLLM's servers do, so clients that always send them work. Features it cannot honour (n > 1,
images, tools with a template that cannot render them) are refused rather than silently dropped.

`response_format` ({"type": "text" | "json_object" | "json_schema", "json_schema": {"name", "schema",
"strict"}}) becomes the request's Constraint (decoding/constraint.py): the grammar engine enforces it
token by token; a schema keyword it cannot enforce is a 400 naming the keyword.

Omitted sampling fields take the server's command-line values (`serve --temp 0.7` sets the default);
per request, two extra fields choose the speculation (documented in docs/serve.md):
  "drafter": "auto" | "suffix" | "model" | "mtp" | "none"   and   "k": draft tokens per step, or "auto".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple, Protocol

from specllama.decoding.constraint import Constraint, check_constraint
from specllama.decoding.limits import SettingError, draft_length
from specllama.decoding.request import DRAFTERS, GenerationConfig, drafter_name
from specllama.decoding.sampling import SamplingParams
from specllama.dialects import BY_NAME, Dialect
from specllama.errors import SpecllamaError
from specllama.server.api_errors import APIError, invalid
from specllama.server.dialect_grammars import call_constraint
from specllama.server.ignored import note
from specllama.server.thinking import template_kwargs as thinking_kwargs
from specllama.server.tools import ToolUse, has_tool_turns, parse_tools, template_message

if TYPE_CHECKING:
    from specllama.decoding.prepared import Prepared

MAX_STOPS = 16
MAX_TOP_LOGPROBS = 20  # OpenAI's own limit
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
# Fields agent clients send that tune OpenAI's hosted service: ignored like every unused field, and
# said once at `serve -v` (ignored.py), so a user wondering why one has no effect finds out.
HOSTED_FIELDS = {
    "prompt_cache_key": "the server reuses a cached prompt prefix by itself, whatever the key",
    "store": "this server keeps no completions",
    "metadata": "only OpenAI's own records use it",
    "service_tier": "one tier here",
    "verbosity": "the model answers at its own length",
    "web_search_options": "no web search here: the model answers from the prompt alone",
}


class ChatTemplate(Protocol):
    """What parse_chat needs of the served model's chat template (exchange.SessionTemplate binds the Session)."""

    def tokens(self, messages: list[dict], tools: list[dict] | None, continue_last: bool,
               template_kwargs: dict | None = None) -> list[int]: ...

    def tool_call_format(self) -> str | None: ...  # None (no tools in the prompt), else the dialect's name or "other"

    def dialect(self) -> Dialect | None: ...  # how the model writes thinking and calls (dialects/)

    def thinks(self) -> bool: ...  # the template has reasoning markers: the answer's thinking is parsed

    def opens_thinking(self, messages: list[dict], tools: list[dict] | None, template_kwargs: dict | None) -> bool: ...

    def grammar_token(self, text: str) -> str: ...  # how a grammar names this text: <[id]> or a literal


@dataclass(frozen=True)
class Job:
    """One request, parsed: what to generate and how to answer."""

    prompt: list[int]
    config: GenerationConfig
    stream: bool
    include_usage: bool  # stream_options.include_usage: a last chunk with the usage
    tools: ToolUse | None = None  # the answer is parsed for tool calls when set (and its choice is not none)
    forced: str = ""  # the answer's start, written into the prompt (a forced tool call's opening)
    requested_max_tokens: int | None = None  # what the client asked for, when --max-tokens capped it
    top_logprobs: int | None = None  # None: no logprobs; else how many alternatives per token (0-20)
    dialect: Dialect | None = None  # how the model writes thinking and calls: the answer is parsed by it
    reasons: bool = False  # the template thinks: its reasoning markers are parsed out of the answer
    thinking: bool = False  # the prompt opened the thinking: the answer begins inside it
    prepared: Prepared | None = None  # the engine's check of it (policy, grammar): app.checked sets it, the engine admits it

    @property
    def parses_tools(self) -> bool:
        return self.tools is not None and self.tools.parses

    @property
    def tool_names(self) -> frozenset[str]:
        """The functions offered: a bare JSON call naming one of them is a call too (tool_calls.py)."""
        return frozenset(t["function"]["name"] for t in self.tools.tools) if self.tools is not None else frozenset()


@dataclass(frozen=True)
class ServedModel:
    """What requests are checked against: the model's names, the context, the server's defaults."""

    name: str  # the id /v1/models lists
    aliases: frozenset[str]  # other names a request may use (the file's name, the GGUF's own name)
    n_ctx: int
    defaults: GenerationConfig
    default_max_tokens: int | None  # --max-tokens: the most a request gets (None: until the context is full)
    drafters: tuple[str, ...]  # what a request may name
    n_vocab: int = 0  # token ids a raw prompt may hold: 0 to n_vocab - 1
    strict_model: bool = False  # --strict-model: another model id is a 404 (else one served model answers any)

    def check_model(self, body: dict) -> None:
        """One model is served, so by default any id is answered by it (llama-server ignores the
        field; tools hard-code ids such as gpt-4o or claude-sonnet-4); the answer's `model` says
        which model it was. --strict-model keeps OpenAI's 404 for another id."""
        model = body.get("model")
        if model is None:
            if not self.strict_model:
                return
            raise invalid(f"you must provide a model parameter (this server serves '{self.name}')", "model")
        if not isinstance(model, str):
            raise invalid("'model' must be a string", "model")
        if self.strict_model and model != self.name and model not in self.aliases:
            raise APIError(404, f"the model '{model}' does not exist: this server serves '{self.name}'",
                           param="model", code="model_not_found")


def parse_chat(body: object, served: ServedModel, template: ChatTemplate) -> Job:
    """POST /v1/chat/completions: the messages through the model's chat template, with the
    request's tools (tools.py); a last assistant message is continued (prefill), as llama-server does."""
    body = _object(body)
    chat = _chat_prompt(body, served, template)
    tools, dialect = chat.tools, chat.dialect
    job = _job(body, served, chat.prompt, "messages", chat=True)
    config = job.config
    if tools is not None:  # the response_format (config.constraint) is kept for an answer that is not a call
        constraint = call_constraint(tools, dialect, template.grammar_token, answer=config.constraint)
        config = replace(config, stop=config.stop + tools.stops(dialect), constraint=constraint)
    return replace(job, config=config, tools=tools, forced=chat.forced, dialect=dialect, reasons=chat.reasons,
                   thinking=chat.thinking)


def chat_prompt_tokens(body: object, served: ServedModel, template: ChatTemplate) -> int:
    """How many tokens the chat's prompt is, whatever its size (Anthropic's count_tokens: a client
    asks before sending, so a prompt longer than the context is counted, not refused)."""
    return len(_chat_prompt(_object(body), served, template).prompt)


class ChatPrompt(NamedTuple):
    tools: ToolUse | None  # the request's tools
    prompt: list[int]  # its prompt's tokens
    forced: str  # the forced start of its answer (written into the prompt)
    dialect: Dialect | None  # how the model writes thinking and calls
    reasons: bool  # the template thinks: its reasoning markers are parsed out of the answer
    thinking: bool  # the prompt opened the thinking: the answer begins inside it


def _chat_prompt(body: dict, served: ServedModel, template: ChatTemplate) -> ChatPrompt:
    served.check_model(body)
    for name, why in HOSTED_FIELDS.items():
        if body.get(name) is not None:
            note("/v1/chat/completions", f"'{name}' ignored", why)
    tools = parse_tools(body)
    messages = _messages(body.get("messages"))
    kwargs = thinking_kwargs(body)
    dialect = template.dialect()
    if tools is not None or has_tool_turns(messages):
        dialect = _check_tool_template(template.tool_call_format())
    reasons = dialect is not None and dialect.think is not None and template.thinks()
    continue_last = messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls")
    template_tools = tools.template_tools if tools else None
    thinking = reasons and not continue_last and template.opens_thinking(messages, template_tools, kwargs)
    forced = tools.opening(dialect) if tools is not None else ""
    if forced:  # the forced call's opening follows whatever the client prefilled
        if thinking:  # a call is certain: the thinking the prompt opened is closed first (by the forced text)
            forced = dialect.think[1] + "\n\n" + forced
        if continue_last:
            messages[-1] = {**messages[-1], "content": messages[-1]["content"] + forced}
        else:
            messages.append({"role": "assistant", "content": forced})
            continue_last = True
    prompt = template.tokens(messages, template_tools, continue_last, kwargs)
    return ChatPrompt(tools, prompt, forced, dialect, reasons, thinking)


def context_message(prompt_tokens: int, n_ctx: int) -> str:
    """A prompt over the context, said with both numbers and the option that fixes it. It begins as
    Anthropic's own does ("prompt is too long: N tokens > M maximum"), which Claude Code recognises
    (it offers /compact); the -c suggested leaves room for an answer."""
    room = 1 << max(prompt_tokens + 1024, 1).bit_length()
    return (f"prompt is too long: {prompt_tokens} tokens > {n_ctx} maximum (the context this server was started "
            f"with): start `specllama serve` with a larger context, e.g. -c {room} (--ctx), or shorten the prompt")


def _check_tool_template(tool_format: str | None) -> Dialect:
    if tool_format is None:
        raise invalid("this model's chat template has no tool support (it does not put a tool list into the prompt): "
                      "serve a model whose template does (Qwen2.5, Qwen3, Hermes), or send no tools", "tools")
    if tool_format not in BY_NAME:
        raise invalid("this model's chat template writes tool calls in a format this server does not parse (it parses "
                      f"{', '.join(BY_NAME)}: see docs/serve.md)", "tools")
    return BY_NAME[tool_format]


def parse_completion(body: object, served: ServedModel, tokenize_text) -> Job:
    """POST /v1/completions: a raw prompt (a string, a list of one string, or token ids), no template."""
    body = _object(body)
    served.check_model(body)
    if body.get("echo"):
        raise invalid("echo is not supported", "echo")
    if body.get("suffix") is not None:
        raise invalid("suffix (fill-in-the-middle) is not supported", "suffix")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise invalid("'prompt' is empty", "prompt")
        tokens = tokenize_text(prompt)
    elif isinstance(prompt, list) and prompt and all(_is_int(t) and 0 <= t < served.n_vocab for t in prompt):
        tokens = list(prompt)
    else:
        raise invalid("'prompt' must be a string, a list of one string, or a list of token ids from 0 to "
                      f"{served.n_vocab - 1} (several prompts in one request are not supported)", "prompt")
    best_of = body.get("best_of")
    if best_of is not None and best_of != 1:
        raise invalid("only best_of = 1 is supported (one completion is generated per request)", "best_of")
    return _job(body, served, tokens, "prompt", chat=False)


def _job(body: dict, served: ServedModel, prompt: list[int], prompt_param: str, chat: bool) -> Job:
    # Whether the prompt fits is the engine's check (app.checked), told with context_message.
    n = body.get("n", 1)
    if n is not None and n != 1:
        raise invalid("only n = 1 is supported", "n")
    stream = _flag(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise invalid("'stream_options' must be an object", "stream_options")
    include_usage = bool(options and _flag(options, "include_usage", param="stream_options.include_usage"))
    config, requested = _config(body, served, len(prompt))
    top = _logprobs(body, chat)
    return Job(prompt, replace(config, logprobs=top), stream, include_usage, requested_max_tokens=requested,
               top_logprobs=top)


def _logprobs(body: dict, chat: bool) -> int | None:
    """Chat: `logprobs: true` and `top_logprobs` 0-20. Completions (the legacy form): `logprobs: N`."""
    if chat:
        top = _optional(body, "top_logprobs", _is_int)
        if not _flag(body, "logprobs"):
            if top:
                raise invalid("'top_logprobs' needs 'logprobs': true", "top_logprobs")
            return None
        top = top or 0
    else:
        top = _optional(body, "logprobs", _is_int)
        if top is None:
            return None
    if not 0 <= top <= MAX_TOP_LOGPROBS:
        raise invalid(f"'{'top_logprobs' if chat else 'logprobs'}' must be from 0 to {MAX_TOP_LOGPROBS}",
                      "top_logprobs" if chat else "logprobs")
    return top


def _config(body: dict, served: ServedModel, prompt_tokens: int) -> tuple[GenerationConfig, int | None]:
    """The request's GenerationConfig, and the max_tokens it asked for when --max-tokens capped it."""
    base = served.defaults
    params = base.sampling
    max_tokens = _optional(body, "max_completion_tokens", _is_int)  # the newer name wins
    if max_tokens is None:
        max_tokens = _optional(body, "max_tokens", _is_int)
    requested = None
    if max_tokens is None:
        max_tokens = served.default_max_tokens or served.n_ctx
    elif max_tokens < 1:
        raise invalid("'max_tokens' must be at least 1", "max_tokens")
    elif served.default_max_tokens and max_tokens > served.default_max_tokens:  # --max-tokens is the server's cap
        requested, max_tokens = max_tokens, served.default_max_tokens
    # No answer outlives the context: a max_tokens of 10**9 ends where the context does ("length").
    max_tokens = max(1, min(max_tokens, served.n_ctx - prompt_tokens))
    seed = _optional(body, "seed", _is_int)
    if seed is not None and not -1 <= seed < 2**63:
        raise invalid("'seed' must be between 0 and 2**63 - 1 (or -1 for a random one)", "seed")
    # The field names are SamplingParams' own: it checks their types and ranges (decoding/limits.py).
    top_p = _given(body, "top_p", params.top_p)
    top_k = _given(body, "top_k", params.top_k)
    if top_p == 0 and not isinstance(top_p, bool):  # OpenAI accepts it: the smallest nucleus, the most likely token alone
        top_p, top_k = 1.0, 1
    try:
        sampling = SamplingParams(temperature=_given(body, "temperature", params.temperature), top_p=top_p, top_k=top_k,
                                  min_p=_given(body, "min_p", params.min_p),
                                  seed=params.seed if seed is None else (None if seed == -1 else seed))
    except SettingError as e:
        raise invalid(str(e), e.name) from None
    drafter = _optional(body, "drafter", lambda v: isinstance(v, str), base.drafter)
    drafter = drafter_name(drafter)
    if drafter not in served.drafters:
        loaded = ", ".join(served.drafters)
        why = "" if drafter in DRAFTERS else f"unknown drafter '{drafter}': "
        raise invalid(f"{why}this server's drafters are {loaded} (the model drafter needs the draft model "
                      "loaded: start the server with --draft or --drafter model)", "drafter")
    try:
        k = draft_length(body.get("k", base.k))
    except SettingError as e:
        raise invalid(str(e), e.name) from None
    constraint = _response_format(body.get("response_format"))
    try:
        return replace(base, max_tokens=max_tokens, sampling=sampling, drafter=drafter, k=k,
                       stop=_stops(body.get("stop"), base.stop), constraint=constraint), requested
    except SpecllamaError as e:
        raise invalid(str(e), e.name if isinstance(e, SettingError) else None) from None


def _response_format(value: object) -> Constraint | None:
    """OpenAI's response_format as a Constraint (None: free text). `strict` absent is false, as in
    OpenAI's API: schema keywords the engine cannot enforce are then ignored instead of refused."""
    if value is None:
        return None
    param = "response_format"
    if not isinstance(value, dict):
        raise invalid("'response_format' must be an object such as {\"type\": \"json_object\"}", param)
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        constraint = Constraint("json_object")
    elif kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, dict):
            raise invalid("'response_format.json_schema' must be an object with 'name' and 'schema'", f"{param}.json_schema")
        name = spec.get("name")
        if name is not None and not isinstance(name, str):
            raise invalid("'response_format.json_schema.name' must be a string", f"{param}.json_schema.name")
        schema = spec.get("schema", {})  # OpenAI's default: any JSON object
        if not isinstance(schema, dict):
            raise invalid("'response_format.json_schema.schema' must be a JSON schema object", f"{param}.json_schema.schema")
        strict = spec.get("strict") or False
        if not isinstance(strict, bool):
            raise invalid("'response_format.json_schema.strict' must be true or false", f"{param}.json_schema.strict")
        constraint = Constraint("json_schema", schema=schema or {"type": "object"}, strict=strict)
    else:
        raise invalid(f"'response_format.type' must be 'text', 'json_object' or 'json_schema', got {kind!r}", f"{param}.type")
    try:
        check_constraint(constraint)
    except SpecllamaError as e:
        raise invalid(str(e), param) from None
    return constraint


def _messages(messages: object) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise invalid("'messages' must be a non-empty array", "messages")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise invalid(f"{where} must be an object", where)
        role = message.get("role")
        role = ROLES.get(role) if isinstance(role, str) else None  # a list or object is no role (and unhashable)
        if role is None:
            raise invalid(f"{where}.role must be one of {', '.join(ROLES)}, got {message.get('role')!r}", f"{where}.role")
        content = _content(message.get("content"), role, f"{where}.content")
        out.append(template_message(message, role, content, where))
    return out


def _content(content: object, role: str, where: str) -> str:
    """A message's text: a string, or an array of text parts (what newer clients send)."""
    if isinstance(content, str):
        return content
    if content is None and role in ("assistant", "tool"):  # an assistant turn of tool calls alone
        return ""
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise invalid(f"{where}: only text parts are supported ({{\"type\": \"text\", \"text\": ...}})", where)
            texts.append(part["text"])
        return "\n".join(texts)  # as llama.cpp joins text parts: Qwen Code's <system-reminder> parts stay apart
    raise invalid(f"{where} must be a string or an array of text parts", where)


def _stops(stop: object, default: tuple[str, ...]) -> tuple[str, ...]:
    if stop is None:
        return default
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops) or len(stops) > MAX_STOPS:
        raise invalid(f"'stop' must be a string or an array of at most {MAX_STOPS} strings", "stop")
    return tuple(s for s in stops if s)


def _object(body: object) -> dict:
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object")
    return body


def _refuse_unsupported(body: dict, names: tuple[str, ...], message: str) -> None:
    for name in names:
        if body.get(name):  # null, false and [] are what clients send when they do not use it
            raise invalid(message, name)


def _flag(body: dict, name: str, param: str | None = None) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid(f"'{param or name}' must be true or false", param or name)
    return value


def _given(body: dict, name: str, default):
    """The body's value, or the server's default where it is absent or null."""
    value = body.get(name)
    return default if value is None else value


def _optional(body: dict, name: str, valid, default=None):
    value = body.get(name)
    if value is None:
        return default
    if not valid(value):
        kind = "a whole number" if valid is _is_int else "a number" if valid is _is_number else "a string"
        raise invalid(f"'{name}' must be {kind}, got {value!r}", name)
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) and math.isfinite(value)
