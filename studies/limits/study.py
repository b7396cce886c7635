"""How good is good: the optimal-control references of both tasks against PPO's final checkpoints
and the hand-made references (issue 28, results/limits/README.md, results/limits/).

    swing  per held-out start: the physics lower bound on the time to rotation (``swing_bound``),
           the fastest rotation found by shooting through the plant and verified by replay in
           ``SwingEnv`` (``swing_shooting``; an upper bound on the minimum), the structured
           controller, each PPO seed; and when each reaches the energy levels of ``PHASES``
    hrv    per held-out episode: the per-dimension lower bound, the exact fewest steps
           (noise-free, and with the evaluation's realised noise; ``hrv_search``), both
           replayed in ``HRWritingEnv``, the greedy oracle, each PPO seed

PPO is every seed of the protocol record's reported checkpoint (``restore(..., "reported")``: the
last, unless the run chose one on validation episodes, ``purehr.run.choose_reported``) on the
same starts / episodes as the evaluation; a start's PPO number is the median over the seeds
(each seed is in the rows too). The gap of a start is PPO's median over the reference's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purehr.envs.hrv.baselines import oracle_policy
from purehr.envs.swing.controller import make_structured_policy
from purehr.envs.swing.evaluation import heldout_starts, rollout
from purehr.run.restoring import restore
from purehr.run.store.run_dir import read_manifest
from studies.limits import hrv_search, swing_bound, swing_shooting
from studies.limits.swing_shooting import ShootingSettings

PHASES = (10, 30, 60, 90, 135)
"""Swing amplitudes (|theta|, degrees) whose first crossing splits an episode into phases; then
the top (|theta| = 180 degrees) and the rotation (360). Angles, not energy_norm: standing up at
the bottom alone raises energy_norm by 0.09 without swinging any higher."""


@dataclass(frozen=True)
class LimitsSettings:
    """What the study computes (defaults: the recorded results/limits run)."""

    shooting: ShootingSettings = field(default_factory=ShootingSettings)
    bound_grid: int = 801  # pose grid per axis of the swing's power constants
    hrv_max_steps: int = hrv_search.MAX_STEPS
    seeds: tuple[int, ...] | None = None  # PPO seeds of the record (None: all of them)
    starts: int = 100  # held-out swing starts (the evaluation's 100; fewer for a quick look)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_seeds(protocol_dir: Path, task: str, seeds: tuple[int, ...] | None) -> list[int]:
    """The seeds of ``task`` in the protocol record (all, or the requested ones, checked)."""
    manifest = read_manifest(protocol_dir)
    if task not in manifest.get("tasks", []):
        raise ValueError(f"{protocol_dir}: the record has no task {task!r} (it has {manifest.get('tasks')})")
    recorded = [int(s) for s in manifest["seeds"]]
    missing = sorted(set(seeds or ()) - set(recorded))
    if missing:
        raise ValueError(f"{protocol_dir}: seeds {missing} are not in the record (it has {recorded})")
    return recorded if seeds is None else list(seeds)


# ----------------------------------------------------------------------------- swing


def _rows_of(env, params, policy, theta0, theta_dot0) -> dict[str, np.ndarray]:
    """``evaluation.rollout`` of ``policy`` from every start: (B, H) rows as NumPy."""
    dtype = jnp.result_type(float)
    rows = jax.jit(jax.vmap(lambda th, thd: rollout(env, params, policy, th, thd, jax.random.PRNGKey(0))))(
        jnp.asarray(theta0, dtype), jnp.asarray(theta_dot0, dtype)
    )
    return {
        k: np.asarray(rows[k]) for k in ("success", "active", "time", "energy_norm", "swing_angle", "reward", "action")
    }


def _open_loop_rows(env, params, actions: np.ndarray, theta0, theta_dot0) -> dict[str, np.ndarray]:
    """The rows of open-loop (B, N, 2) action sequences, through ``evaluation.rollout``."""
    dtype = jnp.result_type(float)
    steps = actions.shape[1]

    def one(seq, th, thd):
        def policy(obs, t, key):
            return jnp.where(t < steps, seq[jnp.minimum(t, steps - 1)], 0.0)

        return rollout(env, params, policy, th, thd, jax.random.PRNGKey(0))

    rows = jax.jit(jax.vmap(one))(
        jnp.asarray(actions, dtype), jnp.asarray(theta0, dtype), jnp.asarray(theta_dot0, dtype)
    )
    return {k: np.asarray(rows[k]) for k in ("success", "active", "time", "energy_norm", "swing_angle", "reward")}


def episode_outcome(rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per start: ``time`` of the successful step (NaN if none), ``step``, ``return`` (the
    episode's reward sum) and the first time of each phase level (``phase_<level>``, ``top``)."""
    active = rows["active"]
    won = rows["success"] & active
    succeeded = won.any(axis=1)
    first = np.argmax(won, axis=1)
    out = {
        "time": np.where(succeeded, rows["time"][np.arange(len(first)), first], np.nan),
        "step": np.where(succeeded, first + 1, 0),
        "return": np.sum(np.where(active, rows["reward"], 0.0), axis=1),
    }
    levels = {f"phase_{level}": np.abs(rows["swing_angle"]) >= np.deg2rad(level) for level in PHASES}
    levels["top"] = np.abs(rows["swing_angle"]) >= math.pi
    for name, reached in levels.items():
        reached = reached & active
        out[name] = np.where(
            reached.any(axis=1), rows["time"][np.arange(len(first)), np.argmax(reached, axis=1)], np.nan
        )
    return out


def swing_study(protocol_dir: Path, settings: LimitsSettings, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Everything of the swing: rows (one per start), the found actions, the summary."""
    started = time.perf_counter()
    seeds = record_seeds(protocol_dir, "swing", settings.seeds)
    theta0, theta_dot0 = (values[: settings.starts] for values in heldout_starts())  # the evaluation's 100
    restored = {seed: restore(protocol_dir, task="swing", seed=seed, step="reported") for seed in seeds}
    env, params = restored[seeds[0]].env, restored[seeds[0]].env_params
    policies = {"controller": make_structured_policy(params)}
    policies.update({f"ppo_seed{seed}": r.pure_policy for seed, r in restored.items()})
    rows = {name: _rows_of(env, params, policy, theta0, theta_dot0) for name, policy in policies.items()}
    outcomes = {name: episode_outcome(r) for name, r in rows.items()}
    say(f"[limits] swing: controller and {len(seeds)} PPO seeds from {len(theta0)} starts ({_since(started)})")

    constants = swing_bound.power_constants(params, settings.bound_grid)
    bound = swing_bound.rotation_lower_bound(theta0, theta_dot0, params, constants)
    reserve0 = swing_bound.start_reserve(theta0, theta_dot0, params)

    warm = {name: r["action"] for name, r in rows.items()}
    found = swing_shooting.optimise(warm, theta0, theta_dot0, params, settings.shooting, say)
    verified = swing_shooting.replay(env, params, found.actions, theta0, theta_dot0)
    upper = episode_outcome(_open_loop_rows(env, params, found.actions, theta0, theta_dot0))
    if not np.array_equal(upper["step"], verified["step"]):
        raise RuntimeError("the open-loop rollout and the replay disagree on a success step")
    optimiser_step = np.where(found.crossing < swing_shooting.NO_CROSSING, np.ceil(found.crossing), 0).astype(int)

    ppo_names = [f"ppo_seed{seed}" for seed in seeds]
    ppo = np.stack([outcomes[n]["time"] for n in ppo_names])  # (seeds, B)
    ppo_median = np.median(ppo, axis=0)
    upper_s = np.where(verified["success"], verified["time"], np.nan)
    table = []
    for b in range(len(theta0)):
        row = {
            "start": b,
            "theta0_deg": float(np.rad2deg(theta0[b])),
            "theta_dot0": float(theta_dot0[b]),
            "start_reserve_J": float(reserve0[b]),
            "lower_bound_s": float(bound["rotation_step"][b] * params.dt),
            "lower_bound_exact_s": float(bound["rotation_s"][b]),
            "lower_bound_top_s": float(bound["top_s"][b]),
            "upper_bound_s": float(upper_s[b]),
            "upper_bound_step": int(verified["step"][b]),
            "optimiser_step": int(optimiser_step[b]),
            "upper_bound_return": float(upper["return"][b]),
            "upper_bound_source": str(found.source[b]),
            "controller_s": float(outcomes["controller"]["time"][b]),
        }
        row.update({f"{n}_s": float(outcomes[n]["time"][b]) for n in ppo_names})
        row["ppo_median_s"] = float(ppo_median[b])
        row["ppo_best_s"] = float(np.min(ppo[:, b]))
        row["ppo_gap"] = float(ppo_median[b] / upper_s[b] - 1.0)
        for phase in [f"phase_{level}" for level in PHASES] + ["top"]:
            row[f"upper_{phase}_s"] = float(upper[phase][b])
            row[f"ppo_{phase}_s"] = float(np.median([outcomes[n][phase][b] for n in ppo_names]))
        table.append(row)
    summary = _swing_summary(table, outcomes, ppo_names, constants, found, len(theta0))
    summary["seconds"] = time.perf_counter() - started
    say(f"[limits] swing done ({_since(started)})")
    return {"rows": table, "actions": found.actions, "summary": summary}


def _swing_summary(table, outcomes, ppo_names, constants, found, starts) -> dict[str, Any]:
    column = {key: np.asarray([row[key] for row in table], float) for key in table[0] if key != "upper_bound_source"}
    gap = column["ppo_gap"]
    # the first time at each amplitude, cumulative: where along the pumping PPO falls behind
    marks = [(f"{level} deg", f"phase_{level}") for level in PHASES] + [("180 deg (the top)", "top")]
    phases = {}
    for name, key in marks + [("360 deg (rotation)", None)]:
        upper = column["upper_bound_s"] if key is None else column[f"upper_{key}_s"]
        ppo = column["ppo_median_s"] if key is None else column[f"ppo_{key}_s"]
        phases[name] = {
            "upper": _stats(upper)["median"],
            "ppo": _stats(ppo)["median"],
            "ppo_minus_upper": _stats(ppo - upper)["median"],
            "ppo_minus_upper_mean": _stats(ppo - upper)["mean"],
        }
    return {
        "starts": starts,
        "rotating": {"upper_bound": int(np.isfinite(column["upper_bound_s"]).sum())},
        "lower_bound_s": _stats(column["lower_bound_s"]),
        "lower_bound_top_s": _stats(column["lower_bound_top_s"]),
        "upper_bound_s": _stats(column["upper_bound_s"]),
        "upper_bound_return": _stats(column["upper_bound_return"]),
        "controller_s": _stats(column["controller_s"]),
        "ppo_median_s": _stats(column["ppo_median_s"]),
        "ppo_per_seed_s": {n: _stats(column[f"{n}_s"]) for n in ppo_names},
        "ppo_gap": {**_stats(gap), "worst_start": int(np.nanargmax(gap))},
        "controller_gap": _stats(column["controller_s"] / column["upper_bound_s"] - 1.0),
        "upper_bound_beats_every_ppo_seed": int(np.sum(column["upper_bound_s"] < column["ppo_best_s"])),
        "optimiser_matches_replay": int(np.sum(column["optimiser_step"] == column["upper_bound_step"])),
        "lower_bound_below_every_trajectory": bool(
            np.all(column["lower_bound_s"] <= np.nanmin(np.stack([column[f"{n}_s"] for n in ppo_names]), axis=0))
            and np.all(column["lower_bound_s"] <= column["controller_s"])
            and np.all(column["lower_bound_s"] <= column["upper_bound_s"])
        ),
        "phases_s": phases,
        "power_constants": constants.to_dict(),
        "optimiser_history": found.history,
    }


# ----------------------------------------------------------------------------- hrv


def hrv_study(protocol_dir: Path, settings: LimitsSettings, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Everything of the HRV task: rows (one per episode), the plans, the summary."""
    started = time.perf_counter()
    seeds = record_seeds(protocol_dir, "hrv", settings.seeds)
    restored = {seed: restore(protocol_dir, task="hrv", seed=seed, step="reported") for seed in seeds}
    env, params = restored[seeds[0]].env, restored[seeds[0]].env_params
    episodes = hrv_search.heldout_episodes(env, params)
    bound = hrv_search.lower_bound(episodes.start, episodes.target, episodes.gain, params)
    table = hrv_search.MultisetTable(params, settings.hrv_max_steps)
    quiet = params.replace(noise_scale=0.0)
    clean_steps, clean_plans, clean_border = hrv_search.search_all(table, episodes, params, noisy=False, say=say)
    noisy_steps, noisy_plans, noisy_border = hrv_search.search_all(table, episodes, params, noisy=True, say=say)
    clean_replay = hrv_search.replay_plans(env, quiet, episodes, clean_plans)
    noisy_replay = hrv_search.replay_plans(env, params, episodes, noisy_plans)
    clean_under_noise = hrv_search.replay_plans(env, params, episodes, clean_plans)
    oracle = hrv_search.policy_episodes(env, params, oracle_policy(env, params), episodes)
    ppo = {seed: hrv_search.policy_episodes(env, params, r.pure_policy, episodes) for seed, r in restored.items()}
    say(f"[limits] hrv: searches, replays, oracle and {len(seeds)} PPO seeds ({_since(started)})")

    lengths = np.stack([ppo[s]["length"] for s in seeds]).astype(float)  # (seeds, E)
    ppo_median = np.median(lengths, axis=0)
    rows = []
    for e in range(episodes.start.shape[0]):
        row = {
            "episode": e,
            "lower_bound": int(bound["steps"][e]),
            "binding_dim": int(np.argmax(bound["per_dim"][e])),
            "optimum_noise_free": int(clean_steps[e]),
            "optimum_noise_free_replayed": int(clean_replay["length"][e]),
            "optimum_realised_noise": int(noisy_steps[e]),
            "optimum_realised_noise_replayed": int(noisy_replay["length"][e]),
            "noise_free_plan_under_noise": int(clean_under_noise["length"][e]),
            "oracle": int(oracle["length"][e]),
        }
        row.update({f"ppo_seed{s}": int(ppo[s]["length"][e]) for s in seeds})
        row["ppo_median"] = float(ppo_median[e])
        row["ppo_excess"] = float(ppo_median[e] - noisy_steps[e])
        row["borderline"] = bool(clean_border[e] or noisy_border[e])
        row["clipped"] = bool(clean_replay["clipped"][e] or noisy_replay["clipped"][e])
        row["min_gain"] = float(episodes.gain[e].min())
        row["max_gap"] = float(np.abs(episodes.target[e] - episodes.start[e]).max())
        rows.append(row)
    summary = _hrv_summary(rows, seeds, ppo, bound, episodes, noisy_steps, noisy_plans, params)
    summary["seconds"] = time.perf_counter() - started
    plans = {"noise_free": clean_plans, "realised_noise": noisy_plans}
    return {"rows": rows, "plans": plans, "summary": summary}


def _hrv_summary(rows, seeds, ppo, bound, episodes, optimum, plans, params) -> dict[str, Any]:
    column = {key: np.asarray([row[key] for row in rows], float) for key in rows[0]}
    excess = column["ppo_excess"]
    # which dimensions PPO settles late: per dimension, PPO's settle step (median over seeds)
    # minus that dimension's own lower bound, and how it goes with the dimension's gain
    settle = np.median(np.stack([ppo[s]["settle"] for s in seeds]), axis=0)  # (E, D)
    late = settle - bound["per_dim"]
    last = np.argmax(settle, axis=1)
    gain = episodes.gain.astype(float)
    return {
        "episodes": len(rows),
        "lower_bound": _stats(column["lower_bound"]),
        "optimum_noise_free": _stats(column["optimum_noise_free"]),
        "optimum_realised_noise": _stats(column["optimum_realised_noise"]),
        "replays_match": {
            "noise_free": int(np.sum(column["optimum_noise_free_replayed"] == column["optimum_noise_free"])),
            "realised_noise": int(
                np.sum(column["optimum_realised_noise_replayed"] == column["optimum_realised_noise"])
            ),
        },
        "noise_free_plan_under_noise": {
            "success_within_plan": int(np.sum(column["noise_free_plan_under_noise"] > 0)),
            "at_planned_step": int(np.sum(column["noise_free_plan_under_noise"] == column["optimum_noise_free"])),
        },
        "bound_at_most_optimum": bool(np.all(column["lower_bound"] <= column["optimum_noise_free"])),
        "bound_equals_optimum": int(np.sum(column["lower_bound"] == column["optimum_noise_free"])),
        "borderline": int(column["borderline"].sum()),
        "clipped": int(column["clipped"].sum()),
        "oracle": _stats(column["oracle"]),
        "ppo_median": _stats(column["ppo_median"]),
        "ppo_per_seed": {f"ppo_seed{s}": _stats(column[f"ppo_seed{s}"]) for s in seeds},
        "ppo_excess_steps": {**_stats(excess), "worst_episode": int(np.argmax(excess))},
        "ppo_ratio": _stats(column["ppo_median"] / optimum),
        "ppo_at_optimum": int(np.sum(excess <= 0)),
        "action_usage": {
            "note": "fractions of the steps taken: content ops (condense, keep, expand), styles 0-4, dims nudged",
            "ppo": hrv_search.action_usage(
                np.concatenate([ppo[s]["actions"] for s in seeds]), np.concatenate([ppo[s]["length"] for s in seeds])
            ),
            "optimum_realised_noise": hrv_search.action_usage(plans, optimum),
        },
        "per_dimension": {
            "ppo_settle_minus_bound_mean": [float(v) for v in late.mean(axis=0)],
            "ppo_last_settled_count": [int(v) for v in np.bincount(last, minlength=gain.shape[1])],
            "binding_dim_count": [
                int(v) for v in np.bincount(column["binding_dim"].astype(int), minlength=gain.shape[1])
            ],
            "late_vs_gain_correlation": float(np.corrcoef(late.ravel(), gain.ravel())[0, 1]),
            "reach_per_unit_gain": [float(v) for v in hrv_search.per_step_reach(params, np.ones(gain.shape[1]))],
        },
    }


# ----------------------------------------------------------------------------- helpers


def _stats(values) -> dict[str, float]:
    """Median, mean, min, max, quartiles of the finite values, and how many there were."""
    values = np.asarray(values, float)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return {"count": 0, "median": math.nan, "mean": math.nan, "min": math.nan, "max": math.nan}
    q1, median, q3 = np.percentile(finite, [25, 50, 75])
    return {
        "count": int(finite.size),
        "median": float(median),
        "mean": float(finite.mean()),
        "min": float(finite.min()),
        "q1": float(q1),
        "q3": float(q3),
        "max": float(finite.max()),
    }


def _since(started: float) -> str:
    return f"{time.perf_counter() - started:.0f} s"
