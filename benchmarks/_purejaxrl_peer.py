"""PureJaxRL's PPO beside purehr's (``peers.py --configs purejaxrl:NAME --purejaxrl PATH``):
its published configs (``PUREJAXRL_CONFIGS``), their purehr translation, and its unmodified
``make_train`` run all seeds vmapped in one jitted call (peers.py's docstring says what is not
the same). Moved out of peers.py unchanged."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from purehr.algorithms.ppo.config import PPOConfig

# PureJaxRL purejaxrl/ppo.py's __main__ config (commit 31756b1), its progress printing off
PUREJAXRL_CONFIGS = {
    "CartPole-v1": {
        "LR": 2.5e-4,
        "NUM_ENVS": 4,
        "NUM_STEPS": 128,
        "TOTAL_TIMESTEPS": 5e5,
        "UPDATE_EPOCHS": 4,
        "NUM_MINIBATCHES": 4,
        "GAMMA": 0.99,
        "GAE_LAMBDA": 0.95,
        "CLIP_EPS": 0.2,
        "ENT_COEF": 0.01,
        "VF_COEF": 0.5,
        "MAX_GRAD_NORM": 0.5,
        "ACTIVATION": "tanh",
        "ENV_NAME": "CartPole-v1",
        "ANNEAL_LR": True,
        "DEBUG": False,
    },
    # purejaxrl/ppo_continuous_action.py's __main__ config (commit 31756b1) on Brax's
    # inverted_pendulum instead of hopper (the task of the Brax peer, and light enough for a
    # 2-core CPU) and at 6 of its updates of 2,048 envs x 10 steps instead of 5e7 steps
    "inverted_pendulum": {
        "LR": 3e-4,
        "NUM_ENVS": 2048,
        "NUM_STEPS": 10,
        "TOTAL_TIMESTEPS": 6 * 2048 * 10,
        "UPDATE_EPOCHS": 4,
        "NUM_MINIBATCHES": 32,
        "GAMMA": 0.99,
        "GAE_LAMBDA": 0.95,
        "CLIP_EPS": 0.2,
        "ENT_COEF": 0.0,
        "VF_COEF": 0.5,
        "MAX_GRAD_NORM": 0.5,
        "ACTIVATION": "tanh",
        "ENV_NAME": "inverted_pendulum",
        "ANNEAL_LR": False,
        "NORMALIZE_ENV": True,
        "DEBUG": False,
    },
}
PUREJAXRL_MODULES = {"CartPole-v1": "ppo", "inverted_pendulum": "ppo_continuous_action"}
"""The PureJaxRL file each config runs: its discrete trainer (gymnax) or its continuous one
(Brax, through its ``BraxGymnaxWrapper``)."""
PUREJAXRL_WIDTHS = {"ppo": (64, 64), "ppo_continuous_action": (256, 256)}


def purejaxrl_as_purehr(name: str) -> PPOConfig:
    """PureJaxRL's numbers in purehr's terms: its whole updates (it floors the budget), a
    minibatch size, its learning rate (annealed or not) and global-norm clip, the widths of the
    file's networks (64 x 64 discrete, 256 x 256 continuous), its observation normalisation."""
    config = PUREJAXRL_CONFIGS[name]
    widths = PUREJAXRL_WIDTHS[PUREJAXRL_MODULES[name]]
    batch = config["NUM_ENVS"] * config["NUM_STEPS"]
    return PPOConfig(
        total_timesteps=int(config["TOTAL_TIMESTEPS"]) // batch * batch,
        num_envs=config["NUM_ENVS"],
        num_steps=config["NUM_STEPS"],
        num_epochs=config["UPDATE_EPOCHS"],
        minibatch_size=batch // config["NUM_MINIBATCHES"],
        learning_rate=config["LR"],
        anneal_lr=config["ANNEAL_LR"],
        gamma=config["GAMMA"],
        gae_lambda=config["GAE_LAMBDA"],
        clip_range=config["CLIP_EPS"],
        ent_coef=config["ENT_COEF"],
        vf_coef=config["VF_COEF"],
        max_grad_norm=config["MAX_GRAD_NORM"],
        actor_hidden=widths,
        critic_hidden=widths,
        activation=config["ACTIVATION"],
        normalize_observations=config.get("NORMALIZE_ENV", False),
        # the continuous file's state-independent log std starts at zero
        **({"log_std_init": 0.0} if widths == PUREJAXRL_WIDTHS["ppo_continuous_action"] else {}),
    )


def load_purejaxrl(folder: Path) -> bool:
    """``folder`` made importable (PureJaxRL's files import each other by bare name); returns
    whether an empty ``navix`` stood in."""
    missing = [name for name in (*set(PUREJAXRL_MODULES.values()), "wrappers") if not (folder / f"{name}.py").is_file()]
    if missing:
        raise SystemExit(
            f"error: --purejaxrl {folder}: expected a folder holding PureJaxRL's ppo.py, "
            "ppo_continuous_action.py and wrappers.py (git clone https://github.com/luchris429/purejaxrl; "
            f"the folder purejaxrl/purejaxrl); missing: {', '.join(sorted(missing))}"
        )
    stand_in = importlib.util.find_spec("navix") is None
    if stand_in:
        sys.modules["navix"] = types.ModuleType("navix")
    sys.path.insert(0, str(folder))
    return stand_in


class PureJaxRLRun:
    """One PureJaxRL file's ``make_train`` on its config, all seeds vmapped in one jitted call.
    The call returns the train state and, for the continuous file, its observation
    normaliser's running mean and variance (they live in its wrapped environment state), which
    its greedy policy needs."""

    def __init__(self, name: str, seeds: int, evaluator):
        self.evaluator = evaluator  # peers.seed_mean_greedy_returns: one evaluator for all libraries
        self.module = importlib.import_module(PUREJAXRL_MODULES[name])
        self.continuous = PUREJAXRL_MODULES[name] == "ppo_continuous_action"
        self.config = dict(PUREJAXRL_CONFIGS[name])
        train = self.module.make_train(self.config)  # adds NUM_UPDATES and MINIBATCH_SIZE to it
        self.keys = jax.random.split(jax.random.PRNGKey(0), seeds)
        started = time.perf_counter()
        self.compiled = jax.jit(jax.vmap(lambda key: self.kept(train(key)["runner_state"]))).lower(self.keys).compile()
        self.compile_s = time.perf_counter() - started
        self.env_steps = seeds * int(self.config["NUM_UPDATES"]) * self.config["NUM_ENVS"] * self.config["NUM_STEPS"]

    def kept(self, runner_state):
        train_state, env_state = runner_state[0], runner_state[1]
        if not self.continuous:
            return train_state, None
        if not self.config["NORMALIZE_ENV"]:
            return train_state, None
        normaliser = env_state.env_state  # under the reward normaliser
        # its statistics start as zeros_like(a batch of observations) and every row gets the
        # same update, so each is one row repeated per environment
        return train_state, (normaliser.mean[0], normaliser.var[0])

    def run(self):
        started = time.perf_counter()
        result = jax.block_until_ready(self.compiled(self.keys))
        return time.perf_counter() - started, result

    def greedy_returns(self, result, env) -> np.ndarray:
        train_state, moments = result
        space = env.action_space(env.default_params)
        if self.continuous:
            network = self.module.ActorCritic(space.shape[0], activation=self.config["ACTIVATION"])
        else:
            network = self.module.ActorCritic(space.n, activation=self.config["ACTIVATION"])

        def policy_of(params_and_moments):
            params, moments = params_and_moments

            def policy(observation, t, key):
                if moments is not None:  # NormalizeVecObservation's transform
                    observation = (observation - moments[0]) / jnp.sqrt(moments[1] + 1e-8)
                pi, _ = network.apply(params, observation)
                return jnp.clip(pi.mean(), -1.0, 1.0) if self.continuous else jnp.argmax(pi.logits)

            return policy

        return self.evaluator(policy_of, (train_state.params, moments), env)
