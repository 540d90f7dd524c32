#!/usr/bin/env python3
"""One side-by-side table from several agents_e2e.py reports (one per server and run), as markdown and JSON:

    python scripts/measure/agents_e2e_table.py spec.json llama.json --json out.json > out.md

A report written before agents_e2e.py recorded its server and meta (a bare list of rows) is read as
serve's, its start taken from --start (cold or warm), its command from --command.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SERVERS = ["specllama", "llama-server"]


def load(path: Path, start: str, command: str) -> tuple[dict, list[dict]]:
    data = json.loads(path.read_text())
    if isinstance(data, list):
        meta = {"server": "specllama", "command": command, "report": str(path)}
        rows = [{**row, "server": "specllama", "start": row.get("start") or start} for row in data]
        return meta, rows
    return {**data["meta"], "report": str(path)}, data["rows"]


def markdown(rows: list[dict]) -> str:
    head = ("| client | version | server | start | finished | edit applied | seconds | requests (2xx / other) "
            "| prompt tokens (cached) | drafts accepted / drafted | verdict |\n" + "|---" * 11 + "|")
    order = {name: i for i, name in enumerate(SERVERS)}
    rows = sorted(rows, key=lambda r: (r["client"], order.get(r["server"], 9)))
    lines = []
    for r in rows:
        other = r["failed_requests"] + r["abandoned"]
        drafts = f"{r['accepted']} / {r['drafted']}" if r["server"] == "specllama" else "- (no draft model)"
        lines.append(f"| {r['client']} | {r['version']} | {r['server']} | {r.get('start') or '-'} | "
                     f"{'yes' if r['finished'] else 'no'} | {'yes' if r['edit_applied'] else 'no'} | {r['seconds']:.0f} | "
                     f"{r['requests'] - other} / {other} | {r['prompt_tokens']:,} ({r['cached_tokens']:,}) | {drafts} | "
                     f"{r['verdict']} |")
    evidence = [f"- {r['client']} on {r['server']}: {e}" for r in rows for e in r["evidence"]]
    # reports from before agents_e2e.py kept them have none
    requests = [f"    {r['client']} on {r['server']}: {line}" for r in rows for line in r.get("request_lines", [])]
    out = [head, *lines, "", "Evidence (first lines):", "", *evidence]
    return "\n".join(out + (["", "The servers' request lines:", "", *requests] if requests else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="write the rows and each report's meta here")
    parser.add_argument("--start", default="cold", help="start of rows in a report without one")
    parser.add_argument("--command", default="", help="command of a report without meta")
    args = parser.parse_args()
    metas, rows = [], []
    for path in args.reports:
        meta, found = load(path, args.start, args.command)
        metas.append(meta)
        rows += found
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps({"runs": metas, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
