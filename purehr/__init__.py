"""purehr: pure-JAX PPO whose whole training run is one compiled call."""

import warnings

# distrax 0.1.9 touches a deprecated jax attribute on import; the warning is not ours to fix.
warnings.filterwarnings("ignore", message=".*pytype_aval_mappings.*", category=DeprecationWarning)

from purehr.api import HRPPOModel, PPOModel, TrainingDiverged, train_hr_ppo  # noqa: E402
from purehr.envs.hrv import HRWritingEnv  # noqa: E402
from purehr.envs.swing import SwingEnv  # noqa: E402
from purehr.ppo.config import PPOConfig, PPOHyperparams  # noqa: E402
from purehr.ppo.train import make_ppo, make_train  # noqa: E402

__all__ = ["HRWritingEnv", "SwingEnv", "PPOConfig", "PPOHyperparams", "PPOModel", "HRPPOModel",
           "make_ppo", "make_train", "train_hr_ppo", "TrainingDiverged"]
__version__ = "0.1.0"
