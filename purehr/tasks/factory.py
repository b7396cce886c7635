"""Your own environment as a task: ``module:factory`` names a function that returns a
``purehr.envs.base.Environment`` (``--tasks mypackage.my_env:make_env``). The factory is
called with the keyword arguments a run gives the task (``--env-arg``), and the run records
them, so a resume or a restore in a fresh process calls it again with the same ones.

The module may define ``PPO_CONFIG`` (a ``PPOConfig``): the task's default configuration
(else the default for its action space, ``purehr.tasks.environment_task``), ``<NAME>_CONFIG``
(``SAC_CONFIG``: that registered algorithm's config) its default for another algorithm
(``--tasks mine:make_env@sac``), ``PROTOCOL`` (a ``ProtocolSettings``): its checkpoint and
evaluation settings under every algorithm, and ``PACKAGES``
(distribution names): packages whose versions the run records besides those of the packages
the module imports itself (``imported_distributions``), and ``BASELINES`` (a dict: policy name ->
``make_policy(env, env_params)`` returning ``policy(obs, t, key) -> action``): reference
policies evaluated beside the floors, cached by their file's SHA-256, and
``REFERENCE_BASELINE`` (one of those names): the task's reference; the others are floors
(docs/environments.md). The current directory is importable,
as with ``python -m``: a file ``my_env.py`` there is ``my_env``."""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import inspect
import os
import site
import sys
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Any

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import ALGORITHMS, get_algorithm
from purehr.envs.base import Environment
from purehr.protocol_settings import ProtocolSettings
from purehr.tasks.environment_task import environment_task, package_versions
from purehr.tasks.task import Baseline, Task

POLICY_SIGNATURE = "make_policy(env, env_params) returning policy(obs, t, key) -> action"


@functools.lru_cache(maxsize=1)
def library_roots() -> tuple[Path, ...]:
    """The folders this interpreter imports the standard library and installed packages from
    (resolved): a module below one is not a user's code, and a fresh interpreter finds it
    without a ``PYTHONPATH``."""
    paths = sysconfig.get_paths()
    roots = {paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths}
    roots.update([*site.getsitepackages(), site.getusersitepackages()])
    return tuple(Path(root).resolve() for root in roots if root)


def is_factory_name(name: str) -> bool:
    module, _, attribute = name.rpartition(":")
    return bool(module) and attribute.isidentifier() and all(part.isidentifier() for part in module.split("."))


def factory_task(name: str) -> Task:
    """The task of ``module:factory``; ``ValueError`` when the module does not import, has no
    such callable or the factory raises (a ``TypeError`` or ``ValueError`` it raises for given
    arguments, its refusal of them, passes as it is), ``TypeError`` when it does not return an
    Environment, before anything runs."""
    module_name, _, attribute = name.rpartition(":")
    module = _import(module_name, name)
    factory = getattr(module, attribute, None)
    if not callable(factory):
        found = sorted(n for n in vars(module) if not n.startswith("_") and callable(vars(module)[n]))
        raise ValueError(f"task {name!r}: {module_name} has no function {attribute!r}; its callables: {found}")

    def make_env(**kwargs: Any) -> Environment:
        try:
            env = factory(**kwargs)
        except Exception as error:  # one line naming the factory, not the user's traceback
            if kwargs and isinstance(error, (TypeError, ValueError)):
                raise  # its refusal of the arguments, said as it is (the caller names task and arguments)
            raise ValueError(
                f"task {name!r}: {attribute}({_shown(kwargs)}) raised {type(error).__name__}: {error}"
            ) from error
        if not isinstance(env, Environment):
            raise TypeError(
                f"task {name!r}: {attribute}({_shown(kwargs)}) returned a {type(env).__name__}; expected a "
                "purehr.envs.base.Environment (see docs/environments.md and examples/my_env.py)"
            )
        return env

    config = getattr(module, "PPO_CONFIG", None)
    if config is not None and not isinstance(config, get_algorithm("ppo").config_class()):
        raise TypeError(f"task {name!r}: {module_name}.PPO_CONFIG is a {type(config).__name__}; expected a PPOConfig")
    packages = sorted({*imported_distributions(module), *_declared_packages(module, name)})
    return environment_task(
        name,
        make_env,
        default_config=config,
        default_protocol=_declared_protocol(module, module_name, name),
        default_configs=_declared_configs(module, module_name, name),
        baselines=_declared_baselines(module, name),
        reference=_declared_reference(module, name),
        source=lambda env: {
            "suite": "factory",
            "factory": name,
            "file": getattr(module, "__file__", None),
            "environment": f"{type(env).__module__}.{type(env).__name__}",
            "versions": package_versions(packages),  # looked up when recorded: a baseline's key holds them
        },
    )


def _declared_configs(module, module_name: str, name: str) -> dict[str, AlgorithmConfig]:
    """The module's ``<NAME>_CONFIG`` of each registered algorithm but PPO (``SAC_CONFIG``):
    the task's default for that algorithm."""
    configs = {}
    for algorithm, entry in ALGORITHMS.items():
        config = getattr(module, f"{algorithm.upper()}_CONFIG", None)
        if algorithm == "ppo" or config is None:
            continue
        if not isinstance(config, entry.config_class()):
            raise TypeError(
                f"task {name!r}: {module_name}.{algorithm.upper()}_CONFIG is a {type(config).__name__}; expected "
                f"a {entry.config_class().__name__}"
            )
        configs[algorithm] = config
    return configs


def _declared_protocol(module, module_name: str, name: str) -> ProtocolSettings | None:
    """The module's ``PROTOCOL`` (a ``ProtocolSettings``): the task's checkpoint and evaluation
    settings under every algorithm (``--tasks mine:make_env@pqn`` as ``@ppo``)."""
    protocol = getattr(module, "PROTOCOL", None)
    if protocol is not None and not isinstance(protocol, ProtocolSettings):
        raise TypeError(
            f"task {name!r}: {module_name}.PROTOCOL is a {type(protocol).__name__}; expected a "
            "purehr.protocol_settings.ProtocolSettings, e.g. PROTOCOL = ProtocolSettings(checkpoint_interval=4096)"
        )
    return protocol


def imported_distributions(module) -> list[str]:
    """The installed distributions of the top-level packages ``module``'s source imports, an
    import inside a function included (read from its import statements, not from what it holds
    at the moment: a lazy import is still seen). The standard library and the user's own
    modules are no distribution; purehr is left out (the run records its own revision)."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):  # no source to read (a compiled module): PACKAGES only
        return []
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    found = {dist for top in names for dist in _distributions_by_top_level().get(top, ())}
    return sorted(found - {"purehr"})


@functools.cache
def _distributions_by_top_level() -> dict[str, list[str]]:
    return metadata.packages_distributions()  # a scan of every installed package: once per process


def _declared_packages(module, name: str) -> list[str]:
    """The module's ``PACKAGES``, each an installed distribution, or refused naming it."""
    declared = getattr(module, "PACKAGES", ())
    if not isinstance(declared, (tuple, list)) or not all(isinstance(item, str) for item in declared):
        raise TypeError(
            f"task {name!r}: {module.__name__}.PACKAGES is {declared!r}; expected a tuple of distribution "
            'names, e.g. PACKAGES = ("pgx",)'
        )
    for package in declared:
        try:
            metadata.version(package)
        except metadata.PackageNotFoundError:
            raise ValueError(
                f"task {name!r}: {module.__name__}.PACKAGES names {package!r}, which is not an installed "
                "distribution; expected the names pip installs them by, whose versions the run records"
            ) from None
    return list(declared)


def _declared_baselines(module, name: str) -> list[Baseline]:
    """The module's ``BASELINES``, each a callable under a name ``--policy`` can take, or refused
    naming the entry. A baseline's definition holds the SHA-256 of the file defining its
    ``make_policy``: an edit of it is a new baseline definition (a new cache key)."""
    declared = getattr(module, "BASELINES", {})
    where = f"task {name!r}: {module.__name__}.BASELINES"
    if not isinstance(declared, dict):
        raise TypeError(
            f"{where} is a {type(declared).__name__}; expected a dict of name -> {POLICY_SIGNATURE}, "
            'e.g. BASELINES = {"greedy": make_greedy_policy}'
        )
    baselines = []
    for policy_name, make_policy in declared.items():
        if not isinstance(policy_name, str) or not policy_name.replace("-", "_").isidentifier():
            raise ValueError(f"{where} names {policy_name!r}; expected a name of letters, digits, _ and -")
        if not callable(make_policy):
            raise TypeError(
                f"{where}[{policy_name!r}] is {make_policy!r}, which is not callable; expected {POLICY_SIGNATURE}"
            )
        definition = f"{module.__name__}.BASELINES[{policy_name!r}]: {_code_digest(make_policy, module)}"
        baselines.append(Baseline(policy_name, policy_name, make_policy, definition))
    return baselines


def _declared_reference(module, name: str) -> str | None:
    reference = getattr(module, "REFERENCE_BASELINE", None)
    if reference is not None and not isinstance(reference, str):
        raise TypeError(
            f"task {name!r}: {module.__name__}.REFERENCE_BASELINE is {reference!r}; expected one of the names "
            "in BASELINES, or None"
        )
    return reference


def _code_digest(make_policy, module) -> str:
    """``sha256:<hex>`` of the file defining ``make_policy`` (else the module's), or ``unread``."""
    try:
        path = inspect.getsourcefile(make_policy)
    except TypeError:  # a partial or a callable object: the module's file
        path = None
    try:
        return "sha256:" + hashlib.sha256(Path(path or module.__file__).read_bytes()).hexdigest()
    except (OSError, TypeError):
        return "unread"


def _import(module_name: str, name: str):
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # after the installed packages: it never shadows one
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"task {name!r}: module {module_name!r} does not import ({error}); expected module:factory with the "
            "module on the Python path or in the current directory"
        ) from error
    except Exception as error:  # a SyntaxError, or an error raised while the module runs
        where = f" ({error.filename}:{error.lineno})" if isinstance(error, SyntaxError) else ""
        raise ValueError(
            f"task {name!r}: importing {module_name!r} raised {type(error).__name__}: {error}{where}"
        ) from error


def _shown(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
