"""The chat history, rendered with the GGUF's own chat template.

Every turn sends the whole conversation's tokens; the engine keeps the longest prefix already in
the target's KV cache (`DecodeContext.reuse_prefix`), so only the new turn is decoded. A failed
turn is removed, so the history always matches what the model has actually answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Conversation:
    system: str | None = None
    messages: list[dict] = field(default_factory=list)  # {"role": "user" | "assistant", "content": str}

    def ask(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def answer(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    def withdraw_question(self) -> str | None:
        """Drops an unanswered last question (its answer failed); returns its text."""
        if self.messages and self.messages[-1]["role"] == "user":
            return self.messages.pop()["content"]
        return None

    def withdraw_answer(self) -> str | None:
        """Drops the last answer (to generate another); returns its text."""
        if self.messages and self.messages[-1]["role"] == "assistant":
            return self.messages.pop()["content"]
        return None

    def withdraw_turn(self) -> str | None:
        """Drops the last question and its answer, if any (to edit and resend it); returns the question."""
        self.withdraw_answer()
        return self.withdraw_question()

    @property
    def last_role(self) -> str | None:
        return self.messages[-1]["role"] if self.messages else None

    def for_template(self) -> list[dict]:
        head = [{"role": "system", "content": self.system}] if self.system else []
        return head + self.messages

    @property
    def last_answer(self) -> str | None:
        for message in reversed(self.messages):
            if message["role"] == "assistant":
                return message["content"]
        return None

    def clear(self) -> None:
        self.messages.clear()
