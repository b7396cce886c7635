"""purehr: pure-JAX PPO whose whole training run is one compiled call.

The public names below load on first use (PEP 562), so that ``import purehr.cli.arguments`` (every
script's ``--help`` and flag checks) answers without importing JAX.
"""

import importlib
import warnings

# distrax 0.1.9 touches a deprecated jax attribute on import; the warning is not ours to fix.
warnings.filterwarnings("ignore", message=".*pytype_aval_mappings.*", category=DeprecationWarning)

# several CPU devices (forced host devices, a multi-process CPU run) need one spare XLA pool
# thread for the host callbacks; this must happen before JAX starts its backend
from purehr.devices.host import prepare_host_devices  # noqa: E402

prepare_host_devices()

_EXPORTS = {
    "HRPPOModel": "purehr.model.facade",
    "PPOModel": "purehr.model.facade",
    "train_hr_ppo": "purehr.model.facade",
    "train": "purehr.model.facade",
    "Model": "purehr.model.facade",
    "TrainingDiverged": "purehr.model.facade",
    "HRWritingEnv": "purehr.envs.hrv",
    "SwingEnv": "purehr.envs.swing",
    "PPOConfig": "purehr.algorithms.ppo.config",
    "PPOHyperparams": "purehr.algorithms.ppo.config",
    "PQNConfig": "purehr.algorithms.pqn.config",
    "SACConfig": "purehr.algorithms.sac.config",
    "ProtocolSettings": "purehr.protocol_settings",
    "make_ppo": "purehr.algorithms.ppo.algorithm",
    "make_train": "purehr.algorithms.trainer",
    "use_compile_cache": "purehr.run.compiled.compile_cache",
    "restore": "purehr.run.restoring",
    "Restored": "purehr.run.restoring",
    "export": "purehr.deploy.export",
}

__all__ = [
    "HRWritingEnv",
    "SwingEnv",
    "PPOConfig",
    "PPOHyperparams",
    "PQNConfig",
    "SACConfig",
    "ProtocolSettings",
    "PPOModel",
    "HRPPOModel",
    "make_ppo",
    "make_train",
    "train_hr_ppo",
    "train",
    "Model",
    "TrainingDiverged",
    "use_compile_cache",
    "restore",
    "Restored",
    "export",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'purehr' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
