"""The former home of PPO, kept so that code written against it still imports: each old module
name (``purehr.ppo.config``, ``purehr.ppo.trainer``, ...) is the module that now holds it (the
same module object, not a copy). New code imports ``purehr.algorithms.ppo`` or
``purehr.engine``; see docs/interfaces.md."""

import importlib
import sys

MOVED = {
    "acting": "purehr.engine.acting",
    "algorithm": "purehr.algorithms.ppo.algorithm",
    "config": "purehr.algorithms.ppo.config",
    "loss": "purehr.algorithms.ppo.loss",
    "metrics": "purehr.algorithms.ppo.metrics",
    "policy_core": "purehr.algorithms.ppo.policy_core",
    "recurrent": "purehr.algorithms.ppo.recurrent",
    "trainer": "purehr.algorithms.trainer",
    "compile_options": "purehr.engine.compile_options",
    "distributions": "purehr.engine.distributions",
    "gae": "purehr.engine.gae",
    "loop": "purehr.engine.loop",
    "networks": "purehr.engine.networks",
    "shuffle": "purehr.engine.shuffle",
}


class _MovedModules:
    """A meta-path finder that answers ``purehr.ppo.<old name>`` with the moved module."""

    def find_spec(self, fullname, path=None, target=None):
        prefix, _, name = fullname.rpartition(".")
        if prefix != __name__ or name not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module(MOVED[spec.name.rpartition(".")[2]])

    def exec_module(self, module):
        sys.modules[f"{__name__}.{module.__name__.rpartition('.')[2]}"] = module


sys.meta_path.append(_MovedModules())


def __getattr__(name: str):
    if name in MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
