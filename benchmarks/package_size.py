"""The installed package's size: lines per room (``purehr/<folder>``; files at the top as
``top``) by kind (code, docstring, comment, blank), the largest module, and a lower bound on
the lines the same code can take under the house style. No JAX; reads files only.

The bound keeps every line of code and adds only what the style cannot do without: the blank
lines ruff format puts before a top-level ``def``/``class`` (2, from the second statement on)
and between a class's methods (1), and a one-line docstring per module and per public top-level
``def``/``class``. Comments, longer docstrings and other blank lines are counted as removable,
so a package cannot be made smaller than the bound without removing code.

    python benchmarks/package_size.py [--package purehr] [--json out.json]
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

from purehr.cli.arguments import HelpFormatter

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("code", "docstring", "comment", "blank")


def docstring_lines(tree: ast.Module) -> set[int]:
    """Line numbers of every string statement (module, class and function docstrings, and the
    attribute docstrings written under a field)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        for statement in body if isinstance(body, list) else []:
            if (
                isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                lines.update(range(statement.lineno, statement.end_lineno + 1))
    return lines


def style_floor(tree: ast.Module) -> int:
    """The lines the style adds to a module's code: ruff format's blank lines around top-level
    definitions and between methods, and one-line docstrings (the module, each public top-level
    definition)."""
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    lines = 1  # the module's docstring
    for index, statement in enumerate(tree.body):
        if isinstance(statement, definitions):
            lines += 2 * (index > 0) + (not statement.name.startswith("_"))
        if isinstance(statement, ast.ClassDef):
            methods = [item for item in statement.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
            lines += max(len(methods) - 1, 0)
    return lines


def module_size(source: str) -> dict[str, int]:
    """``source``'s lines by kind, its total and its ``floor`` (code plus ``style_floor``)."""
    tree = ast.parse(source)
    strings = docstring_lines(tree)
    counts = dict.fromkeys(KINDS, 0)
    for number, line in enumerate(source.splitlines(), 1):
        text = line.strip()
        kind = "docstring" if number in strings else "blank" if not text else "comment" if text[0] == "#" else "code"
        counts[kind] += 1
    return {**counts, "lines": sum(counts.values()), "floor": counts["code"] + style_floor(tree)}


def package_size(package: Path) -> dict:
    """Per room and in all: modules, lines by kind, floor; the largest module."""
    if not (package / "__init__.py").is_file():
        raise ValueError(f"--package {package}: expected a package folder (one holding __init__.py)")
    rooms: dict[str, dict[str, int]] = {}
    largest = ("", 0)
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        room = relative.parts[0] if len(relative.parts) > 1 else "top"
        size = module_size(path.read_text(encoding="utf-8"))
        totals = rooms.setdefault(room, {"modules": 0, **dict.fromkeys([*KINDS, "lines", "floor"], 0)})
        totals["modules"] += 1
        for key, value in size.items():
            totals[key] += value
        if size["lines"] > largest[1]:
            largest = (str(relative), size["lines"])
    total = {key: sum(room[key] for room in rooms.values()) for key in next(iter(rooms.values()))}
    return {"rooms": rooms, "total": total, "largest_module": {"path": largest[0], "lines": largest[1]}}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--package", type=Path, default=ROOT / "purehr", help="the package folder to measure")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers to this JSON file")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = package_size(args.package)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    header = f"{'room':<12} {'modules':>7} {'lines':>7} " + " ".join(f"{kind:>9}" for kind in KINDS) + f" {'floor':>7}"
    print(header)
    by_size = sorted(result["rooms"].items(), key=lambda item: -item[1]["lines"])
    for name, room in [*by_size, ("all", result["total"])]:
        kinds = " ".join(f"{room[kind]:>9,}" for kind in KINDS)
        print(f"{name:<12} {room['modules']:>7} {room['lines']:>7,} {kinds} {room['floor']:>7,}")
    largest = result["largest_module"]
    print(f"largest module: {largest['path']} ({largest['lines']} lines)")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
