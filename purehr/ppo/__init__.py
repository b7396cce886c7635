"""PPO: config, networks, distributions, loss, GAE and the one-scan training function."""

from purehr.ppo.config import HRV_DEFAULTS, SWING_DEFAULTS, PPOConfig, PPOHyperparams
from purehr.ppo.train import PPO, RunnerState, TrainResult, keys_for_seeds, make_ppo, make_train

__all__ = ["PPOConfig", "PPOHyperparams", "SWING_DEFAULTS", "HRV_DEFAULTS", "PPO", "RunnerState",
           "TrainResult", "keys_for_seeds", "make_ppo", "make_train"]
