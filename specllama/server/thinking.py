"""What a request says about thinking, for the chat template: `chat_template_kwargs` (vLLM's and
llama-server's field; `{"enable_thinking": false}` turns Qwen3's thinking off) and OpenAI's
`reasoning_effort` (GPT-OSS's template reads it as it is; "none" also turns thinking off where the
template has the switch). Templates that know neither ignore them."""

from __future__ import annotations

from specllama.server.api_errors import invalid

EFFORTS = ("none", "minimal", "low", "medium", "high")
# Names the template is rendered with by the server itself: a client may not replace them.
RESERVED = frozenset({"messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "raise_exception",
                      "functions", "function_call", "tool_choice", "strftime_now"})


def template_kwargs(body: dict) -> dict | None:
    """The variables the request hands the chat template (None: none)."""
    kwargs = body.get("chat_template_kwargs")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise invalid("'chat_template_kwargs' must be an object such as {\"enable_thinking\": false}",
                      "chat_template_kwargs")
    for key in kwargs:
        if key in RESERVED:
            raise invalid(f"'chat_template_kwargs.{key}' is set by the server and cannot be given",
                          f"chat_template_kwargs.{key}")
    kwargs = dict(kwargs)
    if "enable_thinking" in kwargs and not isinstance(kwargs["enable_thinking"], bool):
        raise invalid("'chat_template_kwargs.enable_thinking' must be true or false",
                      "chat_template_kwargs.enable_thinking")
    effort = body.get("reasoning_effort")
    if effort is not None:
        if effort not in EFFORTS:
            raise invalid(f"'reasoning_effort' must be one of {', '.join(EFFORTS)}, got {effort!r}", "reasoning_effort")
        kwargs.setdefault("reasoning_effort", effort)
        if effort == "none":
            kwargs.setdefault("enable_thinking", False)
    return kwargs or None
