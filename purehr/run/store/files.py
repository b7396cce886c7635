"""Reading and writing a run's files: CSV, JSON and .npz, every writer atomic (write a
temporary sibling, then rename) so a kill never leaves half a file behind, every reader with
one error type that names the file. No JAX here: scripts' ``--help`` and the renderer import it."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from purehr.run.store.columns import CHECKPOINT_TAIL
from purehr.types import Columns


class RunDirectoryError(ValueError):
    """A run directory, or a file inside it, is not one a purehr run wrote, or not in the
    documented format."""


class RunDirectoryNotFound(RunDirectoryError, FileNotFoundError):
    """The run directory, or a file a run writes, is missing."""


def partial_name(name: str) -> str:
    """The temporary sibling a file is written to before it is renamed onto ``name``; it keeps
    the suffix, so writers that go by the suffix (matplotlib, ffmpeg) pick the right format."""
    path = Path(name)
    return f".{path.stem}.partial{path.suffix}"


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` and move it onto ``path`` only once it is
    complete: a killed writer never leaves a half-written file that looks finished."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(partial_name(path.name))
    try:
        yield partial
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """``data`` into ``path`` atomically; an OSError that names no file (a full disk:
    ``[Errno 28]``) is raised again naming ``path``."""
    try:
        with atomic_output(path) as partial, open(partial, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        if error.filename is not None or error.errno is None:
            raise
        raise type(error)(error.errno, error.strerror or str(error), str(path)) from error
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def json_default(value: Any) -> Any:
    """Arrays and NumPy scalars as lists and numbers, configs by their ``to_dict``."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def json_values(data: Any) -> Any:
    """``data`` as it reads back from JSON (what two descriptions are compared by): a NaN or
    infinite number is null, as ``atomic_write_json`` writes it."""
    return _finite_or_null(json.loads(json.dumps(data, default=json_default)))


def _finite_or_null(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite_or_null(item) for item in value]
    return value


def atomic_write_json(path: Path, data: Any) -> Path:
    """Valid JSON: a NaN or infinite number (an undefined metric) is written as null, never as
    the bare ``NaN`` other parsers refuse."""
    return atomic_write_text(path, json.dumps(json_values(data), indent=2, allow_nan=False) + "\n")


def read_parsed(
    path: Path,
    parse: Callable[[Path], Any],
    *,
    missing: Callable[[], Exception],
    unreadable: Callable[[Exception], Exception],
    parse_errors: tuple[type[Exception], ...] = (Exception,),
) -> Any:
    """``parse(path)``, each failure raised as the caller's own exception so every file keeps its
    words: ``missing()`` for a file that is not there, ``unreadable(error)`` for one ``parse``
    refuses with one of ``parse_errors``."""
    try:
        return parse(path)
    except FileNotFoundError:
        raise missing() from None
    except parse_errors as error:
        raise unreadable(error) from None


def read_json_object(
    path: Path,
    *,
    missing: Callable[[], Exception],
    not_json: Callable[[Exception], Exception],
    not_object: Callable[[Any], Exception],
) -> dict[str, Any]:
    """The JSON object in ``path`` (a manifest, a model description); a missing file, text that
    is not JSON (``not_json(decode_error)``) or JSON that is not an object (``not_object(value)``)
    raises the caller's exception."""
    value = read_parsed(
        path,
        lambda file: json.loads(file.read_text()),
        missing=missing,
        unreadable=not_json,
        parse_errors=(UnicodeDecodeError, json.JSONDecodeError),
    )
    if not isinstance(value, dict):
        raise not_object(value)
    return value


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """Arrays as an uncompressed .npz (read back without pickle)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return atomic_write_bytes(path, buffer.getvalue())


def format_cell(value: Any) -> str:
    """The one CSV cell format: floats exactly (``repr``; whole numbers as integers, so a
    step count read back as a float stays ``2048``), NaN as ``nan``, an absent value (None)
    as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isnan(value):
            return "nan"
        if value.is_integer() and abs(value) < 2**53 and math.copysign(1.0, value) > 0:
            return str(int(value))
        return repr(value)
    return str(value)


def csv_text(columns: Sequence[str] | None, rows: Iterable[dict[str, Any]]) -> str:
    """Rows as CSV text; ``columns`` None: every key of the rows, in first-seen order. A key a
    row lacks is an empty cell. No rows and no columns: the empty text."""
    rows = list(rows)
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    if not columns:
        return ""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([format_cell(row.get(column)) for column in columns])
    return buffer.getvalue()


def write_csv(path: Path, columns: Sequence[str] | None, rows: Iterable[dict[str, Any]]) -> Path:
    return atomic_write_text(path, csv_text(columns, rows))


def read_csv(path: Path) -> list[dict[str, str]]:
    """A CSV's rows as text ([] when the file does not exist)."""
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def parse_row(row: dict[str, str], text_columns: Sequence[str] = CHECKPOINT_TAIL) -> dict[str, Any]:
    """A CSV row back to numbers (ints stay ints); ``text_columns`` (paths, digests) stay text."""
    parsed: dict[str, Any] = {}
    for name, text in row.items():
        if name in text_columns:
            parsed[name] = text
            continue
        try:
            parsed[name] = int(text)
        except ValueError:
            parsed[name] = float(text)
    return parsed


def read_rows(
    path: Path, text_columns: Sequence[str] = CHECKPOINT_TAIL, integer_columns: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """A run's CSV log (checkpoints.csv, updates.csv) as parsed rows, checked cell by cell: the
    one reader resume, restore and evaluation share ([] when the file does not exist). A row
    cut short before its last number, a row with extra fields, or a cell that is not a number
    is refused naming the file, the line and the column. Missing trailing text cells (paths,
    the digest) read as empty: a checkpoint without its digest is then refused as unverifiable
    where it is restored, and a resume falls back from it. An empty number reads as NaN,
    except in ``integer_columns`` (steps, update counts), which must hold integers."""
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            return []
        rows = []
        for cells in reader:
            if cells:
                rows.append(_checked_row(path, reader.line_num, header, cells, text_columns, integer_columns))
    return rows


def _checked_row(
    path: Path, line: int, header: list[str], cells: list[str], text_columns, integer_columns
) -> dict[str, Any]:
    if len(cells) > len(header):
        raise RunDirectoryError(f"{path}: line {line} has {len(cells)} fields, the header {len(header)} (damaged?)")
    absent = [name for name in header[len(cells) :] if name not in text_columns]
    if absent:
        raise RunDirectoryError(
            f"{path}: line {line} ends after {len(cells)} of {len(header)} fields (cut short?): "
            f"no value for column {absent[0]!r}"
        )
    row: dict[str, Any] = {}
    for name, text in zip(header, cells + [""] * (len(header) - len(cells))):
        if name in text_columns:
            row[name] = text
            continue
        number = _parse_number(text, integer=name in integer_columns)
        if number is None:
            expected = "an integer" if name in integer_columns else "a number"
            raise RunDirectoryError(f"{path}: line {line}, column {name!r}: {text!r} is not {expected}")
        row[name] = number
    return row


def _parse_number(text: str, integer: bool) -> int | float | None:
    """An integer, else a float (empty: NaN unless ``integer``), else None."""
    try:
        return int(text)
    except ValueError:
        return None if integer else _parse_cell(text)


def _parse_cell(text: str) -> float | None:
    if text.strip() == "":
        return float("nan")
    try:
        return float(text)
    except ValueError:
        return None


def read_csv_columns(path: Path, required: Sequence[str] = (), *, numeric: bool = False) -> Columns:
    """Columns of a CSV as arrays: float64 where every cell is a number (empty -> NaN), str
    otherwise (paths). A row cut short (a truncated copy) is refused with its line number.
    ``numeric``: the file must also have a data row and numbers in every ``required`` column
    (what a metric is computed from)."""
    if not path.is_file():
        raise RunDirectoryNotFound(f"{path}: file not found (expected a CSV log of the run)")
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        rows = [row for row in reader if row]
    if not header:
        raise RunDirectoryError(f"{path}: empty file (expected a header row)")
    missing = [name for name in required if name not in header]
    if missing:
        raise RunDirectoryError(f"{path}: missing column(s) {missing}; has {header}")
    ragged = [number for number, row in enumerate(rows, start=2) if len(row) != len(header)]
    if ragged:
        raise RunDirectoryError(f"{path}: line(s) {ragged[:5]} do not have {len(header)} fields (truncated write?)")
    columns: Columns = {}
    for index, name in enumerate(header):
        cells = [row[index] for row in rows]
        numbers = [_parse_cell(cell) for cell in cells]
        if all(number is not None for number in numbers):
            columns[name] = np.asarray(numbers, dtype=np.float64)
        else:
            columns[name] = np.asarray(cells, dtype=str)
    if numeric:
        if not rows:
            raise RunDirectoryError(f"{path}: no data rows; expected at least one row")
        for name in required:
            if columns[name].dtype.kind != "f":
                line, text = next((n, c) for n, c in enumerate(columns[name], start=2) if _parse_cell(c) is None)
                raise RunDirectoryError(f"{path}: column {name!r} holds a non-number ({text!r} on line {line})")
    return columns


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz written by ``write_npz``; no pickle."""
    if not path.is_file():
        raise RunDirectoryNotFound(f"{path}: showcase trace not found (named in checkpoints.csv)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (ValueError, OSError) as error:
        raise RunDirectoryError(f"{path}: not a readable .npz trace ({error})") from error


def check_output_file(path: str | Path) -> Path:
    """A file a program will write at its end, checked before any work: not a directory, and
    in a folder that exists (or can be created) and can be written. Raises ValueError."""
    path = Path(path)
    if str(path) == "" or path.is_dir():
        raise ValueError(f"{path} is a directory; expected a file path to write")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{path} exists and cannot be written")
    ancestor = path.parent.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ValueError(f"{path} cannot be created: {ancestor} is a file, not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"{path} cannot be created: {ancestor} is not writable")
    return path
