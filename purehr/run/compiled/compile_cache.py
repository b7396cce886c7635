"""XLA's persistent compilation cache for purehr's programs: a program compiled once (its HLO,
compile options, jax version and backend are the key) is read back from disk by the next
process instead of compiled again.

Where: JAX's own ``JAX_COMPILATION_CACHE_DIR`` if set, else ``PUREHR_CACHE_DIR/xla``, else
``$XDG_CACHE_HOME/purehr/xla``, else ``~/.cache/purehr/xla`` (``PUREHR_CACHE_DIR=""``, or
``--no-compile-cache``, keeps none; ``--compile-cache DIR`` chooses another folder). The
scripts turn it on before anything compiles (``use_compile_cache``); a library caller turns it
on itself, as JAX's cache is a process-wide setting. Every entry is a file; deleting the folder
only costs the next run its compilations.

What an entry promises (``KeyedProgramCache``): JAX names an entry's file after the program's
key and trusts whatever the file holds, so a file copied over another's was run as that other
program. purehr's entries (``<key>.purehr``) hold the key they were written for and a SHA-256
over key and program, both checked on read: an entry that is not the program asked for, or is
damaged (flipped bytes, cut short, empty), is refused with one warning, compiled again and
replaced. Entries JAX wrote itself (``<key>-cache``) are never read by purehr.

What it cannot hold (measured on jax 0.10.2): a program with host callbacks. JAX never writes
one ("Not writing persistent cache entry ... because it uses host callbacks"), and the
protocol's training program calls the host at every update and checkpoint, so it is compiled on
every run; the callback-free programs (``make_train``, the seed API, the initial states,
evaluation and replay programs, the benchmarks' configs) are read back. ``CompileCacheCounts``
says how many compilations asked the cache and how many it answered: a run's manifest records
them (``compile_cache``)."""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import jax

try:  # no public hook for the file cache: JAX's internals, as in the pinned jax (constraints.txt)
    from jax._src import compilation_cache as jax_compilation_cache
    from jax._src.compilation_cache_interface import CacheInterface
except ImportError:  # another jax (a GPU or TPU install): its own cache, unchecked, said once
    jax_compilation_cache, CacheInterface = None, object

from purehr.run.store.files import atomic_write_bytes

# a program that compiles faster than this is not written (JAX's default is 1 s): the small
# evaluation and initial-state programs take 0.2-1 s each on the 2-core CPU, and reading an
# entry back takes milliseconds
MIN_COMPILE_SECONDS = 0.2

_REQUESTS = "/jax/compilation_cache/compile_requests_use_cache"
_HITS = "/jax/compilation_cache/cache_hits"
_SAVED = "/jax/compilation_cache/compile_time_saved_sec"


def purehr_cache_root() -> Path | None:
    """purehr's cache folder between processes (None: the user asked for none)."""
    given = os.environ.get("PUREHR_CACHE_DIR")
    if given == "":
        return None
    if given is not None:
        instead = 'name a folder for purehr\'s caches (PUREHR_CACHE_DIR="" keeps none)'
        return check_cache_folder(Path(given), f"PUREHR_CACHE_DIR={given}", instead)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "purehr"


def check_cache_folder(folder: Path, name: str, instead: str) -> Path:
    """``folder``, refused (ValueError naming it, then what to do ``instead``) where it or a
    folder above it is a file: JAX would warn about every entry it fails to write, and the run
    would go on without a cache."""
    for path in (folder, *folder.parents):
        if path.exists():
            if not path.is_dir():
                where = "" if path == folder else f": {path}"
                raise ValueError(f"{name}{where} is a file, not a folder; {instead}")
            break
    return folder


def default_compile_cache_dir() -> Path | None:
    """Where compiled programs are kept by default (None: nowhere): JAX's own setting where the
    user made one (``JAX_COMPILATION_CACHE_DIR``), else purehr's cache folder's ``xla``."""
    given = jax.config.jax_compilation_cache_dir
    if given:
        return Path(given)
    root = purehr_cache_root()
    return None if root is None else root / "xla"


def use_compile_cache(folder=...) -> Path | None:
    """Keep this process's compiled programs in ``folder`` (omitted: ``default_compile_cache_dir()``;
    None: keep none, not even in a folder JAX's own settings name); returns it.

    Call it before the first compilation: JAX opens its cache once per process. The seed API
    then starts in seconds in the next process: ``train_hr_ppo(HRWritingEnv(hrv_dim=8),
    timesteps=5000)`` took 3.5 s with the cache warm against 11.8 s without (docs/protocol.md,
    "Compilation")."""
    if folder is ...:
        folder = default_compile_cache_dir()
    if folder is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    instead = "give a folder or --no-compile-cache"
    folder = check_cache_folder(Path(folder).expanduser(), f"compile cache {str(folder)!r}", instead)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    _keep_programs_by_key()
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:  # the user's own setting stays
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return folder


ENTRY_HEADER = b"purehr compiled program 1\n"
ENTRY_SUFFIX = ".purehr"


class ProgramEntryMismatch(RuntimeError):
    """A cache entry that is not the program its file is named for, or is damaged. JAX reports
    it as a failed read (one warning), compiles the program and writes the entry again."""


def pack_entry(key: str, program: bytes) -> bytes:
    """An entry's bytes: header, the key it is for, a SHA-256 over both, then JAX's value."""
    digest = hashlib.sha256(key.encode() + b"\n" + program).hexdigest()
    return ENTRY_HEADER + key.encode() + b"\n" + digest.encode() + b"\n" + program


def unpack_entry(data: bytes, key: str, path: Path) -> bytes:
    """JAX's value of an entry read for ``key``; raises ``ProgramEntryMismatch`` when the entry
    was written for another key or its digest does not match (damaged)."""
    parts = data[len(ENTRY_HEADER) :].split(b"\n", 2)
    if not data.startswith(ENTRY_HEADER) or len(parts) != 3:
        raise ProgramEntryMismatch(
            f"{path} is not a whole purehr compile cache entry (damaged or empty); compiled again"
        )
    named, digest, program = parts
    if named.decode(errors="replace") != key:
        raise ProgramEntryMismatch(
            f"{path} is not the program its name says: it holds the program of key "
            f"{named.decode(errors='replace')[:120]!r}; compiled again"
        )
    if hashlib.sha256(named + b"\n" + program).hexdigest().encode() != digest:
        raise ProgramEntryMismatch(f"{path} is damaged (its SHA-256 does not match its contents); compiled again")
    return program


class KeyedProgramCache(CacheInterface):
    """JAX's persistent cache as files ``<key>.purehr``, each naming its key (``pack_entry``),
    checked on every read; written atomically, replacing a refused entry. No size limit
    (JAX's default; ``jax_compilation_cache_max_size`` is not applied here)."""

    def __init__(self, path: str | Path):
        self._path = Path(path)
        self._path.mkdir(parents=True, exist_ok=True)

    def _file(self, key: str) -> Path:
        return self._path / f"{key}{ENTRY_SUFFIX}"

    def get(self, key: str) -> bytes | None:
        try:
            data = self._file(key).read_bytes()
        except FileNotFoundError:
            return None
        return unpack_entry(data, key, self._file(key))

    def put(self, key: str, value: bytes) -> None:
        atomic_write_bytes(self._file(key), pack_entry(key, value))


def _keyed_file_cache(path: str):
    """JAX's ``get_file_cache`` for purehr: a ``KeyedProgramCache`` (checked against a fresh
    compilation too where the user asked JAX to, ``jax_compilation_cache_check_contents``)."""
    cache = KeyedProgramCache(path)
    if jax.config.jax_compilation_cache_check_contents:
        return jax_compilation_cache.VerificationCache(cache), path
    return cache, path


def _keep_programs_by_key() -> None:
    """Makes JAX open its cache as a ``KeyedProgramCache`` (once it opens it, at the next
    compilation); one it opened before, as its own file cache, is closed first. A jax without
    the internals this replaces keeps its own cache, and the user is told its entries are not
    checked against their keys."""
    if jax_compilation_cache is None or not hasattr(jax_compilation_cache, "get_file_cache"):
        warnings.warn(
            f"jax {jax.__version__}: purehr cannot check its persistent compilation cache's entries "
            "against their keys on this version (constraints.txt pins the one it can); JAX's own "
            "cache is used as it is (--no-compile-cache keeps none)",
            stacklevel=3,
        )
        return
    jax_compilation_cache.get_file_cache = _keyed_file_cache
    opened = jax_compilation_cache._cache
    if opened is not None and not isinstance(getattr(opened, "_base_cache", opened), KeyedProgramCache):
        jax_compilation_cache.reset_cache()


@dataclass
class CompileCacheCounts:
    """Compilations that asked the persistent cache, those it answered, and the compile seconds
    the answers saved (JAX's own estimate), counted from JAX's monitoring events since
    ``listen``. A program compiled with host callbacks asks and is never answered."""

    requests: int = 0
    hits: int = 0
    seconds_saved: float = 0.0
    _listening: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def listen(self) -> None:
        """Count from now on (once per process)."""
        with self._lock:
            if self._listening:
                return
            self._listening = True
        jax.monitoring.register_event_listener(self._on_event)
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)

    def _on_event(self, event: str, **kwargs) -> None:
        if event in (_REQUESTS, _HITS):
            with self._lock:
                if event == _REQUESTS:
                    self.requests += 1
                else:
                    self.hits += 1

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        if event == _SAVED:
            with self._lock:
                self.seconds_saved += max(float(duration), 0.0)

    def snapshot(self) -> tuple[int, int, float]:
        """The counts now, for ``since``."""
        with self._lock:
            return self.requests, self.hits, self.seconds_saved

    def since(self, snapshot: tuple[int, int, float]) -> dict:
        """The manifest's ``compile_cache``: where the cache is (None: off), and what it answered
        since ``snapshot`` (a run's own compilations, whatever the process compiled before)."""
        requests, hits, saved = self.snapshot()
        on = jax.config.jax_enable_compilation_cache and jax.config.jax_compilation_cache_dir
        return {
            "directory": jax.config.jax_compilation_cache_dir if on else None,
            "requests": requests - snapshot[0],
            "hits": hits - snapshot[1],
            "seconds_saved": round(saved - snapshot[2], 3),
        }


COUNTS = CompileCacheCounts()
COUNTS.listen()
