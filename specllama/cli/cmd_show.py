"""`specllama show NAME`: one model's file, quantization, context, chat template and size (like
`ollama show`), from the registry and the GGUF header; nothing is loaded or downloaded."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from specllama.cli.arguments import MODEL_REF

HELP = "one model: file, quantization, context, chat template, size (nothing is downloaded)"
DESCRIPTION = """What a model is, from models.toml and its GGUF header: the file and where it is, whether it is
downloaded, its size, architecture and parameters, quantization, training context, tokenizer, chat
template and the pairs it belongs to. A registered model not yet downloaded shows what models.toml
says; `specllama pull NAME` fetches it. A hub model's header is read without the weights."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="NAME", help=MODEL_REF)
    p.add_argument("--template", action="store_true", help="print the whole chat template (default: its first line)")
    p.add_argument("--json", action="store_true", help="print one JSON object (default: text)")


def describe(ref: str) -> dict:
    from specllama.errors import SpecllamaError
    from specllama.llama.gguf_meta import read_info
    from specllama.models import hub, store
    from specllama.models.registry import load_registry
    from specllama.models.resolve import header_source, looks_like_path

    registry = load_registry()
    spec = None if looks_like_path(ref, registry) or hub.is_hub_ref(ref) else registry.model(ref)
    shown: dict = {"name": ref}
    if spec is not None:
        path = store.model_path(spec)
        shown.update(file=str(path), downloaded=store.is_available(spec), role=spec.role,
                     description=spec.description or None, registry_size=spec.expected_size,
                     source="path" if spec.path else "registry" if spec.registry else "hub",
                     pairs=[p.name for p in registry.pairs.values() if ref in (p.target, p.draft)])
    with tempfile.TemporaryDirectory(prefix="specllama-header-") as scratch:
        try:
            info = read_info(header_source(ref, registry, Path(scratch)))
        except SpecllamaError as e:
            if spec is None or shown.get("downloaded"):
                raise
            # Not downloaded: a registry model's header comes only with it, a hub model's needs the network.
            shown["header"] = f"not read: {e}"
            return shown
    if spec is None:
        shown.update(file=str(info.path), downloaded=True)
    shown.update(size=info.file_size if shown.get("downloaded") else shown.get("registry_size"),
                 model=info.name, architecture=info.architecture, parameters=info.n_params,
                 quantization=info.quantization, context_length=info.context_length,
                 tokenizer=f"{info.vocab_type}" + (f" / {info.pre_tokenizer}" if info.pre_tokenizer else ""),
                 vocab_size=info.vocab_size, layers=info.n_layers, heads_kv=info.n_head_kv,
                 chat_template=info.chat_template)
    return shown


def text(s: dict, whole_template: bool) -> str:
    def mb(n) -> str:
        return f"{n / 1e6:,.0f} MB" if n else "unknown"

    lines = [s["name"] + (f"  ({s['description']})" if s.get("description") else "")]
    hub = " --from-hub" if s.get("source") == "hub" else ""
    where = "downloaded" if s.get("downloaded") else f"not downloaded: `specllama pull {s['name']}{hub}`"
    lines.append(f"  file          {s.get('file', '-')} ({where})")
    if "header" in s:
        lines.append(f"  size          {mb(s.get('registry_size'))} (models.toml)")
        lines.append(f"  header        {s['header']}")
    else:
        params = f"{s['parameters'] / 1e9:.2f}B" if s["parameters"] >= 1e9 else f"{s['parameters'] / 1e6:.0f}M"
        lines += [f"  size          {mb(s.get('size'))}",
                  f"  model         {s['model'] or '(unnamed)'} [{s['architecture']}], {params} parameters",
                  f"  quantization  {s['quantization']}",
                  f"  context       {s['context_length']:,} tokens (trained; -c sets what a run uses)"
                  if s["context_length"] else "  context       not in the header",
                  f"  tokenizer     {s['tokenizer']}, {s['vocab_size']:,} tokens"]
        template = s.get("chat_template")
        if not template:
            lines.append("  template      none in the file (prompts are sent as plain text)")
        elif whole_template:
            lines += ["  template", template]
        else:
            first = template.strip().splitlines()[0]
            lines.append(f"  template      {len(template):,} characters: {first[:60]}{'…' if len(first) > 60 else ''}"
                         " (--template prints it)")
    if s.get("role"):
        lines.append(f"  role          {s['role']} ({s['source']})")
    if s.get("pairs"):
        lines.append(f"  pairs         {', '.join(s['pairs'])}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    shown = describe(args.model)
    print(json.dumps(shown, indent=1, ensure_ascii=False) if args.json else text(shown, args.template))
    return 0
