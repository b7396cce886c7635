"""The layering of the package holds: every ``purehr`` module's imports (module level and inside
functions), parsed with ``ast``, point down the layers below, no two modules import each other
(directly or around a circle), and no purehr module is imported inside a function unless the
allow-list says why the import must be lazy. The map of the folders is docs/interfaces.md.

    leaf         purehr.types, purehr.protocol_settings, purehr.devices.host, purehr.reports.stats   anywhere
    envs         purehr.envs...         environments, spaces, wrappers, adapters
    engine       purehr.engine...       what algorithms are built from: loop, seeds, gae, networks   envs
    algorithms   purehr.algorithms.{base,registry,trainer,rollout_metrics}   what all share   envs, engine
    algorithm    purehr.algorithms.<name>...   one algorithm's own folder (PPO)   envs, engine, algorithms
    tasks        purehr.tasks...        the registry and each task             envs, engine, algorithms
    devices      purehr.devices...      sharding, jax.distributed              envs, engine, algorithms
    run          purehr.run...          the protocol                           envs, engine, algorithms, tasks, devices
                 inside: run.store < run.compiled < run.host < run.planning < run (its own modules)
    model        purehr.model...        the seed API, the saved-model format   envs, engine, algorithms, tasks, run
    viz          purehr.viz...          plotting from plain rows               envs, run
    reports      purehr.reports...      analysis, tables, summary, publish     everything above but algorithm, model
    experiments  purehr.experiments...  sweeps and their ranking               reports and everything below
    deploy       purehr.deploy...       a trained policy exported (ONNX)       the library but experiments
    cli          purehr.cli...          the scripts' command line              everything above but algorithm and top
    top          purehr/__init__, purehr.ppo (the old names)   the public names   everything

No room of the library imports an algorithm's own folder: the protocol reaches an algorithm
through ``purehr.algorithms.registry`` (which names it by a string) and the interface
(``purehr.algorithms.base``), so a second algorithm is one folder and one registry line.

The lab (``studies/``: the studies, their scripts and tests) and the measurements (``benchmarks/``)
sit outside the package: they import purehr, and nothing in purehr imports them, by name or by string.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "purehr"

# module (or package prefix) -> layer; the longest matching prefix wins
LAYER_OF = {
    "purehr.types": "leaf",
    "purehr.protocol_settings": "leaf",
    "purehr.devices.host": "leaf",
    "purehr.reports.stats": "leaf",
    "purehr.envs": "envs",
    "purehr.engine": "engine",
    "purehr.algorithms": "algorithms",
    "purehr.ppo": "top",  # the former home of PPO: its old module names, resolved by string
    "purehr.tasks": "tasks",
    "purehr.devices": "devices",
    "purehr.tracking": "tracking",
    "purehr.population": "population",
    "purehr.run.store": "run.store",
    "purehr.run.compiled": "run.compiled",
    "purehr.run.host": "run.host",
    "purehr.run.planning": "run.planning",
    "purehr.run": "run",
    "purehr.model": "model",
    "purehr.viz": "viz",
    "purehr.reports": "reports",
    "purehr.experiments": "experiments",
    "purehr.deploy": "deploy",
    "purehr.cli": "cli",
    "purehr.__main__": "top",  # python -m purehr: the console command (purehr.cli.main)
    "purehr": "top",  # purehr/__init__.py (PEP 562 exports)
}
RUN_ROOMS = {"run.store", "run.compiled", "run.host", "run.planning", "run"}
"""The runner's rooms, bottom up: the store (files, the run directory) < the compiled program < its
host end < the plan < the runner itself (``purehr.run``'s own modules: protocol, baselines, status)."""
RUN_BELOW = {"envs", "engine", "algorithms", "tasks", "devices", "tracking", "population"}
LIBRARY = {
    "envs",
    "engine",
    "algorithms",
    "tasks",
    "devices",
    "tracking",
    "population",
    *RUN_ROOMS,
    "model",
    "viz",
    "reports",
    "experiments",
}
"""Every room of the library: the command line and the package's exports may import them all."""
BELOW = {
    "leaf": set(),
    "envs": set(),
    "engine": {"envs"},
    "algorithms": {"envs", "engine"},
    "algorithm": {"envs", "engine", "algorithms"},
    "tasks": {"envs", "engine", "algorithms"},
    "devices": {"envs", "engine", "algorithms"},
    "tracking": {"algorithms"},
    "population": {"algorithms"},
    "run.store": RUN_BELOW,
    "run.compiled": RUN_BELOW | {"run.store"},
    "run.host": RUN_BELOW | {"run.store", "run.compiled"},
    "run.planning": RUN_BELOW | {"run.store", "run.compiled", "run.host"},
    "run": RUN_BELOW | RUN_ROOMS - {"run"},
    "model": {"envs", "engine", "algorithms", "tasks", "tracking"} | RUN_ROOMS,
    "viz": {"envs"} | RUN_ROOMS,
    "reports": {"envs", "engine", "algorithms", "tasks", "devices", "tracking", "population", "viz"} | RUN_ROOMS,
    "experiments": LIBRARY - {"model", "experiments"},
    "deploy": LIBRARY - {"experiments"},
    "cli": LIBRARY | {"deploy"},
    "top": LIBRARY | {"cli", "algorithm", "deploy"},
}
MAY_IMPORT = {layer: {"leaf", layer} | below for layer, below in BELOW.items()}
# (importing module, imported module) -> why the import sits inside a function
LAZY_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {
    ("purehr.cli.arguments", "purehr.tasks"): "every script's parser imports cli.arguments; the registry (JAX, the "
    "tasks) is needed only when a --task value is parsed, so --help and a bad flag answer at once",
    ("purehr.cli.cache_flags", "purehr.run.compiled.compile_cache"): "the scripts' parsers add the cache flags; the "
    "cache module imports JAX, needed only once the flags are parsed, so --help answers at once",
}

COMMAND_IMPORTS_LAZY = (
    "a command (purehr COMMAND, scripts/<name>.py) imports the library only once its flags are parsed: --help and "
    "a bad flag answer at once, and --x64, --distributed and the compile cache are set before anything starts JAX"
)
LAZY_IMPORTERS_ALLOWED: dict[str, str] = {
    f"purehr.cli.{command}": COMMAND_IMPORTS_LAZY
    for command in ("train", "sweep", "render", "analyze", "publish", "compare", "export")
}
"""Modules every one of whose purehr imports may sit inside a function, and why (the scripts' code, moved into
the package as it was)."""


STRING_IMPORT = re.compile(r"^(purehr(?:\.\w+)+)(?::[\w.]+)?$")
"""A module named by a string, alone or as ``module:attribute``: imported later by ``importlib``."""
STRING_IMPORTS_ALLOWED = {
    ("purehr.algorithms.registry", "algorithm"),  # the one module that names each algorithm's folder, by string
}
"""(importing module, imported layer) pairs a string may name although an import statement may not."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SHARED_BY_ALGORITHMS = {"base", "registry", "trainer", "rollout_metrics"}
"""The modules of ``purehr.algorithms`` that are not one algorithm's folder."""


def layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] == ["purehr", "algorithms"] and len(parts) > 2 and parts[2] not in SHARED_BY_ALGORITHMS:
        return "algorithm"  # purehr.algorithms.<name>...: every algorithm's own folder
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
    for node in ast.walk(tree):  # imports by string: "purehr.x.y:attribute", "purehr.x.y" (importlib, registries)
        text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
        named = STRING_IMPORT.match(text)
        if named and (name, layer(named.group(1))) not in STRING_IMPORTS_ALLOWED:
            found.append((node.lineno, named.group(1), False))
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
            if lazy and (importer, imported) not in LAZY_IMPORTS_ALLOWED and importer not in LAZY_IMPORTERS_ALLOWED:
                problems.append(
                    f"{where}:{line}: imports {imported} inside a function: import it at the "
                    "module top, or add it to LAZY_IMPORTS_ALLOWED with the reason it must be lazy"
                )
    return list(dict.fromkeys(problems))  # one line per problem, even for `import a, b`


def test_every_import_follows_the_layering():
    problems = layering_violations()
    assert not problems, "layering violations:\n  " + "\n  ".join(problems)


def test_the_layering_check_sees_upward_and_lazy_imports(tmp_path, monkeypatch):
    """The check itself: an envs module importing the algorithm, and a lazy import in run, are reported."""
    package = tmp_path / "purehr"
    (package / "envs").mkdir(parents=True)
    (package / "run").mkdir()
    (package / "algorithms" / "ppo").mkdir(parents=True)
    for init in (
        "__init__.py",
        "envs/__init__.py",
        "run/__init__.py",
        "algorithms/__init__.py",
        "algorithms/ppo/__init__.py",
    ):
        (package / init).write_text("")
    (package / "algorithms" / "ppo" / "train.py").write_text("")
    (package / "envs" / "bad.py").write_text("from purehr.algorithms.ppo import train\n")
    (package / "run" / "lazy.py").write_text("def f():\n    from ..envs import bad\n")
    (package / "algorithms" / "named.py").write_text('DEFAULTS = "purehr.run.lazy:f"\n')  # upward, by string
    monkeypatch.setitem(globals(), "PACKAGE", package)
    assert layering_violations() == [
        "purehr/algorithms/named.py:1: purehr.algorithms.named (algorithm) imports purehr.run.lazy (run): "
        "algorithm may import only algorithm, algorithms, engine, envs, leaf",
        "purehr/envs/bad.py:1: purehr.envs.bad (envs) imports purehr.algorithms.ppo.train (algorithm): envs may "
        "import only envs, leaf",
        "purehr/run/lazy.py:2: imports purehr.envs.bad inside a function: import it at the module top, or add it "
        "to LAZY_IMPORTS_ALLOWED with the reason it must be lazy",
    ]


def import_circles() -> list[list[str]]:
    """The circles of the import graph of ``purehr`` (every import, lazy ones too): each a
    strongly connected set of two or more modules, or a module importing itself."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        graph.setdefault(module_name(path), set()).update(module for _, module, _ in purehr_imports(path))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def connect(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.get(module, ())):
            if imported not in index:
                connect(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in graph.get(module, ()):
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return circles


def test_no_import_circle():
    assert import_circles() == []


def _package(tmp_path, files: dict[str, str]) -> Path:
    package = tmp_path / "purehr"
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
        for parent in (package / name).relative_to(package).parents:
            (package / parent / "__init__.py").touch()
    return package


def test_the_checks_see_a_circle_and_the_new_rooms_rules(tmp_path, monkeypatch):
    """The checks themselves: a circle between two reports modules, a plot importing an
    experiment's object (viz takes plain rows), the library importing the command line, and the run's
    store importing its plan (a room of the runner above it)."""
    package = _package(
        tmp_path,
        {
            "reports/analysis.py": "from purehr.reports import table\n",
            "reports/table.py": "from purehr.reports import analysis\n",
            "experiments/sweep.py": "",
            "viz/heatmap.py": "from purehr.experiments.sweep import GroupResult\n",
            "cli/arguments.py": "",
            "model/facade.py": "from purehr.cli import arguments\n",
            "run/store/status.py": "from purehr.run.planning import run_plan\n",
            "run/planning/run_plan.py": "",
        },
    )
    monkeypatch.setitem(globals(), "PACKAGE", package)
    assert import_circles() == [["purehr.reports.analysis", "purehr.reports.table"]]
    problems = layering_violations()
    store_problem = problems.pop(1)  # sorted by path: model/, run/, viz/
    assert problems == [
        "purehr/model/facade.py:1: purehr.model.facade (model) imports purehr.cli.arguments (cli): model may "
        "import only algorithms, engine, envs, leaf, model, run, run.compiled, run.host, run.planning, run.store, "
        "tasks, tracking",
        "purehr/viz/heatmap.py:1: purehr.viz.heatmap (viz) imports purehr.experiments.sweep (experiments): viz "
        "may import only envs, leaf, run, run.compiled, run.host, run.planning, run.store, viz",
    ]
    assert store_problem == (
        "purehr/run/store/status.py:1: purehr.run.store.status (run.store) imports purehr.run.planning.run_plan "
        "(run.planning): run.store may import only algorithms, devices, engine, envs, leaf, population, run.store, "
        "tasks, tracking"
    )


OUTSIDE = ("studies", "benchmarks")
"""The lab and the measurements: beside the package, not installed, never imported by it."""
OUTSIDE_BY_STRING = re.compile(r"\b(?:studies|benchmarks)\.[A-Za-z_]")
"""A module named in a string (``importlib.import_module("studies.ablation")``, a
``"benchmarks._common"`` handed to a loader); a path (``benchmarks/README.md``) is no import."""


def outside_references(package: Path) -> list[str]:
    """Every import of ``studies`` or ``benchmarks`` in ``package``, and every string naming a module of theirs."""
    problems = []
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package.parent)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            elif (
                isinstance(node, ast.Constant) and isinstance(node.value, str) and OUTSIDE_BY_STRING.search(node.value)
            ):
                problems.append(
                    f"{where}:{node.lineno}: names {OUTSIDE_BY_STRING.search(node.value).group()}.. in a string"
                )
                continue
            else:
                continue
            problems += [f"{where}:{node.lineno}: imports {name}" for name in names if name.split(".")[0] in OUTSIDE]
    return problems


MAX_MODULE_LINES = 500


def test_no_module_is_over_500_lines():
    """One concept per file: a module that outgrows 500 lines is split where its concepts part."""
    sizes = {path.relative_to(PACKAGE): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    over = {str(path): lines for path, lines in sorted(sizes.items()) if lines > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"
    assert max(sizes.values()) > MAX_MODULE_LINES // 2  # the walk found the package's modules


def test_the_package_imports_neither_the_studies_nor_the_benchmarks():
    problems = outside_references(PACKAGE)
    assert not problems, "purehr imports the lab or the measurements:\n  " + "\n  ".join(problems)


def test_the_outside_check_sees_imports_and_module_strings(tmp_path):
    package = _package(
        tmp_path,
        {
            "run/a.py": "import studies.ablation\nfrom benchmarks import _common\n",
            "run/b.py": 'import importlib\nM = importlib.import_module("studies.limits.study")\n'
            'DOC = "benchmarks/README.md"\n',
        },
    )
    assert outside_references(package) == [
        "purehr/run/a.py:1: imports studies.ablation",
        "purehr/run/a.py:2: imports benchmarks",
        "purehr/run/b.py:2: names studies.l.. in a string",
    ]


def test_the_studies_import_only_modules_the_package_has():
    """The modules moved out to the lab (studies/) leave no stale import behind. (benchmarks/ is
    not checked: program_digest.py imports the old module names on purpose, to digest older commits.)"""
    root = PACKAGE.parent
    missing = [
        f"{path.relative_to(root)}:{line}: imports {module}, which purehr does not have"
        for path in sorted((root / "studies").rglob("*.py"))
        for line, module, _ in purehr_imports(path)
        if not is_submodule(module)
    ]
    assert not missing, "\n  ".join(missing)
