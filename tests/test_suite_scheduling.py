"""The suite's own scheduling under ``-n 2 --dist loadfile`` (conftest.REFERENCE_GROUP): the files
that use the session's protocol reference run on one worker, so it is trained and its program
compiled once; the work units go out longest first (conftest.longest_first)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from conftest import FILE_SECONDS, REFERENCE_GROUP, longest_first, reference_group_scope

TESTS = Path(__file__).resolve().parent


def test_the_reference_group_lists_every_file_that_uses_the_reference():
    """Every test file naming the fixture, or a matrix row's ``shared_reference`` (which names
    it), is in the group, and nothing else is: a file added without it would train the
    reference and compile its program on the other worker again."""
    users = {
        f"tests/{path.name}"
        for path in TESTS.glob("test_*.py")
        if path.name != Path(__file__).name
        and any(name in path.read_text() for name in ("protocol_reference", "shared_reference"))
    }
    assert users == set(REFERENCE_GROUP)


def test_the_group_is_one_work_unit_and_every_other_file_its_own():
    grouped = {reference_group_scope(f"{path}::test_x") for path in REFERENCE_GROUP}
    assert len(grouped) == 1
    assert reference_group_scope("tests/test_sweep.py::test_x[a]") == "tests/test_sweep.py"
    assert grouped.isdisjoint({"tests/test_sweep.py", *REFERENCE_GROUP})


def test_the_units_go_out_longest_first_an_unlisted_file_first_of_all():
    """By hand: b 5 s; the group (test_run 2 + test_export 4) 6 s; a 1 s; new.py unlisted, so
    longer than the 12 s listed. Each file's tests stay together and in their order."""
    seconds = {"tests/a.py": 1.0, "tests/b.py": 5.0, "tests/test_run.py": 2.0, "tests/test_export.py": 4.0}
    names = ["a.py::t1", "test_run.py::t1", "b.py::t1", "a.py::t2", "test_export.py::t1", "new.py::t1", "b.py::t2"]
    items = [SimpleNamespace(nodeid=f"tests/{name}") for name in names]
    longest_first(items, seconds)
    assert [item.nodeid.removeprefix("tests/") for item in items] == [
        "new.py::t1",
        "test_run.py::t1",
        "test_export.py::t1",
        "b.py::t1",
        "b.py::t2",
        "a.py::t1",
        "a.py::t2",
    ]


def test_the_recorded_seconds_name_files_of_the_suite():
    """tests/file_seconds.json (conftest.FILE_SECONDS) lists test files that exist, each with its
    seconds: a renamed or removed file's entry would order nothing (and the file under its new
    name would go first, as one not listed)."""
    seconds = json.loads(FILE_SECONDS.read_text())
    root = TESTS.parent
    assert all((root / path).is_file() and value >= 0 for path, value in seconds.items())
