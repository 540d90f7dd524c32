"""Summarise run.sh's runs (NAME-rN.json) and run_seeds.sh's (seeds-NAME-sS.json): per version and run,
plain (none) tok/s and Python ms a token, auto tok/s, auto's ratio to plain; then medians per version.

    python bench/measured/vm-20261128-r9-sampled-step/analyse.py
"""
import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent


def row(path: Path) -> dict:
    data = json.loads(path.read_text())
    by = {s["config"]: s for s in data["summary"]}
    tokens = sum(r["tokens"] for r in data["results"] if r["config"] == "none")
    none, auto = by["none"], by["auto:k=auto"]
    return {"none tok/s": none["tokens_per_s"], "none python ms/token": 1e3 * none["time_split"]["python"]["seconds"] / tokens,
            "auto tok/s": auto["tokens_per_s"], "auto/none": auto["geomean_speedup"],
            "auto python ms/token": 1e3 * auto["time_split"]["python"]["seconds"] / tokens}


def main() -> None:
    for pattern in ("[bn]*-r*.json", "seeds-*.json"):
        print(f"\n{pattern}\n")
        summarise(sorted(HERE.glob(pattern)))


def summarise(paths: list[Path]) -> None:
    table = {}
    for path in paths:
        version, run = path.stem.split("-")[-2:]
        table.setdefault(version, []).append((run, row(path)))
    keys = list(next(iter(table.values()))[0][1])
    print("| version | run | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 2) + "|")
    for version, runs in table.items():
        for run, r in runs:
            print(f"| {version} | {run} | " + " | ".join(f"{r[k]:.3f}" for k in keys) + " |")
        print(f"| {version} | median | " + " | ".join(f"{statistics.median(r[k] for _, r in runs):.3f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
