"""The HRV's optimal-control references (studies/limits/hrv_search.py, results/limits/README.md): on a tiny
instance the exact search equals brute force over every action sequence; on held-out episodes
the lower bound is never above the replayed optimum, and the plans replay in HRWritingEnv at
the searched length; the episodes are the evaluation's own."""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from purehr.envs.hrv.baselines import oracle_policy
from purehr.envs.hrv.env import MOD_KEEP, NUM_STYLES, HRWritingEnv
from purehr.envs.hrv.evaluation import heldout_evaluation
from studies.limits import hrv_search

TINY_DIM = 2
TINY_STEPS = 3
HELDOUT = 16  # held-out episodes the searches run on (the study runs all 100)


def _brute_force_fewest(start, target, gain, params, max_steps):
    """The fewest steps by enumerating every action of every step (float64, clipped to [0, 1]
    as HRWritingEnv clips, noise-free); 0 if none within ``max_steps``. Independent of the
    search: no multisets, no order argument, no windows."""
    scales = np.asarray(params.step_scale, np.float64) * float(params.step_size)
    styles = np.asarray(params.style_vectors, np.float64)
    moves = np.asarray(
        [
            scales[op] * gain * (np.asarray(mods, np.float64) + styles[style])
            for style in range(NUM_STYLES)
            for op in range(len(scales))
            for mods in itertools.product((-1, 0, 1), repeat=start.size)
        ]
    )  # (A, D): every action's move
    points = np.asarray(start, np.float64)[None, :]
    for steps in range(1, max_steps + 1):
        points = np.clip((points[:, None, :] + moves[None]).reshape(-1, start.size), 0.0, 1.0)
        if np.any(np.max(np.abs(points - target), axis=1) <= float(params.target_precision)):
            return steps
    return 0


def test_exact_search_equals_brute_force_on_a_tiny_instance():
    env = HRWritingEnv(hrv_dim=TINY_DIM)
    params = env.default_params.replace(noise_scale=0.0)
    table = hrv_search.MultisetTable(params, max_steps=TINY_STEPS)
    rng = np.random.default_rng(0)
    found, brute = [], []
    for _ in range(40):
        start = rng.uniform(0.35, 0.65, TINY_DIM)
        target = np.clip(start + rng.uniform(-0.3, 0.3, TINY_DIM), 0.0, 1.0)
        gain = rng.uniform(0.5, 1.5, TINY_DIM)
        result = hrv_search.fewest_steps(table, start, target, gain, np.zeros((TINY_STEPS, TINY_DIM)), params)
        found.append(result["steps"])
        brute.append(_brute_force_fewest(start, target, gain, params, TINY_STEPS))
        if result["steps"]:  # its plan reaches the target in that many steps (noise-free, float64)
            plan = result["plan"]
            move = (plan[:, 2:] - MOD_KEEP) + np.asarray(params.style_vectors, np.float64)[plan[:, 0]]
            scale = np.asarray(params.step_scale, np.float64)[plan[:, 1]][:, None] * float(params.step_size)
            end = start + np.sum(scale * gain * move, axis=0)
            assert np.max(np.abs(end - target)) <= float(params.target_precision)
    assert found == brute
    assert {1, 2, 3} <= set(found)  # the instances exercise every length, not only the easy ones


@pytest.fixture(scope="module")
def heldout():
    env = HRWritingEnv(hrv_dim=8)
    params = env.default_params
    episodes = hrv_search.heldout_episodes(env, params, num_episodes=HELDOUT)
    table = hrv_search.MultisetTable(params, max_steps=7)
    return env, params, episodes, table


def test_episodes_are_the_evaluations_own(heldout):
    """The greedy oracle run through ``policy_episodes`` on the recomputed episodes takes the
    mean length and success that ``heldout_evaluation`` itself reports."""
    env, params, episodes, _ = heldout
    ours = hrv_search.policy_episodes(env, params, oracle_policy(env, params), episodes)
    theirs = heldout_evaluation(env, params, oracle_policy(env, params), num_episodes=HELDOUT)
    assert float(np.mean(ours["length"])) == pytest.approx(float(theirs["episode_length"]), abs=1e-4)
    assert float(np.mean(ours["success"])) == pytest.approx(float(theirs["success_rate"]), abs=1e-6)


def test_bound_is_never_above_the_replayed_optimum(heldout):
    env, params, episodes, table = heldout
    noise_free = params.replace(noise_scale=0.0)
    bound = hrv_search.lower_bound(episodes.start, episodes.target, episodes.gain, params)
    steps, plans, _ = hrv_search.search_all(table, episodes, noise_free, noisy=False, say=lambda _: None)
    assert np.all(steps > 0)
    assert np.all(bound["steps"] <= steps)
    replayed = hrv_search.replay_plans(env, noise_free, episodes, plans)
    np.testing.assert_array_equal(replayed["length"], steps)
    assert not replayed["clipped"].any()
    # one step fewer never reaches the target: the search is exact, not just feasible
    shorter = plans.copy()
    for e, n in enumerate(steps):
        shorter[e, n - 1, 0], shorter[e, n - 1, 1:] = 0, MOD_KEEP  # the last step made a no-op
    assert not np.any(hrv_search.replay_plans(env, noise_free, episodes, shorter)["length"] > 0)


def test_realised_noise_optimum_replays_with_the_evaluations_noise(heldout):
    env, params, episodes, table = heldout
    steps, plans, _ = hrv_search.search_all(table, episodes, params, noisy=True, say=lambda _: None)
    replayed = hrv_search.replay_plans(env, params, episodes, plans)
    np.testing.assert_array_equal(replayed["length"], steps)
    # the recomputed noise is the environment's: a no-op step moves current_hrv by exactly it
    _, state = env.reset(jnp.asarray(episodes.reset_keys[0]), params)
    noop = jnp.asarray([0, 1] + [MOD_KEEP] * 8, jnp.int32)
    _, after, *_ = env.step(jnp.asarray(episodes.step_keys[0, 0]), state, noop, params)
    moved = np.asarray(jnp.clip(state.current_hrv + episodes.noise[0, 0], 0, 1))
    np.testing.assert_allclose(np.asarray(after.current_hrv), moved, atol=1e-7)
