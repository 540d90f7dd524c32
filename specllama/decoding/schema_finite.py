"""Whether a JSON schema has any finite instance: a schema whose every value must contain another
value of itself (`a -> b -> a` through required properties, an array whose `minItems: 1` items are
the array again) has none, and a grammar built from it can only loop until a limit of the grammar
engine stops it mid-answer (issue 41: "Too many items", or an empty answer that claimed success).

The check is the grammar's productivity, on the schema: a schema is satisfiable when some finite
value meets it, where a `$ref` met again on the path being checked counts as unsatisfiable (a
finite value's shortest derivation never needs a schema inside itself). It is conservative: only
what it understands (required properties, minItems, allOf / anyOf / oneOf, local $refs, `false`)
can make a schema unsatisfiable; anything else is taken as satisfiable and left to the grammar
engine, and a schema too large to walk within WORK_LIMIT steps is taken as satisfiable too.
"""

from __future__ import annotations

WORK_LIMIT = 20_000  # schema nodes visited at most; past it the schema is assumed satisfiable


class _TooBig(Exception):
    pass


def unsatisfiable_ref(schema: object) -> str | None:
    """None when the schema may have a finite instance; else the $ref that cannot end ('#': the
    schema itself), or "" when no value can meet it without any recursion (a required `false`)."""
    walk = _Walk(schema)
    try:
        return None if walk.ok(schema, ()) else (walk.culprit or "")
    except (_TooBig, RecursionError):
        return None


class _Walk:
    def __init__(self, root: object):
        self.root = root
        self.work = 0
        self.culprit: str | None = None

    def resolve(self, ref: str) -> object:
        if ref == "#":
            return self.root
        if not ref.startswith("#/"):
            return True  # remote or anchored: not ours to judge
        node = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return True
        return node

    def ok(self, node: object, path: tuple[str, ...]) -> bool:
        self.work += 1
        if self.work > WORK_LIMIT:
            raise _TooBig
        if node is False:
            return False
        if not isinstance(node, dict):
            return True
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in path:
                self.culprit = self.culprit or ref
                return False
            if not self.ok(self.resolve(ref), path + (ref,)):
                return False
        for key, need_all in (("allOf", True), ("anyOf", False), ("oneOf", False)):
            parts = node.get(key)
            if isinstance(parts, list) and parts:
                results = (self.ok(p, path) for p in parts)
                if not (all(results) if need_all else any(results)):
                    return False
        kinds = node.get("type")
        kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else None
        if not kinds:
            return True
        return any(self._kind_ok(node, kind, path) for kind in kinds)

    def _kind_ok(self, node: dict, kind: object, path: tuple[str, ...]) -> bool:
        if kind == "object":
            properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
            required = node.get("required") if isinstance(node.get("required"), list) else []
            extra = node.get("additionalProperties", True)
            for name in required:
                if name in properties:
                    if not self.ok(properties[name], path):
                        return False
                elif not node.get("patternProperties") and not self.ok(extra, path):
                    return False
            return True
        if kind == "array":
            least = node.get("minItems", 0)
            if not isinstance(least, int) or least <= 0:
                return True
            prefix = node.get("prefixItems")
            prefix = prefix if isinstance(prefix, list) else node.get("items") if isinstance(node.get("items"), list) else []
            for item in prefix[:least]:
                if not self.ok(item, path):
                    return False
            items = node.get("items")
            if least > len(prefix) and isinstance(items, (dict, bool)):
                return self.ok(items, path)
            return True
        return True
