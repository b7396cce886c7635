"""The multi-task runner: one compiled call, checkpoints, resume, restore.

``restore`` and ``Restored`` load on first use (PEP 562), so that ``import purehr.run.run_dir``
(the renderer, scripts' ``--help``) does not import JAX.
"""

import importlib
import sys
import types

__all__ = ["Restored", "restore"]


def __getattr__(name: str):
    if name in __all__:
        value = getattr(importlib.import_module("purehr.run.restore"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'purehr.run' has no attribute {name!r}")


class _Package(types.ModuleType):
    """Importing the submodule ``purehr.run.restore`` binds it on this package under the name
    of the function it exports: keep the function, so ``purehr.run.restore(...)`` restores."""

    def __setattr__(self, name: str, value) -> None:
        if name == "restore" and isinstance(value, types.ModuleType):
            value = value.restore
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
