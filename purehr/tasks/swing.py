"""The swing task: the rider's environment with its training starts, PPO defaults, the
structured controller and the floors, and the showcase episode; and its partially observed
variant ``swing-angles`` (angles and posture only, no rates or energy)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from purehr.algorithms.registry import default_config
from purehr.envs import swing
from purehr.protocol_settings import ProtocolSettings
from purehr.tasks.task import Baseline, Task, one_observation

SWING_SHOWCASE_START_DEG = 3.0
SWING_TRAINING_STARTS = {"small_start_fraction": 0.25, "small_reset_noise": 0.05}
"""The swing task's training starts: today's wide N(0, 1) draw, a quarter of them replaced by
starts at the held-out scale, which the fast pumping policies otherwise miss
(results/ablation/swing_speed.md)."""

# The swing defaults, chosen by measurement (results/sweep, results/ablation; docs/protocol.md).
# Wide batches learn both tasks and run several times faster per step than the first
# defaults (8 envs x 256 steps, minibatch 256 / 64), which learned neither.
# Swing: minibatch 256 (16 gradient steps per epoch) pumps faster than 1024, and with a
# quarter of the training starts at the held-out scale (SWING_TRAINING_STARTS above)
# it stays reliable: 10/10 seeds at held-out success 1.00, median time to rotation 12.9 s at 5M
# steps (results/ablation/swing_speed.md). The budget is 2M: a run annealed over 2.5M met both
# goals (5/5 seeds at 1.00, median 13.03 s against the controller's 13.95 s), and one annealed
# over 2M met them too (swing alone, 2026-12-03: every seed >= 0.99, median 13.14 s), in about
# 0.8x the training time, for the main job's 4 minutes (issue 25; results/protocol,
# docs/protocol.md "Budgets"). The swing checkpoints at all 41 targets of its
# 2M steps; a full evaluation (100 starts x 1,600 steps) at each would cost about as much as
# the training, so every tenth target (every 500k steps) is full and the ones between use 20
# fixed starts (docs/protocol.md).
SWING_DEFAULTS = default_config(
    "ppo",
    total_timesteps=2_000_000,
    num_envs=32,
    num_steps=128,
    minibatch_size=256,
)
SWING_SAC_DEFAULTS = default_config(
    "sac",
    total_timesteps=401_408,
    num_envs=16,
    num_steps=16,
    gradient_steps=16,
    sample_size=256,
    buffer_size=200_000,
    learning_starts=10_000,
    gamma=0.999,
    initial_temperature=0.01,
    action_noise_correlation=0.967216,
    n_step=32,
)
"""SAC on the swing (results/algorithms, issue 50): gamma 0.999, 32-step targets and AR(1) rollout
noise with a 30-step correlation time (a quarter of the swing's period) let it pump from rest,
which white noise and 1-step targets at gamma 0.995 never did (held-out success 0); an initial
temperature of 0.01, as swing's rewards are ~0.01 a step (1.0 drowned them: no seed learned).
With the task's phase observation, seeds 0-4 at 401,408 steps: held-out success 1.00, 1.00, 0.99, 0.98, 1.00 (the same
recipe on the 11-number observation: 0.93 [0.85, 1.00])."""
SWING_PROTOCOL = ProtocolSettings(
    full_eval_interval=10, quick_eval_episodes=20, group_quick_evaluations=True, report_candidates=10
)
"""Full evaluations every 500k steps, 20-episode quick ones between, evaluated nine at a time at
each full checkpoint (docs/protocol.md, "Grouped quick evaluations": on the 2-core CPU the
checkpoints took 14% of a 500k-step run's program time ungrouped and none measurable grouped;
on an accelerator one evaluation's length per group instead of nine). Each seed reports the best
of its last 10 checkpoints on 20 validation episodes ("The reported checkpoint": 20 of 20 seeds
at held-out success >= 0.95 on two float32 roundings, against 19 of 20 for the last checkpoints;
results/robustness)."""


SWING_PHASE_FEATURES = "psi"
"""The swing task's observation appends the phase of the CoM angle psi (cos, sin: 13 numbers;
``SwingEnv(phase_features=...)``, docs/swing_model.md). On 20 seeds and two float32 roundings
(results/robustness, "swing: the phase observation"): every seed at held-out success 1.00 and
faster than the structured controller, median 12.66 s and 12.56 s, against 19 of 20 at >= 0.95,
10 and 11 faster, 14.13 s and 13.66 s without it. ``swing-angles`` hides the rates it is computed
from, so that variant keeps "none", as do runs recorded before (``unrecorded_env_kwargs``)."""


def _swing_env(
    params: swing.SwingParams | None = None, observe_rates: bool = True, phase_features: str | None = None, **fields
) -> swing.SwingEnv:
    """The swing task's environment: the task's training starts unless ``params`` or
    ``fields`` say otherwise; ``phase_features`` (``--env-arg swing phase_features=none``)
    the phase entries of its observation, by default ``SWING_PHASE_FEATURES`` where the rates
    are observed (swing-angles: "none")."""
    if phase_features is None:
        phase_features = SWING_PHASE_FEATURES if observe_rates else "none"
    params = swing.SwingParams(**{**SWING_TRAINING_STARTS, **fields}) if params is None else params
    return swing.SwingEnv(params, observe_rates=observe_rates, phase_features=phase_features)


def _swing_kwargs(env: swing.SwingEnv) -> dict[str, Any]:
    params = env.default_params
    starts = {name: float(getattr(params, name)) for name in SWING_TRAINING_STARTS}
    return {**starts, "phase_features": env.phase_features}


def _swing_angles_kwargs(env: swing.SwingEnv) -> dict[str, Any]:
    return {**_swing_kwargs(env), "observe_rates": env.observe_rates}


def _observes_rates(env) -> bool:
    return bool(getattr(env, "observe_rates", True))


def _record_swing(env, env_params, policy):
    return swing.record_episode(env, env_params, policy, math.radians(SWING_SHOWCASE_START_DEG), 0.0)


SWING_FLOORS = (
    Baseline("zero action", "zero", lambda env, params: swing.zero_policy),
    Baseline("random", "random", lambda env, params: swing.random_policy),
)

SWING_TASK = Task(
    name="swing",
    env_class=swing.SwingEnv,
    make_env=one_observation(_swing_env, "observe_rates", True, "swing-angles"),
    default_config=SWING_DEFAULTS,
    default_configs={"sac": SWING_SAC_DEFAULTS},
    default_protocol=SWING_PROTOCOL,
    baselines=(
        Baseline(
            "structured controller",
            "structured",
            lambda env, params: swing.make_structured_policy(params),
            "structured phase-law controller of docs/swing_model.md "
            "(purehr.envs.swing.controller, default ControllerParams)",
        ),
        *SWING_FLOORS,
    ),
    heldout_evaluation=swing.heldout_evaluation,
    env_evaluation=swing.heldout_evaluation,
    record_showcase=_record_swing,
    env_kwargs=_swing_kwargs,
    legacy_env_kwargs={"params": swing.SwingParams(reset_noise=0.01), "phase_features": "none"},
    unrecorded_env_kwargs={"small_start_fraction": 0.0, "phase_features": "none"},
    owns=_observes_rates,
)

# The rider feels the angles and its posture, not the rates (docs/swing_model.md, "swing-angles"):
# the same training starts, defaults, held-out starts and showcase. The structured controller
# reads psi' (obs[5]), which this observation lacks, so the variant has floors only; the
# controller's numbers on the full task are the reference with full observation.
SWING_ANGLES_TASK = dataclasses.replace(
    SWING_TASK,
    name="swing-angles",
    make_env=one_observation(_swing_env, "observe_rates", False, "swing"),
    baselines=SWING_FLOORS,
    env_kwargs=_swing_angles_kwargs,
    legacy_env_kwargs={},  # every swing-angles manifest records its arguments
    unrecorded_env_kwargs={"phase_features": "none"},
    has_reference=False,
    owns=lambda env: not _observes_rates(env),
)
