"""The studies' tests run under the suite's set-up and use its helpers: tests/conftest.py (JAX's
compilation cache, the suite's XLA flags, the baselines' cache folder, each test's Ctrl-C handler,
``write_synthetic_run`` and the rest), one module per process, re-exported here.

A session that collected tests/ has loaded it already (``purehr_test_suite`` in ``sys.modules``):
its session-wide hooks (the xdist scheduler, the files' order and seconds, the cache folder's
removal) stay registered once. A session of studies/tests alone loads it here, those hooks included."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_NAME = "purehr_test_suite"
_LOADED_BY_THE_SUITE = _NAME in sys.modules
if not _LOADED_BY_THE_SUITE:
    _spec = importlib.util.spec_from_file_location(_NAME, Path(__file__).resolve().parents[2] / "tests" / "conftest.py")
    sys.modules[_NAME] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_NAME])
_SESSION_HOOKS = {
    "pytest_xdist_make_scheduler",
    "pytest_collection_modifyitems",
    "pytest_runtest_logreport",
    "pytest_sessionfinish",
}
globals().update(
    {
        name: value
        for name, value in vars(sys.modules[_NAME]).items()
        if not name.startswith("__") and not (_LOADED_BY_THE_SUITE and name in _SESSION_HOOKS)
    }
)
