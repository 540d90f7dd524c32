"""Chat templates the tests write into tiny models."""

# Qwen3-Thinking's shape: ChatML, the tools in a system turn asking for <tool_call> JSON, the answer
# opened with "<think>\n" (closed at once when enable_thinking is false), earlier thinking kept.
QWEN3_STYLE = """\
{%- if tools %}<|im_start|>system
# Tools
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}Call a tool as <tool_call>
{"name": ..., "arguments": ...}
</tool_call><|im_end|>
{% endif %}
{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.role == 'assistant' and m.reasoning_content %}<think>
{{ m.reasoning_content }}
</think>

{% endif %}{{ m.content }}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% else %}<think>
{% endif %}{% endif %}"""
