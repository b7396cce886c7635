"""PPO: config, networks, distributions, loss, GAE, the scan over updates and the one-scan
training function."""

from purehr.ppo.config import HRV_DEFAULTS, HYPERPARAMETERS, SWING_DEFAULTS, PPOConfig, PPOHyperparams
from purehr.ppo.train import PPO, RunnerState, Trainer, TrainResult, keys_for_seeds, make_ppo, make_train

__all__ = [
    "PPOConfig",
    "PPOHyperparams",
    "HYPERPARAMETERS",
    "SWING_DEFAULTS",
    "HRV_DEFAULTS",
    "PPO",
    "RunnerState",
    "Trainer",
    "TrainResult",
    "keys_for_seeds",
    "make_ppo",
    "make_train",
]
