"""The persistent compilation cache (purehr.run.compiled.compile_cache): where it is, that a second
process reads a callback-free program back with the same result, that a program with host
callbacks is never kept (the fact the protocol's design rests on), and the flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from purehr.run.compiled import compile_cache

ROOT = Path(__file__).resolve().parents[1]

# run in a fresh process: the cache is opened once per process; prints the counts of each program
PROGRAM = """
import json, sys
from pathlib import Path
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import io_callback
import purehr
from purehr.run.compiled.compile_cache import COUNTS

purehr.use_compile_cache(*{"off": [None], "default": []}.get(sys.argv[1], [Path(sys.argv[1])]))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # keep even a tiny program
x = np.linspace(0.0, 1.0, 64, dtype=np.float32)

def pure(x):
    return jnp.cumsum(jnp.sin(3.0 * x) * x)

def other(x):  # another program: another key, another entry
    return jnp.cumprod(jnp.cos(2.0 * x) + 1.0)

def with_callback(x):
    io_callback(lambda v: None, None, x, ordered=True)
    return 2.0 * x

counts = {}
before = COUNTS.snapshot()
result = jax.jit(pure)(x).tolist()
counts["pure"] = COUNTS.since(before)
before = COUNTS.snapshot()
other_result = jax.jit(other)(x).tolist()
counts["other"] = COUNTS.since(before)
before = COUNTS.snapshot()
jax.jit(with_callback)(x).block_until_ready()
counts["callback"] = COUNTS.since(before)
print(json.dumps({"counts": counts, "result": result, "other": other_result}))
"""


def _run_program(cache: str, **environment: str) -> dict:
    """The program's counts and results; its warnings (stderr) under said."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")} | environment
    completed = subprocess.run(
        [sys.executable, "-c", PROGRAM, cache], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.splitlines()[-1]) | {"said": completed.stderr}


@pytest.mark.slow
def test_a_second_process_reads_the_program_back_but_never_one_with_host_callbacks(tmp_path):
    folder = tmp_path / "xla"
    first, second = _run_program(str(folder)), _run_program(str(folder))
    off = _run_program("off")
    assert first["counts"]["pure"]["directory"] == str(folder)
    assert (first["counts"]["pure"]["requests"], first["counts"]["pure"]["hits"]) == (1, 0)
    assert (second["counts"]["pure"]["requests"], second["counts"]["pure"]["hits"]) == (1, 1)
    assert second["result"] == first["result"] == off["result"]  # the same executable, bit for bit
    for run in (first, second):  # asked every time, answered never: JAX writes no such entry
        assert (run["counts"]["callback"]["requests"], run["counts"]["callback"]["hits"]) == (1, 0)
    assert off["counts"]["pure"] == {"directory": None, "requests": 0, "hits": 0, "seconds_saved": 0.0}
    assert len(list(folder.iterdir())) == 2  # the callback-free programs' entries alone
    # no folder given: purehr's own (JAX's setting, where there is one, comes first: below)
    default = _run_program("default", PUREHR_CACHE_DIR=str(tmp_path / "purehr"))
    assert default["counts"]["pure"]["directory"] == str(tmp_path / "purehr" / "xla")
    assert default["result"] == first["result"]


def _entry(folder: Path, function: str) -> Path:
    """The cache file of the jitted ``function`` (JAX names it after the function)."""
    (path,) = [path for path in folder.iterdir() if path.name.startswith(f"jit_{function}-")]
    return path


@pytest.mark.slow
def test_an_entry_swapped_for_another_programs_is_compiled_again_not_run(tmp_path):
    """Issue 48 defect 7: the random policy's cached program copied over the oracle's file was
    run as the oracle's. Each entry names the key it was written for, checked on read: the
    swapped entry is refused with one warning, compiled again and replaced."""
    folder = tmp_path / "xla"
    first = _run_program(str(folder))
    _entry(folder, "pure").write_bytes(_entry(folder, "other").read_bytes())
    swapped = _run_program(str(folder))
    assert swapped["result"] == first["result"] and swapped["other"] == first["other"]
    assert (swapped["counts"]["pure"]["requests"], swapped["counts"]["pure"]["hits"]) == (1, 0)
    assert (swapped["counts"]["other"]["requests"], swapped["counts"]["other"]["hits"]) == (1, 1)
    assert swapped["said"].count("is not the program") == 1, swapped["said"]
    again = _run_program(str(folder))  # replaced: read back again
    assert again["result"] == first["result"] and again["counts"]["pure"]["hits"] == 1
    assert "is not the program" not in again["said"]


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PUREHR_CACHE_DIR", str(tmp_path))
    assert compile_cache.purehr_cache_root() == tmp_path
    monkeypatch.setenv("PUREHR_CACHE_DIR", "")
    assert compile_cache.purehr_cache_root() is None
    monkeypatch.delenv("PUREHR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.purehr_cache_root() == tmp_path / "xdg" / "purehr"
    # JAX's own setting, where a user made one, wins (conftest sets it for the whole suite)
    assert compile_cache.default_compile_cache_dir() == Path(os.environ["JAX_COMPILATION_CACHE_DIR"])


def test_a_file_for_a_cache_folder_is_refused_by_name(tmp_path):
    path = tmp_path / "not_a_folder"
    path.write_text("")
    with pytest.raises(ValueError, match="not_a_folder.*is a file, not a folder"):
        compile_cache.use_compile_cache(path)


def test_the_cache_flags_exclude_each_other(capsys):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import train_all_seeds
    finally:
        sys.path.pop(0)
    parser = train_all_seeds.build_parser()
    assert parser.parse_args(["--no-compile-cache"]).no_compile_cache
    assert parser.parse_args(["--compile-cache", "somewhere"]).compile_cache == Path("somewhere")
    with pytest.raises(SystemExit):
        parser.parse_args(["--compile-cache", "somewhere", "--no-compile-cache"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_flags_reach_the_cache_as_given(monkeypatch):
    """--no-compile-cache turns the cache off (None), even one JAX's own setting names; no flag
    asks for the default folder (...). Recorded, not applied: the cache is process-wide."""
    from purehr.cli.cache_flags import start_compile_cache

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import train_all_seeds
    finally:
        sys.path.pop(0)
    given = []
    monkeypatch.setattr(compile_cache, "use_compile_cache", lambda folder: given.append(folder) or folder)
    parser = train_all_seeds.build_parser()
    for flags in (["--no-compile-cache"], [], ["--compile-cache", "somewhere"]):
        start_compile_cache(parser.parse_args(flags), parser)
    assert given == [None, ..., Path("somewhere")]


def test_an_entry_is_read_only_for_the_key_it_was_written_for(tmp_path):
    """The check behind the test above, without a process: an entry names its key and a digest;
    another key's entry, a flipped byte, a cut and an empty file are refused by name; a put
    replaces a refused entry."""
    cache = compile_cache.KeyedProgramCache(tmp_path)
    cache.put("jit_a-1", b"program a")
    cache.put("jit_b-2", b"program b")
    assert cache.get("jit_a-1") == b"program a" and cache.get("jit_missing-3") is None
    entry = tmp_path / f"jit_a-1{compile_cache.ENTRY_SUFFIX}"
    whole = entry.read_bytes()
    damaged = {
        "another program's": (tmp_path / f"jit_b-2{compile_cache.ENTRY_SUFFIX}").read_bytes(),
        "flipped": whole[:-1] + bytes([whole[-1] ^ 0xFF]),
        "cut": whole[: len(whole) // 2],
        "empty": b"",
    }
    for data in damaged.values():
        entry.write_bytes(data)
        with pytest.raises(compile_cache.ProgramEntryMismatch, match=f"{entry}.*compiled again"):
            cache.get("jit_a-1")
    with pytest.raises(compile_cache.ProgramEntryMismatch, match="holds the program of key 'jit_b-2'"):
        compile_cache.unpack_entry(damaged["another program's"], "jit_a-1", entry)
    cache.put("jit_a-1", b"program a")
    assert cache.get("jit_a-1") == b"program a" and sorted(p.name for p in tmp_path.iterdir()) == [
        f"jit_a-1{compile_cache.ENTRY_SUFFIX}",
        f"jit_b-2{compile_cache.ENTRY_SUFFIX}",
    ]
