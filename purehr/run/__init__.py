"""The protocol runner: one compiled call for every task and seed, checkpoints, resume, restore.

``restore`` and ``Restored`` (``purehr.run.restoring``) load on first use (PEP 562), so that
``import purehr.run.store.run_dir`` (the renderer, scripts' ``--help``) does not import JAX.
"""

import importlib

__all__ = ["Restored", "restore"]


def __getattr__(name: str):
    if name in __all__:
        value = getattr(importlib.import_module("purehr.run.restoring"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'purehr.run' has no attribute {name!r}")
