"""Every speed figure in README.md and docs/ points to the measurement it came from, and every
measurement the docs name exists.

A figure is a speed ratio (`1.07x`) or a throughput (`21.0 tok/s`); a goal (`goal 1.3x`) is not.
A paragraph, list item or table holding one must name a file under bench/measured/, itself or in
one of the two blocks before it (a table's introduction) or the block right after (its caption).
"""

from __future__ import annotations

import re

from tests.support.docs_commands import DOCS, REPO

FIGURE = re.compile(r"(?<![\w.])(?<!goal )(?<!Goal )\d+\.\d+x\b|\d[\d,.]*\s?tok/s")
MEASURED = re.compile(r"bench/measured/([\w-]+(?:\.[\w-]+)*?)(?:\.(?:md|json|txt|\*))?(?=[^\w.-]|\.\s|\.$|$)")


def blocks(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each blank-line-separated block outside fenced code."""
    out, current, start, fenced = [], [], 1, False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not line.strip() and not fenced:
            if current:
                out.append((start, "\n".join(current)))
            current, start = [], number + 1
        elif not fenced and not line.lstrip().startswith("```"):
            current.append(line)
    if current:
        out.append((start, "\n".join(current)))
    return out


def test_every_figure_names_its_measurement():
    missing = []
    for doc in DOCS:
        found = blocks(doc.read_text())
        for i, (line, block) in enumerate(found):
            if not FIGURE.search(block):
                continue
            near = [found[j][1] for j in range(max(0, i - 2), min(len(found), i + 2))]
            if not any(MEASURED.search(b) for b in near):
                missing.append(f"{doc.relative_to(REPO)}:{line}: {FIGURE.findall(block)[:4]} without a bench/measured/ file")
    assert not missing, "\n".join(missing)


def test_every_measurement_the_docs_name_exists():
    named = {(doc.relative_to(REPO), m.group(1)) for doc in DOCS for m in MEASURED.finditer(doc.read_text())}
    assert len(named) >= 5
    absent = [f"{doc}: bench/measured/{name}" for doc, name in sorted(named)
              if not any((REPO / "bench" / "measured").glob(name + "*"))]
    assert not absent, "\n".join(absent)
