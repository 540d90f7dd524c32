"""canitoolcall's offline fixtures replayed through specllama's adapter (canitoolcall_adapter.py),
in this process, with canitoolcall's own worker, chunking and checks: the test suite's conformance
test and scripts/canitoolcall_table.py (docs/serve.md's table) both read these results."""

from __future__ import annotations

import collections
from dataclasses import dataclass

from canitoolcall.adapters.worker import replay
from canitoolcall.chunking import parse_strategies
from canitoolcall.fixtures import load_fixtures
from canitoolcall.results import CaseResult, Status
from canitoolcall.runner import evaluate, family_for

from tests.support.canitoolcall_adapter import SpecllamaAdapter

# canitoolcall's default strategies, plus character splits (synthetic: checked, never counted in a
# case's status, as canitoolcall rules; stream == whole is asserted on them all the same).
STRATEGIES = ("one", "special", "token", "rand:1:8", "rand:2:8", "rand:3:8", "rand:4:8", "rand:5:8",
              "char:1", "char:2", "char:3")
SYNTHETIC = ("char:1", "char:2", "char:3")
STREAM_CHECKS = ("stream_equals_nonstream", "split_invariance")


@dataclass
class FamilyResult:
    family: str
    cases: list[CaseResult]

    def count(self, status: Status) -> int:
        return sum(1 for c in self.cases if c.status is status)

    @property
    def supported(self) -> int:
        return len(self.cases) - self.count(Status.UNSUPPORTED)

    def failing(self) -> set[str]:
        return {c.fixture_id for c in self.cases if c.status in (Status.FAIL, Status.ERROR)}

    def stream_differences(self) -> list[str]:
        """Every case and strategy whose stream differs from the whole answer or from another split,
        synthetic strategies included."""
        return [f"{c.fixture_id} [{row.strategy}] {row.check}: {row.detail}" for c in self.cases for row in c.checks
                if row.check in STREAM_CHECKS and row.status is Status.FAIL]

    def unsupported_reasons(self) -> dict[str, int]:
        return dict(collections.Counter(c.reason for c in self.cases if c.status is Status.UNSUPPORTED))


def replay_families(families: list[str] | None = None) -> dict[str, FamilyResult]:
    adapter = SpecllamaAdapter()
    strategies = parse_strategies(list(STRATEGIES))
    out: dict[str, FamilyResult] = {}
    for fixture in load_fixtures():
        if families is not None and fixture.family not in families:
            continue
        family = family_for(fixture)
        # include_observed "all": every row of every check is kept, stream checks on synthetic splits too
        case = evaluate(fixture, family, replay(adapter, fixture, family, strategies), "all", synthetic=SYNTHETIC)
        out.setdefault(fixture.family, FamilyResult(fixture.family, [])).cases.append(case)
    return out
