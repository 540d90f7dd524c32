"""Counts what requests build: draft policies and grammar guides (a compiled grammar's state), with
the thread that built each, for tests/integration/test_prepared_once.py: in this process (`install`) or in a
`specllama serve` subprocess (count_hooks/sitecustomize.py, which writes one line per build)."""

from __future__ import annotations

import threading
import weakref
from typing import Callable

Record = Callable[[str, str, str], None]  # (what: "policy" | "guide", its class name, the building thread's name)


def _classes(root: type) -> list[type]:
    found, todo = [], [root]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def install(record: Record, set_attr: Callable[[object, str, object], None] = setattr) -> None:
    """Wrap the __init__ of every draft policy class and of the grammar's Guide so that each object
    built is recorded once (a subclass's __init__ calling its parent's counts once)."""
    from specllama.decoding import policy  # noqa: F401, PLC0415 (registers every policy class)
    from specllama.decoding.grammar import Guide  # noqa: PLC0415
    from specllama.decoding.policy.base import PolicyBase  # noqa: PLC0415

    counted: weakref.WeakSet = weakref.WeakSet()

    def wrap(cls: type, what: str) -> None:
        original = cls.__dict__.get("__init__", object.__init__)

        def counting_init(self, *args, **kwargs):
            if self not in counted:
                counted.add(self)
                record(what, type(self).__name__, threading.current_thread().name)
            original(self, *args, **kwargs)

        set_attr(cls, "__init__", counting_init)

    for cls in _classes(PolicyBase):
        wrap(cls, "policy")
    wrap(Guide, "guide")
