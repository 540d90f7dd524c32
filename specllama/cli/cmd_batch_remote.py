"""`specllama batch FILE -o OUT --server URL [--server URL ...]`: the batch on OpenAI-compatible
servers (llama-server, vLLM, llama-cpp-python's server) instead of models loaded here."""

from __future__ import annotations

import argparse
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from specllama.batch.server_pool import RetryPolicy
from specllama.cli.arguments import at_least_one
from specllama.cli.batch_common import open_batch_output, report_outcome, sigterm_as_interrupt
from specllama.errors import SpecllamaError, UsageError

# Asking a server for its model and slots at the start should not wait as long as a generation may.
DISCOVERY_TIMEOUT = 10.0


def add_server_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("servers (instead of local models; sampling options become request fields)")
    g.add_argument("--server", action="append", default=[], metavar="URL",
                   help="an OpenAI-compatible server, e.g. http://host:8080 (repeatable); the API key comes "
                        "from SPECLLAMA_API_KEY or OPENAI_API_KEY (default: none: local models)")
    g.add_argument("--servers-file", metavar="FILE", help="server URLs, one a line (# comments; default: none)")
    g.add_argument("--model", metavar="NAME",
                   help="the request's \"model\" (default: what each server lists at /v1/models, else 'default')")
    g.add_argument("--concurrency", type=at_least_one, metavar="N",
                   help="requests in flight per server (default: the server's slots when it reports them, "
                        "llama-server's -np; else 1: give vLLM, which batches any number, 16 or more)")
    g.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="per request (default %(default)s)")
    g.add_argument("--retries", type=int, default=5, metavar="N",
                   help="further attempts of a prompt after a retryable failure (default %(default)s)")
    g.add_argument("--backoff", type=float, default=1.0, metavar="SECONDS",
                   help=f"first cool-down of a failing server; doubles per failure up to {RetryPolicy.cap:g} s "
                        "(default %(default)s)")


def server_urls(args: argparse.Namespace) -> list[str]:
    urls = list(args.server)
    if args.servers_file:
        try:
            lines = Path(args.servers_file).read_text(encoding="utf-8-sig").splitlines()
        except OSError as e:
            raise SpecllamaError(f"cannot read --servers-file {args.servers_file}: {e.strerror or e}") from None
        except UnicodeDecodeError as e:
            raise SpecllamaError(f"--servers-file {args.servers_file} is not UTF-8 text ({e.reason} at byte "
                                 f"{e.start})") from None
        urls += [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]
    unique = list(dict.fromkeys(url.rstrip("/") for url in urls))
    if not unique:
        raise SpecllamaError(f"--servers-file {args.servers_file} lists no server")
    return unique


def cmd_remote_batch(args: argparse.Namespace) -> int:
    from specllama.batch.prompts_file import read_prompts
    from specllama.batch.remote import run_remote_batch
    from specllama.batch.server_client import base_url, check_timeout
    from specllama.cli.intent import Intent
    from specllama.cli.resolve import sampling_for
    from specllama.decoding.request import GenerationConfig

    if args.pair or args.target or args.draft:
        raise UsageError("--pair/--target/--draft choose local models; with --server the servers' own "
                             "models answer (name one with --model)")
    if args.retries < 0 or not 0 < args.backoff < math.inf:  # NaN fails both comparisons
        raise UsageError("--retries must be >= 0, --backoff a finite number > 0")
    try:
        check_timeout(args.timeout)
    except SpecllamaError as e:  # typed on the command line: a usage mistake
        raise UsageError(str(e)) from None
    api_key = server_api_key()
    urls = server_urls(args)
    for url in urls:
        base_url(url)  # a bad address fails before anything is read or sent
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    # The local batch's checks (SamplingParams): a server is sent only values that mean something.
    config = GenerationConfig(max_tokens=args.max_tokens, sampling=sampling_for(Intent.from_args(args)),
                              stop=tuple(args.stop))
    prompts = read_prompts(args.file)
    state, nothing_to_do = open_batch_output(args, prompts, err)
    if nothing_to_do is not None:
        return nothing_to_do

    servers = prepare_servers(urls, args, RetryPolicy(args.retries, args.backoff), err, api_key)
    with sigterm_as_interrupt(), remote_progress(err, [s.url for s in servers]) as progress:
        report = run_remote_batch(servers, prompts.items, config, args.output, system=args.system,
                                  state=state, progress=progress)

    return report_outcome(args, prompts, report, err, not_attempted=report.not_attempted)


def server_api_key() -> str | None:
    from specllama.batch.server_client import check_api_key

    api_key = os.environ.get("SPECLLAMA_API_KEY") or os.environ.get("OPENAI_API_KEY") or None
    if api_key:
        check_api_key(api_key)
    return api_key


def prepare_servers(urls: list[str], args: argparse.Namespace, policy, err: Console, api_key: str | None) -> list:
    """Each server's model name and concurrency: the options when given, else what it reports."""
    from specllama.batch.remote import DEFAULT_MODEL, RemoteServer
    from specllama.batch.server_client import ServerClient, ServerError, discover
    from specllama.batch.server_pool import ServerHealth

    def ask(url: str):
        client = ServerClient(url, api_key=api_key, timeout=min(args.timeout, DISCOVERY_TIMEOUT))
        try:
            return discover(client)
        except ServerError as e:
            return e
        finally:
            client.close()

    with ThreadPoolExecutor(max_workers=min(16, len(urls))) as pool:
        answers = list(pool.map(ask, urls))
    servers = []
    for url, answer in zip(urls, answers):
        if isinstance(answer, ServerError) and answer.refused_key:
            model, slots = None, None  # its first prompt finds the same and takes it out of the batch
        elif isinstance(answer, ServerError):
            err.print(f"specllama: {url} is not answering yet ({answer}); it will be tried during the batch"
                      + ("" if args.concurrency else " with 1 request at a time (set --concurrency)"), markup=False)
            model, slots = None, None
        else:
            model, slots = answer[0] or DEFAULT_MODEL, answer[1]
        servers.append(RemoteServer(url=url, concurrency=args.concurrency or slots or 1,
                                    health=ServerHealth(policy), model=args.model or model,
                                    api_key=api_key, timeout=args.timeout))
    return servers


class _FleetProgress(Progress):
    """The batch's bar with one plain line per server under it (rich's way: get_renderables)."""
    server_lines = ""

    def get_renderables(self):
        yield self.make_tasks_table(self.tasks)
        if self.server_lines:
            yield Text(self.server_lines)


@contextmanager
def remote_progress(console: Console, urls: list[str]) -> Iterator:
    """A bar plus a line per server (completed, tokens/s, errors, in or out of rotation) on a
    terminal; one line per prompt, and one per server leaving or rejoining the rotation, otherwise."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn())
    with _FleetProgress(*columns, console=console, disable=not console.is_terminal) as bar:
        overall = bar.add_task("batch", total=None)
        done = [0]
        total = [0]

        def server_line(url: str, report) -> str:
            s = report.servers[url]
            rate = s.tokens / max(time.monotonic() - report.started, 1e-9)
            state = "" if s.in_rotation else ", OUT OF ROTATION"
            return f"  {url}: {s.completed} done, {rate:.1f} tok/s, {s.errors} errors{state}"

        def update(event: tuple, report) -> None:  # a remote.RemoteProgress
            kind = event[0]
            if kind == "start":
                total[0] = event[1]
            elif kind in ("done", "failed"):
                done[0] += 1
            elif kind == "down":
                console.print(f"specllama: {event[1]} out of rotation for {event[3]:.1f}s: {event[2]}", markup=False)
            elif kind == "up":
                console.print(f"specllama: {event[1]} answers again, back in rotation", markup=False)
            elif kind == "refused":
                console.print(f"specllama: {event[1]} refused the API key, left out of this batch: {event[2]}",
                              markup=False)
            acc = f", acceptance {report.acceptance:.0%}" if report.acceptance is not None else ""
            failed = f" ({len(report.failed)} failed)" if report.failed else ""
            bar.update(overall, completed=done[0], total=total[0], description=f"batch{failed}{acc}")
            bar.server_lines = "\n".join(server_line(url, report) for url in urls)
            if kind in ("done", "failed") and not console.is_terminal:
                item, url = event[1], event[2]
                if kind == "done":
                    reply = event[3]
                    status = f"done on {url} ({reply.tokens} tokens, {reply.tokens_per_s:.1f} tok/s)"
                else:
                    status = f"failed on {url}"
                console.print(f"[{done[0]}/{total[0]}] {item.id}: {status}{acc}", markup=False)

        yield update
