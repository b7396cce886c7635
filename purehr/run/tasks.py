"""The tasks the protocol trains, each with its PPO defaults, held-out evaluation, baseline
and showcase recorder, so the runner can treat them alike."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp

from purehr.envs import hrv, swing
from purehr.envs.base import Environment
from purehr.ppo.config import HRV_DEFAULTS, SWING_DEFAULTS, PPOConfig

SWING_SHOWCASE_START_DEG = 3.0
HRV_SHOWCASE_SEED = 20260903
HRV_OBSERVATION_NOISE_STD = 0.02
"""Std of the Gaussian noise added to the observed ``current_hrv`` for the robustness probe
(``noisy_success_rate``): the size of the final curriculum stage's precision, about half a
step. The greedy oracle keeps 100% success at precision 0.05 and 99% at 0.02 under it
(episodes get longer: 6.2 -> 7.3 and 7.4 -> 29.7 steps)."""


@dataclass(frozen=True)
class Task:
    name: str
    make_env: Callable[..., Environment]          # make_env(**env_kwargs)
    default_config: PPOConfig
    baseline_name: str
    baseline_definition: str
    make_baseline_policy: Callable[[Environment, Any], Callable]
    heldout_evaluation: Callable[..., dict[str, jax.Array]]
    record_showcase: Callable[[Environment, Any, Callable], dict[str, jax.Array]]
    floor_policies: dict[str, Callable[[Environment, Any], Callable]] = dataclasses.field(default_factory=dict)
    """Policies PPO must beat by a wide margin (doing nothing, acting at random), evaluated
    on the same held-out protocol and recorded beside the baseline."""
    env_kwargs: Callable[[Environment], dict[str, Any]] = lambda env: {}
    """What a run records in its manifest to rebuild the same environment (restore, resume)."""
    legacy_env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The environment of runs recorded before manifests named it (the first task designs)."""

    def env_from_manifest(self, manifest: dict) -> Environment:
        recorded = (manifest.get("environments") or {}).get(self.name)
        return self.make_env(**(self.legacy_env_kwargs if recorded is None else recorded))


def hrv_checkpoint_evaluation(env, env_params, policy, num_episodes: int = 100,
                              seed: int = hrv.HRV_EVAL_SEED,
                              observation_noise: float = HRV_OBSERVATION_NOISE_STD) -> dict[str, jax.Array]:
    """``hrv.heldout_evaluation`` plus ``noisy_success_rate``: the same held-out episodes
    with N(0, observation_noise^2) added to the observed ``current_hrv`` (the environment is
    unaffected). Both runs are one vmap over the noise level (the clean one at exactly 0)."""
    levels = jnp.asarray([0.0, observation_noise], jnp.float32)
    both = jax.vmap(lambda noise: hrv.heldout_evaluation(
        env, env_params, policy, num_episodes=num_episodes, seed=seed, observation_noise=noise))(levels)
    metrics = {name: value[0] for name, value in both.items()}
    metrics["noisy_success_rate"] = both["success_rate"][1]
    return metrics


def _record_swing(env, env_params, policy):
    return swing.record_episode(env, env_params, policy, math.radians(SWING_SHOWCASE_START_DEG), 0.0)


def _record_hrv(env, env_params, policy):
    """One fixed episode, one row per step (rows after the end repeat the last state)."""
    observation, state = env.reset(jax.random.PRNGKey(HRV_SHOWCASE_SEED), env_params)

    def step(carry, t):
        observation, state, done = carry
        action = policy(observation, t, jax.random.PRNGKey(0))
        next_observation, next_state, reward, terminated, truncated, info = env.step(
            jax.random.fold_in(jax.random.PRNGKey(HRV_SHOWCASE_SEED), t), state, action, env_params)
        keep = lambda old, new: jax.tree.map(lambda a, b: jnp.where(done, a, b), old, new)  # noqa: E731
        row = {"current_hrv": jnp.where(done, state.current_hrv, next_state.current_hrv),
               "target_hrv": state.target_hrv,
               "distance": jnp.where(done, jnp.linalg.norm(state.current_hrv - state.target_hrv),
                                     info["distance"]),
               "reward": jnp.where(done, 0.0, reward),
               "success": jnp.logical_and(jnp.logical_not(done), info["success"])}
        done = done | terminated | truncated
        return (keep(observation, next_observation), keep(state, next_state), done), row

    _, rows = jax.lax.scan(step, (observation, state, jnp.bool_(False)),
                           jnp.arange(env.max_episode_steps(env_params)))
    return rows


def _hrv_no_op(env):
    """Style none, keep the length, keep every dimension: the text drifts only with noise."""
    action = jnp.asarray([hrv.STYLE_NONE, hrv.CONTENT_KEEP] + [hrv.MOD_KEEP] * env.hrv_dim, jnp.int32)
    return lambda obs, t, key: action


TASKS: dict[str, Task] = {
    "swing": Task(
        name="swing",
        make_env=swing.SwingEnv,
        default_config=SWING_DEFAULTS,
        baseline_name="structured controller",
        baseline_definition=("structured phase-law controller of docs/swing_model.md "
                             "(purehr.envs.swing.controller, default ControllerParams)"),
        make_baseline_policy=lambda env, params: swing.make_structured_policy(params),
        heldout_evaluation=swing.heldout_evaluation,
        record_showcase=_record_swing,
        floor_policies={"zero action": lambda env, params: swing.zero_policy,
                        "random": lambda env, params: swing.random_policy},
        legacy_env_kwargs={"params": swing.SwingParams(reset_noise=0.01)},
    ),
    "hrv": Task(
        name="hrv",
        make_env=lambda **kwargs: hrv.HRWritingEnv(**{"hrv_dim": 8, **kwargs}),
        default_config=HRV_DEFAULTS,
        baseline_name="oracle",
        baseline_definition="greedy oracle of docs/hrv_task.md (purehr.envs.hrv.oracle_action)",
        make_baseline_policy=lambda env, params: hrv.oracle_policy(env, params),
        heldout_evaluation=hrv_checkpoint_evaluation,
        record_showcase=_record_hrv,
        floor_policies={"no-op": lambda env, params: _hrv_no_op(env),
                        "random": lambda env, params: hrv.random_policy(env, params)},
        env_kwargs=lambda env: {"hrv_dim": env.hrv_dim, "similarity": env.similarity,
                                "reward_form": env.reward_form, "gap_features": env.gap_features},
        legacy_env_kwargs={"hrv_dim": 8, "reward_form": "potential", "gap_features": False},
    ),
}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {sorted(TASKS)}")
    return TASKS[name]
