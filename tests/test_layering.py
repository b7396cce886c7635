"""The layering of the package holds: every ``purehr`` module's imports (module level and inside
functions), parsed with ``ast``, point down the layers below, and no purehr module is imported
inside a function unless the allow-list says why the import must be lazy.

    leaf utilities   purehr.cli, purehr.host_devices, purehr.stats   importable from anywhere
    envs             purehr.envs...                          nothing of purehr above envs
    ppo              purehr.ppo...                           envs
    tasks            purehr.tasks (the one task registry)    envs, ppo
    distributed      purehr.distributed                      envs, ppo
    run              purehr.run...                           envs, ppo, tasks, distributed
    top              analysis, viz, sweep, ablation, results_table, api, summary, publish, reward_comparison,
                     purehr/__init__
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "purehr"

# module (or package prefix) -> layer; the longest matching prefix wins
LAYER_OF = {
    "purehr.cli": "leaf",
    "purehr.host_devices": "leaf",
    "purehr.stats": "leaf",
    "purehr.envs": "envs",
    "purehr.ppo": "ppo",
    "purehr.tasks": "tasks",
    "purehr.distributed": "distributed",
    "purehr.run": "run",
    "purehr": "top",  # purehr/__init__.py (PEP 562 exports)
    "purehr.analysis": "top",
    "purehr.viz": "top",
    "purehr.sweep": "top",
    "purehr.ablation": "top",
    "purehr.results_table": "top",
    "purehr.api": "top",
    "purehr.summary": "top",
    "purehr.publish": "top",
    "purehr.reward_comparison": "top",
}
MAY_IMPORT = {
    "leaf": {"leaf"},
    "envs": {"leaf", "envs"},
    "ppo": {"leaf", "envs", "ppo"},
    "tasks": {"leaf", "envs", "ppo", "tasks"},
    "distributed": {"leaf", "envs", "ppo", "distributed"},
    "run": {"leaf", "envs", "ppo", "tasks", "distributed", "run"},
    "top": {"leaf", "envs", "ppo", "tasks", "distributed", "run", "top"},
}
# (importing module, imported module) -> why the import sits inside a function
LAZY_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str | None:
    for prefix in sorted(LAYER_OF, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            if prefix == "purehr" and module != "purehr":
                return None  # a purehr module placed in no layer
            return LAYER_OF[prefix]
    return None


def is_submodule(module: str) -> bool:
    path = PACKAGE.parent / Path(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def purehr_imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, imported purehr module, inside a function) for every import in ``path``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: resolve against this module's package
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in child.names:
                    # ``from purehr.envs import hrv`` imports the submodule purehr.envs.hrv
                    full = f"{base}.{alias.name}"
                    found.append((child.lineno, full if is_submodule(full) else base, in_function))
            visit(child, nested)

    visit(tree, False)
    return [(line, module, lazy) for line, module, lazy in found if module.split(".")[0] == "purehr"]


def layering_violations() -> list[str]:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE.parent)
        importer = module_name(path)
        own = layer(importer)
        if own is None:
            problems.append(f"{where}: {importer} is in no layer (add it to LAYER_OF)")
            continue
        for line, imported, lazy in purehr_imports(path):
            theirs = layer(imported)
            if theirs is None:
                problems.append(f"{where}:{line}: imports {imported}, which is in no layer")
            elif theirs not in MAY_IMPORT[own]:
                problems.append(
                    f"{where}:{line}: {importer} ({own}) imports {imported} ({theirs}): "
                    f"{own} may import only {', '.join(sorted(MAY_IMPORT[own]))}"
                )
            if lazy and (importer, imported) not in LAZY_IMPORTS_ALLOWED:
                problems.append(
                    f"{where}:{line}: imports {imported} inside a function: import it at the "
                    "module top, or add it to LAZY_IMPORTS_ALLOWED with the reason it must be lazy"
                )
    return list(dict.fromkeys(problems))  # one line per problem, even for `import a, b`


def test_every_import_follows_the_layering():
    problems = layering_violations()
    assert not problems, "layering violations:\n  " + "\n  ".join(problems)


def test_the_layering_check_sees_upward_and_lazy_imports(tmp_path, monkeypatch):
    """The check itself: an envs module importing ppo, and a lazy import in run, are reported."""
    package = tmp_path / "purehr"
    (package / "envs").mkdir(parents=True)
    (package / "run").mkdir()
    (package / "ppo").mkdir()
    for init in ("__init__.py", "envs/__init__.py", "run/__init__.py", "ppo/__init__.py"):
        (package / init).write_text("")
    (package / "ppo" / "train.py").write_text("")
    (package / "envs" / "bad.py").write_text("from purehr.ppo import train\n")
    (package / "run" / "lazy.py").write_text("def f():\n    from ..envs import bad\n")
    monkeypatch.setitem(globals(), "PACKAGE", package)
    assert layering_violations() == [
        "purehr/envs/bad.py:1: purehr.envs.bad (envs) imports purehr.ppo.train (ppo): envs may import only envs, leaf",
        "purehr/run/lazy.py:2: imports purehr.envs.bad inside a function: import it at the module top, or add it "
        "to LAZY_IMPORTS_ALLOWED with the reason it must be lazy",
    ]
