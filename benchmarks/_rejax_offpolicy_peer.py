"""rejax's PQN and SAC beside purehr's (``peers.py --configs rejax-pqn:CartPole-v1
rejax-sac:Pendulum-v1``; rejax 0.1.3, the ``bench`` extra).

The settings are rejax's published ones, its ``configs/gymnax/cartpole.yaml`` ``pqn`` section
(commit 4954fbf of keraJLi/rejax) and ``configs/gymnax/pendulum.yaml`` ``sac`` section (commit
b33bab4), copied here (rejax's wheel ships no configs). ``PQN_FIELDS`` and ``SAC_FIELDS`` map
each rejax key to the purehr field it sets; ``SWITCHED_OFF`` is its in-training evaluation
(``eval_freq``: 128 stochastic episodes every that many steps inside its scan; here a no-op
callback and eval_freq = total_timesteps, so both time training only). Any other key, or a
value with no purehr counterpart, is refused by name before any work.

What is not the same (said in the record too, ``DIFFERENCES``): flax's default LeCun-normal
Dense init in rejax (purehr: its scaled normals); rejax's ``done`` ends the bootstrap at a time
limit too (purehr bootstraps a truncated step from its final observation); every random draw of
rejax happens inside its step loop (purehr draws a rollout's randomness before its scan).
PQN: rejax's Adam and element-wise gradient clip (``optax.clip``), purehr's RAdam and
global-norm clip (PQNConfig has neither choice). SAC: rejax normalises observations by running
statistics (purehr's SAC has no normaliser); rejax's log std is clipped to [-10, 2] (purehr:
tanh-squashed into [-5, 2]); rejax updates the actor against the critics before their step and
the temperature by -alpha (log pi + target), purehr the critics first and the temperature by
-log alpha (log pi + target); before ``fill_buffer`` rejax acts with its policy, purehr
uniformly at random.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from purehr.algorithms.pqn.config import PQNConfig
from purehr.algorithms.sac.config import SACConfig

PQN_CONFIGS = {
    "CartPole-v1": dict(
        env="CartPole-v1",
        num_envs=16,
        num_steps=128,
        num_minibatches=16,
        max_grad_norm=10,
        learning_rate=0.0003,
        num_epochs=5,
        total_timesteps=524288,
        eval_freq=16384,
        eps_start=1,
        eps_end=0.05,
        exploration_fraction=0.5,
        gamma=0.99,
        td_lambda=0.9,
        normalize_observations=False,
    )
}
"""rejax configs/gymnax/cartpole.yaml, pqn section (commit 4954fbf)."""
SAC_CONFIGS = {
    "Pendulum-v1": dict(
        env="Pendulum-v1",
        agent_kwargs={"activation": "swish"},
        num_envs=1,
        buffer_size=10_000,
        fill_buffer=256,
        batch_size=256,
        learning_rate=0.01,
        num_epochs=1,
        total_timesteps=10_000,
        eval_freq=100,
        gamma=0.99,
        polyak=0.98,
        target_entropy_ratio=None,
        normalize_observations=True,
    )
}
"""rejax configs/gymnax/pendulum.yaml, sac section (commit b33bab4)."""
REJAX_WIDTHS = (64, 64)
"""rejax's networks: PQN's are fixed in ``PQN.create_agent``, SAC's ``hidden_layer_sizes``
default; neither config sets them."""

PQN_FIELDS = {
    "env": "the environment, GymnaxEnv(env)",
    "total_timesteps": "total_timesteps (a whole number of its updates)",
    "num_envs": "num_envs",
    "num_steps": "num_steps",
    "num_epochs": "num_epochs",
    "num_minibatches": "minibatch_size = num_envs x num_steps / num_minibatches",
    "learning_rate": "learning_rate, anneal_lr=False (rejax's is constant)",
    "max_grad_norm": "max_grad_norm (rejax: element-wise clip; purehr: global norm)",
    "gamma": "gamma",
    "td_lambda": "q_lambda",
    "eps_start": "epsilon_start",
    "eps_end": "epsilon_finish",
    "exploration_fraction": "epsilon_decay_fraction (of the budget in both: the same updates)",
    "normalize_observations": "normalize_observations",
    "(fixed in its code)": "hidden=(64, 64), activation='relu', layer_norm=True, reward_scaling=1",
}
SAC_FIELDS = {
    "env": "the environment, GymnaxEnv(env)",
    "total_timesteps": "total_timesteps",
    "num_envs": "num_envs; num_steps=1 (one step per environment and iteration)",
    "num_epochs": "gradient_steps (per iteration)",
    "batch_size": "sample_size",
    "buffer_size": "buffer_size",
    "fill_buffer": "learning_starts (no gradient step before it in both)",
    "learning_rate": "actor_learning_rate, critic_learning_rate, temperature_learning_rate",
    "gamma": "gamma",
    "polyak": "tau = 1 - polyak (target_update_freq 1: per gradient step in both at num_epochs 1)",
    "target_entropy_ratio": "(discrete only; null) target_entropy_per_dimension=-1: rejax's -action_dim",
    "agent_kwargs": "activation; actor_hidden = critic_hidden = (64, 64), its default widths",
    "normalize_observations": "(no purehr counterpart: purehr's SAC has no normaliser; rejax's stays on)",
    "(defaults)": "initial_temperature=1 (log alpha 0), no gradient clip (max_grad_norm inf), twin critics",
}
SWITCHED_OFF = {"eval_freq": "total_timesteps (one evaluation slot, its callback a no-op)"}
DIFFERENCES = __doc__.split("What is not the same (said in the record too, ``DIFFERENCES``): ")[1].strip()


def _check_keys(settings: dict, fields: dict, name: str) -> None:
    unknown = set(settings) - set(fields) - set(SWITCHED_OFF)
    if unknown:
        raise ValueError(f"rejax {name} config keys {sorted(unknown)}: not mapped; expected only {sorted(fields)}")


def rejax_pqn_as_purehr(settings: dict) -> PQNConfig:
    """rejax's PQN numbers in ``PQNConfig`` terms (``PQN_FIELDS``); ``ValueError`` naming a key
    with no counterpart, or a budget that is not a whole number of its updates."""
    _check_keys(settings, PQN_FIELDS, "pqn")
    batch = settings["num_envs"] * settings["num_steps"]
    if settings["total_timesteps"] % batch:
        raise ValueError(
            f"rejax pqn total_timesteps={settings['total_timesteps']}: expected a multiple of num_envs x num_steps "
            f"= {batch} (rejax rounds up by iteration, purehr by update: only whole updates compare)"
        )
    return PQNConfig(
        total_timesteps=settings["total_timesteps"],
        num_envs=settings["num_envs"],
        num_steps=settings["num_steps"],
        num_epochs=settings["num_epochs"],
        minibatch_size=batch // settings["num_minibatches"],
        learning_rate=settings["learning_rate"],
        anneal_lr=False,
        max_grad_norm=float(settings["max_grad_norm"]),
        gamma=settings["gamma"],
        q_lambda=settings["td_lambda"],
        epsilon_start=float(settings["eps_start"]),
        epsilon_finish=settings["eps_end"],
        epsilon_decay_fraction=settings["exploration_fraction"],
        reward_scaling=1.0,
        hidden=REJAX_WIDTHS,
        activation="relu",
        layer_norm=True,
        normalize_observations=settings["normalize_observations"],
    )


def rejax_sac_as_purehr(settings: dict) -> SACConfig:
    """rejax's SAC numbers in ``SACConfig`` terms (``SAC_FIELDS``); ``ValueError`` naming a key
    with no counterpart (a discrete ``target_entropy_ratio``)."""
    _check_keys(settings, SAC_FIELDS, "sac")
    if settings.get("target_entropy_ratio") is not None:
        raise ValueError(
            f"rejax sac target_entropy_ratio={settings['target_entropy_ratio']!r}: a discrete SAC setting; "
            "expected null (purehr's SAC is continuous)"
        )
    rate = settings["learning_rate"]
    return SACConfig(
        total_timesteps=settings["total_timesteps"],
        num_envs=settings["num_envs"],
        num_steps=1,
        gradient_steps=settings["num_epochs"],
        sample_size=settings["batch_size"],
        buffer_size=settings["buffer_size"],
        learning_starts=settings["fill_buffer"],
        actor_learning_rate=rate,
        critic_learning_rate=rate,
        temperature_learning_rate=rate,
        gamma=settings["gamma"],
        tau=round(1.0 - settings["polyak"], 12),
        initial_temperature=1.0,
        target_entropy_per_dimension=-1.0,
        actor_hidden=REJAX_WIDTHS,
        critic_hidden=REJAX_WIDTHS,
        activation=settings["agent_kwargs"]["activation"],
    )


class RejaxOffPolicyRun:
    """rejax's ``PQN`` or ``SAC`` on its config (evaluation off), all seeds vmapped in one jitted
    call; the call returns its train state. ``evaluator``: ``peers.seed_mean_greedy_returns``."""

    def __init__(self, algorithm: str, name: str, seeds: int, evaluator):
        import rejax

        self.evaluator = evaluator
        self.settings = (PQN_CONFIGS if algorithm == "pqn" else SAC_CONFIGS)[name]
        total = self.settings["total_timesteps"]
        self.algo = getattr(rejax, algorithm.upper()).create(**{**self.settings, "eval_freq": total})
        self.algo = self.algo.replace(eval_callback=lambda algo, ts, rng: jnp.zeros(()), skip_initial_evaluation=True)
        self.keys = jax.random.split(jax.random.PRNGKey(0), seeds)
        started = time.perf_counter()
        self.compiled = jax.jit(jax.vmap(lambda key: self.algo.train(key)[0])).lower(self.keys).compile()
        self.compile_s = time.perf_counter() - started
        per_iteration = self.algo.num_envs * getattr(self.algo, "num_steps", 1)
        self.env_steps = seeds * -(-total // per_iteration) * per_iteration

    def run(self):
        started = time.perf_counter()
        result = jax.block_until_ready(self.compiled(self.keys))
        return time.perf_counter() - started, result

    def greedy_returns(self, train_state, env) -> np.ndarray:
        """argmax Q (PQN) or the squashed mean at the bounds (SAC), after rejax's observation
        normaliser where it has one."""
        algo = self.algo

        def policy_of(ts):
            def policy(observation, t, key):
                if algo.normalize_observations:
                    observation = algo.normalize_obs(ts.obs_rms_state, observation)
                if algo.discrete:
                    return jnp.argmax(algo.agent.apply(ts.q_ts.params, observation[None])[0])
                mean = algo.actor.apply(ts.actor_ts.params, observation[None], method="_action_dist").mean()[0]
                low, high = algo.action_space.low, algo.action_space.high
                return (high + low) / 2 + jnp.tanh(mean) * (high - low) / 2

            return policy

        return self.evaluator(policy_of, train_state, env)
