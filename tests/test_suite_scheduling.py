"""The suite's own scheduling under ``-n 2 --dist loadfile`` (conftest.REFERENCE_GROUP): the files
that use the session's protocol reference run on one worker, so it is trained and its program
compiled once."""

from __future__ import annotations

from pathlib import Path

from conftest import REFERENCE_GROUP, reference_group_scope

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
