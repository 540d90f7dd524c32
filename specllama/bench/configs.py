"""Benchmark configurations: "none;model:k=2;suffix:k=auto;auto:k=auto;model:k=4,verify=stairs".

Grammar: configurations separated by `;`, each `DRAFTER[:OPTION=VALUE[,OPTION=VALUE...]]` with
DRAFTER one of none | auto | suffix | model | mtp ("lookup" is read as suffix) and options k (int),
verify (causal | stairs), p_min (float).
Each parses into a small frozen dataclass whose `label` is the canonical spelling, used as the key
in every table and JSON record.
"""

from __future__ import annotations

from dataclasses import dataclass

from specllama.decoding.limits import draft_length
from specllama.decoding.request import VERIFY_MODES, GenerationConfig, drafter_name
from specllama.decoding.sampling import SamplingParams
from specllama.errors import SpecllamaError

DEFAULT_CONFIGS = "none;auto:k=auto;suffix:k=auto;model:k=2;model:k=4;model:k=4,verify=stairs"
DRAFTER_KINDS = ("none", "auto", "suffix", "model", "mtp")  # mtp: the target's own MTP head (llama/mtp.py)
DEFAULT_K = "auto"


class BenchConfigError(SpecllamaError):
    """A --configs string that does not parse."""


@dataclass(frozen=True)
class BenchConfig:
    drafter: str = "none"
    k: int | str = 0  # or "auto"
    verify: str = "causal"
    p_min: float = 0.0

    @property
    def is_baseline(self) -> bool:
        return self.drafter == "none"

    def generation(self, max_tokens: int = 512, sampling: SamplingParams | None = None) -> GenerationConfig:
        """The request this configuration runs (its K read through GenerationConfig.fixed_k)."""
        return GenerationConfig(max_tokens=max_tokens, sampling=sampling or SamplingParams(), drafter=self.drafter,
                                k=self.k, p_min=self.p_min, stop=(), verify=self.verify)

    @property
    def label(self) -> str:
        if self.is_baseline:
            return "none"
        parts = [f"k={self.k}"]
        if self.verify != "causal":
            parts.append(f"verify={self.verify}")
        if self.p_min:
            parts.append(f"p_min={self.p_min:g}")
        return f"{self.drafter}:" + ",".join(parts)


BASELINE = BenchConfig()


def parse_configs(text: str) -> list[BenchConfig]:
    """The configurations in order, the `none` baseline first (added when missing, since every
    speedup is measured against it). Duplicates are refused: they would share one table row."""
    configs = [parse_config(part) for part in text.split(";") if part.strip()]
    if not configs:
        raise BenchConfigError("--configs is empty: give e.g. \"none;model:k=4\"")
    labels = [c.label for c in configs]
    dupes = sorted({lb for lb in labels if labels.count(lb) > 1})
    if dupes:
        raise BenchConfigError(f"--configs names {', '.join(dupes)} more than once")
    return [BASELINE] + [c for c in configs if not c.is_baseline]


def parse_config(text: str) -> BenchConfig:
    spec = text.strip()
    drafter, _, options = spec.partition(":")
    drafter = drafter_name(drafter.strip())
    if drafter not in DRAFTER_KINDS:
        raise BenchConfigError(f"config '{spec}': unknown drafter '{drafter}' (choose {', '.join(DRAFTER_KINDS)})")
    values: dict[str, str] = {}
    for item in filter(None, (o.strip() for o in options.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not value.strip():
            raise BenchConfigError(f"config '{spec}': expected OPTION=VALUE, got '{item}'")
        key = key.strip().replace("-", "_")
        if key in values:  # "k=2,k=3": which one was meant? Refuse rather than keep the last silently.
            raise BenchConfigError(f"config '{spec}': option {key} is given more than once")
        values[key] = value.strip()

    unknown = set(values) - {"k", "verify", "p_min"}
    if unknown:
        raise BenchConfigError(f"config '{spec}': unknown option {', '.join(sorted(unknown))} (known: k, verify, p_min)")
    if drafter == "none":
        if values:
            raise BenchConfigError(f"config '{spec}': 'none' takes no options (it is plain decoding)")
        return BASELINE
    # The command line's default (run, chat and batch: -k auto), so "auto" here is what "auto"
    # is everywhere else; the label always spells k out.
    k = _parse_k(spec, values.get("k", DEFAULT_K))
    verify = values.get("verify", "causal")
    if verify not in VERIFY_MODES:
        raise BenchConfigError(f"config '{spec}': verify must be one of {', '.join(VERIFY_MODES)}")
    p_min = _parse_float(spec, "p_min", values.get("p_min", "0"))
    if not 0.0 <= p_min < 1.0:
        raise BenchConfigError(f"config '{spec}': p_min must be in [0, 1)")
    return BenchConfig(drafter=drafter, k=k, verify=verify, p_min=p_min)


def _parse_k(spec: str, value: str) -> int | str:
    if value == "auto":
        return value  # chosen each step from the measured cost curve (specllama/adaptive_k.py)
    try:
        k = draft_length(int(value))
    except ValueError:
        raise BenchConfigError(f"config '{spec}': k must be a whole number, got '{value}'") from None
    except SpecllamaError as e:
        raise BenchConfigError(f"config '{spec}': {e}") from None
    if k == 0:  # a valid K elsewhere (no drafts), but here the same run as the baseline, under another name
        raise BenchConfigError(f"config '{spec}': k=0 drafts nothing: that is the 'none' configuration")
    return k


def _parse_float(spec: str, name: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise BenchConfigError(f"config '{spec}': {name} must be a number, got '{value}'") from None
