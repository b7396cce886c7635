"""``--compile-cache`` / ``--no-compile-cache``, shared by the scripts that compile programs
(train_all_seeds, evaluate, render, sweep): where XLA's persistent compilation cache keeps them
(``purehr.run.compiled.compile_cache``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_compile_cache_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--compile-cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep compiled programs here for the next run (default: $JAX_COMPILATION_CACHE_DIR if set, else "
        "$PUREHR_CACHE_DIR/xla, else $XDG_CACHE_HOME/purehr/xla, else ~/.cache/purehr/xla; programs with "
        "host callbacks, such as the protocol's training program, are never kept: docs/protocol.md, 'Compilation')",
    )
    group.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="compile every program and keep none (not even in $JAX_COMPILATION_CACHE_DIR)",
    )


def start_compile_cache(args, parser: argparse.ArgumentParser) -> Path | None:
    """Turns the cache on (or, with --no-compile-cache, off, even where JAX's own setting names
    a folder) as the flags say, before anything compiles; the folder, or None."""
    from purehr.run.compiled import compile_cache

    folder = None if args.no_compile_cache else (args.compile_cache or ...)  # ...: the default folder
    try:
        compile_cache.purehr_cache_root()  # PUREHR_CACHE_DIR (the baselines' too) refused before any work
        return compile_cache.use_compile_cache(folder)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
