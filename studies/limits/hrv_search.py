"""Fewest HRV steps to each held-out target: a per-dimension lower bound, the exact optimum by a
search over the shared style / content choices, and replay in ``HRWritingEnv`` (results/limits/README.md).

Why a search over multisets: one step moves dimension i by ``a g_i (m_i + s_k,i)`` with
``a = step_scale[o] step_size`` and ``m_i in {-1, 0, +1}``. The dimensions share only the style
``k`` and the content op ``o``; and without clipping the end point after T steps is a sum, so
the order of the steps does not matter. For one multiset of T (style, op) pairs the end point
of dimension i is ``x_i + N_i + g_i (S_i + v_i)``: ``S_i`` the styles' sum, ``N_i`` the
noise's, and ``v_i = sum a_t m_t,i`` any of the finitely many sums the per-op counts allow,
chosen independently per dimension. T steps can succeed iff some multiset puts a ``v_i`` in
every dimension's precision window: C(T + 14, 14) multisets x ``hrv_dim`` interval checks,
exact (float64 on the host; windows narrowed / widened by ``TOLERANCE`` tell a borderline case
from float32 rounding). Clipping at [0, 1] only shortens moves, so the lower bound holds with
it; the search assumes no step clips, which the replay in the environment checks.

Noise: the evaluation's noise is fixed per episode (drawn from its step keys, whatever the
actions), so the search is run twice: noise-free (the reference of the task itself) and with
the evaluation's realised noise (the fewest steps any policy could take on that very episode).

Shapes: ``E`` episodes, ``D = hrv_dim``, plans ``(E, T, 2 + D)`` int32 env actions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from purehr.envs.base import freeze_after_done
from purehr.envs.hrv.env import MOD_KEEP, NUM_STYLES, HRVParams, HRWritingEnv, context_gain
from purehr.envs.hrv.evaluation import HRV_EVAL_SEED
from purehr.envs.policies import as_recurrent
from purehr.types import Policy

TOLERANCE = 1e-5
"""Window margin that separates exact feasibility from float32 rounding (about 1e-7 here)."""
MAX_STEPS = 9
"""The search's largest T (C(23, 14) = 817,190 multisets)."""


@dataclass(frozen=True)
class Episodes:
    """The held-out episodes as the evaluation draws them (float32 as the environment has them)."""

    start: np.ndarray  # (E, D) current_hrv at reset
    target: np.ndarray  # (E, D)
    gain: np.ndarray  # (E, D) context gain
    noise: np.ndarray  # (E, H, D) the noise each step adds (noise_scale * N(0, 1) from its step key)
    reset_keys: np.ndarray  # (E, 2) uint32
    step_keys: np.ndarray  # (E, H, 2) uint32
    policy_keys: np.ndarray  # (E, H, 2) uint32


def heldout_episodes(env: HRWritingEnv, params: HRVParams, num_episodes: int = 100, seed: int = HRV_EVAL_SEED):
    """The episodes of ``purehr.envs.hrv.evaluation.heldout_evaluation``: its keys (episode key ->
    reset, rollout; rollout -> H policy keys, H step keys, one noise key), resets and step noise."""
    horizon = env.max_episode_steps(params)
    episode_keys = jax.random.split(jax.random.PRNGKey(seed), num_episodes)
    reset_keys, rollout_keys = jax.vmap(jax.random.split, out_axes=1)(episode_keys)
    per_step = jax.vmap(lambda k: jax.random.split(k, 2 * horizon + 1))(rollout_keys)
    policy_keys, step_keys = per_step[:, :horizon], per_step[:, horizon : 2 * horizon]
    _, states = jax.vmap(lambda k: env.reset(k, params))(reset_keys)
    draw = jax.vmap(jax.vmap(lambda k: params.noise_scale * jax.random.normal(k, (env.hrv_dim,), jnp.float32)))
    return Episodes(
        start=np.asarray(states.current_hrv),
        target=np.asarray(states.target_hrv),
        gain=np.asarray(jax.vmap(lambda c: context_gain(c, params))(states.context)),
        noise=np.asarray(draw(step_keys)),
        reset_keys=np.asarray(reset_keys),
        step_keys=np.asarray(step_keys),
        policy_keys=np.asarray(policy_keys),
    )


# ----------------------------------------------------------------------------- bound and search


def per_step_reach(params: HRVParams, gain: np.ndarray) -> np.ndarray:
    """(..., D) the largest move one step can make per dimension: the largest scale x step_size
    x gain x (1 + the largest |style component|)."""
    style = np.abs(np.asarray(params.style_vectors, np.float64)).max(axis=0)
    scale = float(np.max(np.asarray(params.step_scale, np.float64)))
    return scale * float(params.step_size) * np.asarray(gain, np.float64) * (1.0 + style)


def lower_bound(start, target, gain, params: HRVParams) -> dict[str, np.ndarray]:
    """Noise aside: dimension i needs ceil((|gap_i| - precision) / reach_i) steps, and an
    episode at least one. Returns ``steps`` (E,) and ``per_dim`` (E, D)."""
    gap = np.abs(np.asarray(target, np.float64) - np.asarray(start, np.float64))
    need = (gap - float(params.target_precision)) / per_step_reach(params, gain)
    per_dim = np.maximum(np.ceil(need - 1e-9), 0).astype(np.int64)
    return {"steps": np.maximum(per_dim.max(axis=-1), 1), "per_dim": per_dim}


class MultisetTable:
    """Every multiset of T (style, content op) pairs, for T = 1..max_steps, with what a search
    needs: the pairs' counts (M, 15), each multiset's per-op counts, and per per-op count the
    reachable modification sums ``v`` (sorted) and one (j_condense, j_keep, j_expand) for each."""

    def __init__(self, params: HRVParams, max_steps: int = MAX_STEPS):
        self.scales = np.asarray(params.step_scale, np.float64) * float(params.step_size)  # (3,)
        self.styles = np.asarray(params.style_vectors, np.float64)  # (NUM_STYLES, D)
        self.pairs = [(k, o) for k in range(NUM_STYLES) for o in range(len(self.scales))]
        self.max_steps = max_steps
        self._levels: dict[int, tuple] = {}
        self._sums: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}

    def level(self, steps: int):
        """(counts (M, 15) int16, op counts (M, 3), style sums per unit gain (M, D), groups: the
        rows of each distinct op count, {op counts: (rows,)})."""
        if steps not in self._levels:
            combos = np.fromiter(
                itertools.chain.from_iterable(itertools.combinations_with_replacement(range(len(self.pairs)), steps)),
                np.int16,
            ).reshape(-1, steps)
            counts = np.zeros((combos.shape[0], len(self.pairs)), np.int16)
            np.add.at(counts, (np.arange(combos.shape[0])[:, None], combos), 1)
            op_of = np.asarray([o for _, o in self.pairs])
            ops = np.stack([counts[:, op_of == o].sum(axis=1) for o in range(len(self.scales))], axis=1)
            unit = np.asarray([self.scales[o] * self.styles[k] for k, o in self.pairs])  # (15, D)
            keys, inverse = np.unique(ops, axis=0, return_inverse=True)
            groups = {tuple(int(n) for n in key): np.flatnonzero(inverse.ravel() == g) for g, key in enumerate(keys)}
            self._levels[steps] = (counts, ops, counts.astype(np.float64) @ unit, groups)
        return self._levels[steps]

    def sums(self, ops: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Sorted distinct v = sum_o scale_o j_o, |j_o| <= n_o, and one j (3,) per v."""
        if ops not in self._sums:
            grid = np.stack(np.meshgrid(*[np.arange(-n, n + 1) for n in ops], indexing="ij"), -1).reshape(-1, len(ops))
            values = grid @ self.scales
            order = np.argsort(values, kind="stable")
            values, grid = values[order], grid[order]
            keep = np.concatenate([[True], np.diff(values) > 1e-12])
            self._sums[ops] = (values[keep], grid[keep])
        return self._sums[ops]


def _feasible(table: MultisetTable, steps: int, offset: np.ndarray, gain: np.ndarray, half_width: float):
    """For one episode: (M,) whether each multiset of ``steps`` reaches every window
    ``offset_i +- half_width`` (offset = target - start - noise, per dimension), and (M, D) the
    index of the chosen v in its op counts' ``sums`` (-1 where none)."""
    _, _, style_sums, groups = table.level(steps)
    low = (offset - half_width) / gain - style_sums  # (M, D) window for v_i
    high = (offset + half_width) / gain - style_sums
    chosen = np.full(low.shape, -1, np.int64)
    for key, rows in groups.items():
        values, _ = table.sums(key)
        at = np.searchsorted(values, low[rows], side="left")
        inside = (at < values.size) & (values[np.minimum(at, values.size - 1)] <= high[rows])
        chosen[rows] = np.where(inside, at, -1)
    return np.all(chosen >= 0, axis=1), chosen


def fewest_steps(
    table: MultisetTable, start, target, gain, noise, params: HRVParams, from_steps: int = 1
) -> dict[str, object]:
    """The exact fewest steps for one episode (start, target, gain (D,); noise (H, D) added per
    step, zeros for the noise-free problem) and a plan that takes them: ``steps`` (0 if none up
    to ``table.max_steps``), ``plan`` (steps, 2 + D) int32, ``borderline`` (some T < steps was feasible
    only with the windows widened by ``TOLERANCE``: float32 rounding could decide it)."""
    precision = float(params.target_precision)
    start, target, gain = (np.asarray(v, np.float64) for v in (start, target, gain))
    noise = np.asarray(noise, np.float64)
    borderline = False
    for steps in range(max(1, from_steps), table.max_steps + 1):
        offset = target - start - noise[:steps].sum(axis=0)
        strict, chosen = _feasible(table, steps, offset, gain, precision - TOLERANCE)
        loose, _ = _feasible(table, steps, offset, gain, precision + TOLERANCE)
        if np.any(strict):
            row = int(np.flatnonzero(strict)[0])
            return {"steps": steps, "plan": _plan(table, steps, row, chosen[row]), "borderline": borderline}
        borderline |= bool(np.any(loose))  # feasible only within TOLERANCE: float32 could decide it
    return {"steps": 0, "plan": np.zeros((0, 2 + start.size), np.int32), "borderline": borderline}


def _plan(table: MultisetTable, steps: int, row: int, chosen: np.ndarray) -> np.ndarray:
    """The actions of multiset ``row`` (its pairs in order) with each dimension's modifications:
    for op o, the first |j_o| of its steps move by sign(j_o), the others keep."""
    counts, ops, _, _ = table.level(steps)
    pairs = [table.pairs[p] for p in range(len(table.pairs)) for _ in range(int(counts[row, p]))]
    _, choices = table.sums(tuple(int(n) for n in ops[row]))
    plan = np.zeros((steps, 2 + chosen.size), np.int32)
    plan[:, 0] = [k for k, _ in pairs]
    plan[:, 1] = [o for _, o in pairs]
    plan[:, 2:] = MOD_KEEP
    for dim, index in enumerate(chosen):
        j = choices[index]
        for op in range(len(table.scales)):
            at = [t for t in range(steps) if pairs[t][1] == op][: abs(int(j[op]))]
            plan[at, 2 + dim] = MOD_KEEP + int(np.sign(j[op]))
    return plan


def search_all(table: MultisetTable, episodes: Episodes, params: HRVParams, noisy: bool, say: Callable = print):
    """``fewest_steps`` for every episode (noise-free, or with the evaluation's realised noise),
    each started at its lower bound. Returns steps (E,), plans (E, max_steps, 2 + D) padded with
    no-ops, borderline (E,)."""
    count, dims = episodes.start.shape
    bound = lower_bound(episodes.start, episodes.target, episodes.gain, params)["steps"]
    steps = np.zeros(count, np.int64)
    plans = np.zeros((count, table.max_steps, 2 + dims), np.int32)
    plans[:, :, 1:] = MOD_KEEP  # style 0, keep: a no-op (CONTENT_KEEP == MOD_KEEP == 1)
    borderline = np.zeros(count, bool)
    for e in range(count):
        noise = episodes.noise[e] if noisy else np.zeros_like(episodes.noise[e])
        # with noise the bound may not hold (noise can help): start at 1 then
        first = 1 if noisy else int(bound[e])
        found = fewest_steps(table, episodes.start[e], episodes.target[e], episodes.gain[e], noise, params, first)
        steps[e], borderline[e] = found["steps"], found["borderline"]
        plans[e, : found["steps"]] = found["plan"]
    say(f"[limits] hrv search ({'realised noise' if noisy else 'noise-free'}): median {np.median(steps):.1f} steps")
    return steps, plans, borderline


# ----------------------------------------------------------------------------- replay


def replay_plans(env: HRWritingEnv, params: HRVParams, episodes: Episodes, plans: np.ndarray) -> dict[str, np.ndarray]:
    """Replays (E, T, 2 + D) plans in ``env`` from each episode's reset key, with its step keys
    (``params.noise_scale`` decides the noise: ``params.replace(noise_scale=0.0)`` replays the
    noise-free problem). ``length``: the first successful step (0:
    none within T); ``clipped``: whether any step's unclipped end point left [0, 1]."""

    def one(reset_key, step_keys, plan):
        _, state = env.reset(reset_key, params)

        def body(carry, inputs):
            state, done, length, clipped = carry
            key, action, t = inputs
            _, nxt, _, terminated, truncated, info = env.step(key, state, action, params)
            style, op, mods = action[0], action[1], action[2:] - MOD_KEEP
            direction = mods.astype(jnp.float32) + params.style_vectors[style]
            delta = params.step_scale[op] * params.step_size * context_gain(state.context, params) * direction
            noise = params.noise_scale * jax.random.normal(key, state.current_hrv.shape, jnp.float32)
            raw = state.current_hrv + delta + noise  # the end point before the environment clips it
            hit = info["success"] & ~done
            carry = (
                freeze_after_done(done, state, nxt),
                done | terminated | truncated,
                jnp.where(hit, t + 1, length),
                clipped | (~done & jnp.any((raw < 0) | (raw > 1))),
            )
            return carry, None

        steps = jnp.arange(plan.shape[0], dtype=jnp.int32)
        start = (state, jnp.zeros((), bool), jnp.zeros((), jnp.int32), jnp.zeros((), bool))
        (_, _, length, clipped), _ = jax.lax.scan(body, start, (step_keys[: plan.shape[0]], plan, steps))
        return length, clipped

    length, clipped = jax.jit(jax.vmap(one))(
        jnp.asarray(episodes.reset_keys), jnp.asarray(episodes.step_keys), jnp.asarray(plans, jnp.int32)
    )
    return {"length": np.asarray(length), "clipped": np.asarray(clipped)}


def policy_episodes(env: HRWritingEnv, params: HRVParams, policy: Policy, episodes: Episodes) -> dict[str, np.ndarray]:
    """A policy on the held-out episodes exactly as ``heldout_evaluation`` runs it (the same
    keys; no observation noise), per episode: ``length`` (steps taken, H if never), ``success``,
    ``settle`` (E, D), the step after which each dimension stayed within the precision, and
    ``actions`` (E, H, 2 + D) int32, the actions of the episode's steps (-1 after its end)."""
    policy = as_recurrent(policy)
    horizon = episodes.step_keys.shape[1]

    def one(reset_key, step_keys, policy_keys):
        obs, state = env.reset(reset_key, params)

        def body(carry, inputs):
            obs, state, memory, done, length, success, settle = carry
            t, policy_key, step_key = inputs
            action, memory = policy.step(memory, obs, t, policy_key)
            taken, _ = env.checked_action(action)
            next_obs, nxt, _, terminated, truncated, info = env.step(step_key, state, action, params)
            live = ~done
            outside = jnp.abs(nxt.current_hrv - nxt.target_hrv) > params.target_precision
            carry = (
                freeze_after_done(done, obs, next_obs),
                freeze_after_done(done, state, nxt),
                memory,
                done | terminated | truncated,
                length + live.astype(jnp.int32),
                success | (live & info["success"]),
                jnp.where(live & outside, t + 1, settle),
            )
            return carry, jnp.where(live, taken, -1)

        dims = state.current_hrv.shape[0]
        start = (
            obs,
            state,
            policy.initial_state,
            jnp.zeros((), bool),
            jnp.zeros((), jnp.int32),
            jnp.zeros((), bool),
            jnp.zeros((dims,), jnp.int32),
        )
        inputs = (jnp.arange(horizon, dtype=jnp.int32), policy_keys, step_keys)
        (_, _, _, _, length, success, settle), actions = jax.lax.scan(body, start, inputs)
        return length, success, settle, actions

    length, success, settle, actions = jax.jit(jax.vmap(one))(
        jnp.asarray(episodes.reset_keys), jnp.asarray(episodes.step_keys), jnp.asarray(episodes.policy_keys)
    )
    names = ("length", "success", "settle", "actions")
    return {name: np.asarray(value) for name, value in zip(names, (length, success, settle, actions))}


def action_usage(actions: np.ndarray, lengths: np.ndarray) -> dict[str, list[float]]:
    """How (E, T, 2 + D) actions spend their first ``lengths`` steps: the fraction of steps per
    content op and per style, and per step the mean fraction of dimensions nudged (m != keep)."""
    steps = np.arange(actions.shape[1])[None, :] < np.asarray(lengths)[:, None]  # (E, T)
    taken = actions[steps]  # (steps, 2 + D)
    if taken.shape[0] == 0:
        return {"content_ops": [], "styles": [], "nudged_fraction": []}
    ops = np.bincount(taken[:, 1], minlength=3) / taken.shape[0]
    styles = np.bincount(taken[:, 0], minlength=NUM_STYLES) / taken.shape[0]
    return {
        "content_ops": [float(v) for v in ops],
        "styles": [float(v) for v in styles],
        "nudged_fraction": [float(np.mean(taken[:, 2:] != MOD_KEEP))],
    }


def binding_dimensions(per_dim_bound: np.ndarray) -> np.ndarray:
    """(E,) the dimension with the largest per-dimension bound (ties: the first)."""
    return np.argmax(per_dim_bound, axis=-1)


def steps_summary(steps: np.ndarray) -> dict[str, float]:
    """Median, mean, min, max of positive step counts (NaN where none)."""
    found = np.asarray(steps)[np.asarray(steps) > 0]
    if found.size == 0:
        return {"median": math.nan, "mean": math.nan, "min": math.nan, "max": math.nan}
    return {
        "median": float(np.median(found)),
        "mean": float(found.mean()),
        "min": float(found.min()),
        "max": float(found.max()),
    }
