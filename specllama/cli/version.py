"""`specllama --version`: specllama's version and the llama.cpp it runs on.

A bug report needs both: llama-cpp-python's version names the llama.cpp it bundles, and
llama.cpp's system info says which CPU features (AVX2, NEON, ...) and backends the build uses.
Computed only when asked, so the other commands do not import llama_cpp just to parse options.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys


def specllama_version() -> str:
    try:
        return importlib.metadata.version("specllama")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"


def version_text() -> str:
    from specllama.llama.backend import library_version, system_info

    return (f"specllama {specllama_version()}\n"
            f"llama-cpp-python {library_version()}\n"
            f"llama.cpp: {system_info()}")


class VersionAction(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        sys.stdout.flush()
        parser.exit(0)
