"""purejaxql's PQN beside purehr's (``peers.py --configs purejaxql:CartPole-v1 --purejaxql PATH``).

purejaxql is not a package. PATH is a folder with its unmodified ``pqn_gymnax.py`` and its Hydra
configs ``config/config.yaml`` and ``config/alg/pqn_cartpole.yaml``
(``git clone https://github.com/mttga/purejaxql``, then PATH = ``purejaxql/purejaxql``). The
config is composed by Hydra itself from that folder, as its script composes it
(``+alg=pqn_cartpole``, then the ``alg`` group merged on top), so the numbers compared are the
published ones, read, not copied. Its script imports hydra, omegaconf, safetensors and wandb at
the top: the ``purejaxql`` extra (``pip install -c constraints.txt -e ".[purejaxql]"``).

``PQN_FIELDS`` maps each purejaxql key to the ``PQNConfig`` field it sets; ``SWITCHED_OFF``
sets the keys for what purehr's protocol-less ``make_train`` does not do (its test episodes
during training; wandb, already off in its config); ``UNUSED`` are keys its ``make_train``
does not read. Any other key, or a value with no purehr counterpart (BatchNorm, input
BatchNorm, a decay horizon other than the budget), is refused by name before any work.

What is not the same (said in the record too): purejaxql's Dense layers start from flax's
LeCun normal (purehr: its scaled normals), its network carries an unused input BatchNorm whose
batch statistics it updates in training; it treats CartPole's time limit as a termination
(purehr bootstraps a truncated step from Q of its final observation: one more forward pass
over the rollout's B rows per update); its learning rate decays at every gradient step
(purehr's once per update); its random actions are ``randint`` draws inside the rollout
(purehr's Gumbel draws before it). On MinAtar, purehr's convolution is ``purehr.engine.conv.Conv``
(flax's convolution as a matmul over patches: the same parameters and sums, another order;
benchmarks/README.md, "PQN on MinAtar: the convolution's kernel gradient"), purejaxql's flax's.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from purehr.algorithms.pqn.config import PQNConfig

SCRIPTS = {"CartPole-v1": ("pqn_gymnax", "pqn_cartpole"), "Asterix-MinAtar": ("pqn_minatar", "pqn_minatar")}
"""purejaxql config name -> (its script, its ``alg`` config)."""
MINATAR_NETWORK = {"conv_channels": (16,), "hidden": (128,), "input_scale": 1.0 / 255.0}
"""``pqn_minatar.py``'s network, fixed in its code (``CNN``, ``QNetwork``): the observation divided
by 255, a 3 x 3 convolution of 16 channels (stride 1, VALID), LayerNorm, ReLU, Dense 128,
LayerNorm, ReLU, the Q head. Its config has no HIDDEN_SIZE, NUM_LAYERS nor REW_SCALE (its script
reads a missing REW_SCALE as 1)."""

PQN_FIELDS = {
    "TOTAL_TIMESTEPS": "total_timesteps (its whole updates: it floors to NUM_ENVS x NUM_STEPS)",
    "NUM_ENVS": "num_envs",
    "NUM_STEPS": "num_steps",
    "NUM_EPOCHS": "num_epochs",
    "NUM_MINIBATCHES": "minibatch_size = NUM_ENVS x NUM_STEPS / NUM_MINIBATCHES",
    "LR": "learning_rate",
    "LR_LINEAR_DECAY": "anneal_lr",
    "MAX_GRAD_NORM": "max_grad_norm",
    "GAMMA": "gamma",
    "LAMBDA": "q_lambda",
    "EPS_START": "epsilon_start",
    "EPS_FINISH": "epsilon_finish",
    "EPS_DECAY": "epsilon_decay_fraction",
    "REW_SCALE": "reward_scaling",
    "HIDDEN_SIZE": "hidden = (HIDDEN_SIZE,) x NUM_LAYERS",
    "NUM_LAYERS": "hidden = (HIDDEN_SIZE,) x NUM_LAYERS",
    "NORM_TYPE": "layer_norm (layer_norm only; batch_norm has no purehr counterpart)",
    "NORM_INPUT": "normalize_observations = False (its input BatchNorm has no purehr counterpart)",
    "TOTAL_TIMESTEPS_DECAY": "(must equal TOTAL_TIMESTEPS: purehr decays over its own budget)",
    "ENV_NAME": "the environment, gymnax:ENV_NAME",
    "ENV_KWARGS": "(must be empty: gymnax's defaults)",
}
"""purejaxql key -> what it sets in ``PQNConfig`` (benchmarks/README.md lists it). Its network's
activation is ReLU, fixed in its code: purehr's ``activation="relu"``."""
SWITCHED_OFF = {"TEST_DURING_TRAINING": False, "WANDB_MODE": "disabled"}
"""Set in its config dict: purehr's ``make_train`` runs no test episodes and logs nowhere."""
UNUSED = {
    "NUM_SEEDS": "seeds: the benchmark's --seeds, vmapped",
    "SEED": "keys: the benchmark's",
    "HYP_TUNE": "its wandb sweep, not run",
    "ENTITY": "wandb",
    "PROJECT": "wandb",
    "WANDB_LOG_ALL_SEEDS": "wandb",
    "SAVE_PATH": "its script's saving, not run",
    "ALG_NAME": "a name",
    "alg": "the group, merged on top",
    "TEST_INTERVAL": "test episodes: switched off",
    "TEST_NUM_ENVS": "test episodes: switched off",
    "EPS_TEST": "test episodes: switched off",
}


def compose_config(folder: Path, name: str, budget: int | None = None) -> dict:
    """purejaxql's config for ``name`` as its script receives it, composed by Hydra from
    ``folder/config``; ``budget`` (a reduced run, said in the record) replaces
    ``TOTAL_TIMESTEPS`` and ``TOTAL_TIMESTEPS_DECAY`` both, so its schedules keep their shape."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(folder.resolve() / "config"), version_base=None):
        composed = compose(config_name="config", overrides=[f"+alg={SCRIPTS[name][1]}"])
    config = OmegaConf.to_container(composed)
    config = {**config, **config["alg"]}  # as its single_run does
    if budget is not None:
        config.update(TOTAL_TIMESTEPS=float(budget), TOTAL_TIMESTEPS_DECAY=float(budget))
    return config


def purejaxql_as_purehr(config: dict) -> PQNConfig:
    """purejaxql's numbers in purehr's terms (``PQN_FIELDS``); a key or value with no
    counterpart raises ``ValueError`` naming it."""
    unknown = set(config) - set(PQN_FIELDS) - set(SWITCHED_OFF) - set(UNUSED)
    if unknown:
        raise ValueError(
            f"purejaxql config keys {sorted(unknown)}: not mapped to PQNConfig; expected only {sorted(PQN_FIELDS)}"
        )
    refusals = {
        "NORM_TYPE": config["NORM_TYPE"] != "layer_norm",
        "NORM_INPUT": bool(config.get("NORM_INPUT", False)),
        "TOTAL_TIMESTEPS_DECAY": config["TOTAL_TIMESTEPS_DECAY"] != config["TOTAL_TIMESTEPS"],
        "ENV_KWARGS": bool(config.get("ENV_KWARGS")),
    }
    for key, refused in refusals.items():
        if refused:
            raise ValueError(f"purejaxql {key}={config[key]!r}: no purehr counterpart; expected {PQN_FIELDS[key]}")
    batch = config["NUM_ENVS"] * config["NUM_STEPS"]
    return PQNConfig(
        total_timesteps=int(config["TOTAL_TIMESTEPS"]) // batch * batch,
        num_envs=config["NUM_ENVS"],
        num_steps=config["NUM_STEPS"],
        num_epochs=config["NUM_EPOCHS"],
        minibatch_size=batch // config["NUM_MINIBATCHES"],
        learning_rate=config["LR"],
        anneal_lr=config["LR_LINEAR_DECAY"],
        max_grad_norm=float(config["MAX_GRAD_NORM"]),
        gamma=config["GAMMA"],
        q_lambda=config["LAMBDA"],
        epsilon_start=config["EPS_START"],
        epsilon_finish=config["EPS_FINISH"],
        epsilon_decay_fraction=config["EPS_DECAY"],
        reward_scaling=config.get("REW_SCALE", 1.0),
        **(
            MINATAR_NETWORK
            if "HIDDEN_SIZE" not in config
            else {"hidden": (config["HIDDEN_SIZE"],) * config["NUM_LAYERS"]}
        ),
        activation="relu",
        layer_norm=True,
        normalize_observations=False,
    )


def load_purejaxql(folder: Path) -> None:
    """``folder``'s scripts made importable; a clear line when it is not purejaxql's."""
    missing = [
        path
        for path in ("pqn_gymnax.py", "config/config.yaml", "config/alg/pqn_cartpole.yaml")
        if not (folder / path).is_file()
    ]
    if missing:
        raise SystemExit(
            f"error: --purejaxql {folder}: expected a folder holding purejaxql's pqn_gymnax.py and its "
            "config/ (git clone https://github.com/mttga/purejaxql; the folder purejaxql/purejaxql); "
            f"missing: {', '.join(missing)}"
        )
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


class PurejaxqlRun:
    """purejaxql's ``make_train`` on its composed config (test episodes off), all seeds vmapped
    in one jitted call, as its ``single_run`` calls it; the call returns the train state."""

    def __init__(self, folder: Path, name: str, seeds: int, evaluator, budget: int | None = None):
        self.evaluator = evaluator  # peers.seed_mean_greedy_returns: one evaluator for both libraries
        self.module = importlib.import_module(SCRIPTS[name][0])
        self.settings = {**compose_config(folder, name, budget), **SWITCHED_OFF}  # what is compared
        self.config = dict(self.settings)
        train = self.module.make_train(self.config)  # adds NUM_UPDATES and friends to it
        self.keys = jax.random.split(jax.random.PRNGKey(0), seeds)
        started = time.perf_counter()
        self.compiled = jax.jit(jax.vmap(lambda key: train(key)["runner_state"][0])).lower(self.keys).compile()
        self.compile_s = time.perf_counter() - started
        self.env_steps = seeds * int(self.config["NUM_UPDATES"]) * self.config["NUM_ENVS"] * self.config["NUM_STEPS"]

    def run(self):
        started = time.perf_counter()
        result = jax.block_until_ready(self.compiled(self.keys))
        return time.perf_counter() - started, result

    def greedy_returns(self, train_state, env) -> np.ndarray:
        """Greedy (argmax Q, its ``EPS_TEST`` = 0) returns, its network in inference mode."""
        sizes = (
            {"hidden_size": self.config["HIDDEN_SIZE"], "num_layers": self.config["NUM_LAYERS"]}
            if "HIDDEN_SIZE" in self.config
            else {}  # pqn_minatar.py's network has its sizes in its code
        )
        network = self.module.QNetwork(
            action_dim=env.action_space(env.default_params).n,
            norm_type=self.config["NORM_TYPE"],
            norm_input=self.config.get("NORM_INPUT", False),
            **sizes,
        )

        def policy_of(variables):
            def policy(observation, t, key):
                return jnp.argmax(network.apply(variables, observation[None], train=False)[0])

            return policy

        variables = {"params": train_state.params, "batch_stats": train_state.batch_stats}
        return self.evaluator(policy_of, variables, env)
