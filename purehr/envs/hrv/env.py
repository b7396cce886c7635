"""The HRV task: steer a piece of writing's human-resonance vector toward a target profile.

Implements ``docs/hrv_task.md``. A piece of writing is summarised by ``hrv_dim``
numbers in [0, 1]; each step the agent picks a style adjustment, a content operation
(condense / keep / expand) and a decrease / keep / increase nudge per dimension, and is
rewarded for moving the vector toward the target. The audience (a 16-number context drawn
at reset) changes how strongly each dimension responds, so the policy must read it (or, with
``observe_audience=False``, infer it from how the text responds to its edits).

Every number of the spec is a field of ``HRVParams`` (a pytree, so a curriculum can change
``difficulty`` and ``target_precision`` inside a jitted scan). The similarity measure and
the reward form are *static* choices of the environment (they select code, not values).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from purehr.envs import spaces
from purehr.envs.base import Environment, all_finite, end_if_not_finite
from purehr.types import StepResult

CONTEXT_DIM = 16
"""Length of the audience context vector (``generation_context``)."""
AUDIENCE_KEYS = ("generation_context", "gain")
"""The observation entries that ``observe_audience=False`` hides: the audience and its gain."""
READING_KEYS = ("current_hrv", "gap")
"""The observation entries that are the reading of the text (``reading_dropout`` loses them)."""
NUM_CONTENT_STATS = 4
"""content_stats: length, lexical diversity, sentence-length variance, readability."""
NUM_STYLES = 5
"""Style adjustments: 0 is "no change", 1..4 are fixed unit-norm directions."""

STYLE_NONE = 0
CONTENT_CONDENSE, CONTENT_KEEP, CONTENT_EXPAND = 0, 1, 2
MOD_DECREASE, MOD_KEEP, MOD_INCREASE = 0, 1, 2

HRV_FIXED_PARAMS_SEED = 20260900
"""Seed from which the style vectors and the context matrix W are drawn, once per hrv_dim."""

SIMILARITIES = ("hrv_similarity", "cosine")
REWARD_FORMS = ("distance", "progress", "potential", "seed")
"""``distance`` (default) and ``progress`` are dense and not potential differences: PPO learns
from them. ``potential`` (the first default) and ``seed`` stay for comparison; see
docs/hrv_task.md for why the first design taught nothing."""


@struct.dataclass
class HRVParams:
    """Every constant of the HRV task. Scalars and arrays are traced pytree leaves (a
    curriculum or sweep may change them in a scan); ``max_episode_length`` is static because
    it sets the length of the evaluation scan."""

    style_vectors: jax.Array  # (NUM_STYLES, hrv_dim); row 0 zeros, rows 1..4 unit norm
    context_matrix: jax.Array  # W, (hrv_dim, CONTEXT_DIM): gain = offset + sigmoid(W c)
    step_scale: jax.Array = struct.field(default_factory=lambda: jnp.asarray([0.5, 1.0, 2.0], jnp.float32))
    content_effects: jax.Array = struct.field(  # (3, NUM_CONTENT_STATS) per content op
        default_factory=lambda: jnp.asarray(
            [[-0.05, 0.01, -0.02, 0.02], [0.0, 0.0, 0.0, 0.0], [0.05, -0.01, 0.02, -0.02]], jnp.float32
        )
    )
    difficulty: float = 0.9  # target ~ U(centre - d/3, centre + d/3)
    target_center: float = 0.6
    start_low: float = 0.4  # current ~ U(start_low, start_high) per dimension
    start_high: float = 0.6
    content_stats_start: float = 0.5
    step_size: float = 0.05
    noise_scale: float = 0.005
    gain_offset: float = 0.5
    target_precision: float = 0.05  # success: max |next - target| <= precision
    success_bonus: float = 1.0
    gamma: float = 0.99  # the PPO discount (potential-based shaping)
    diversity_weight: float = 0.1  # + w * (1 - std(x))
    stability_weight: float = 0.05  # + w * (1 - |mean(x) - stability_center|)
    stability_center: float = 0.7
    extreme_weight: float = 0.1  # - w * sum(max(0, |x - 0.5| - extreme_margin))
    extreme_margin: float = 0.4
    progress_weight: float = 0.1  # reward_form="progress": weight of the L1 progress in steps
    time_cost: float = 0.1  # reward_form="progress": cost of every step
    max_episode_length: int = struct.field(pytree_node=False, default=100)


@struct.dataclass
class HRVState:
    current_hrv: jax.Array  # (hrv_dim,)
    target_hrv: jax.Array  # (hrv_dim,)
    content_stats: jax.Array  # (NUM_CONTENT_STATS,)
    context: jax.Array  # (CONTEXT_DIM,)
    time: jax.Array  # int32 steps taken in this episode


def _fixed_directions(hrv_dim: int) -> tuple[jax.Array, jax.Array]:
    """Style vectors (zero row, then 4 unit-norm rows) and W ~ N(0, 1/CONTEXT_DIM), so
    W c ~ N(0, 1) per dimension and gains spread over most of (0.5, 1.5). Drawn with
    NumPy's PCG64 from a fixed seed: the same numbers on every platform, and no device
    compilation when an environment is built."""
    rng = np.random.default_rng(HRV_FIXED_PARAMS_SEED)
    directions = rng.standard_normal((NUM_STYLES - 1, hrv_dim))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    style_vectors = np.concatenate([np.zeros((1, hrv_dim)), directions])
    context_matrix = rng.standard_normal((hrv_dim, CONTEXT_DIM)) / math.sqrt(CONTEXT_DIM)
    return (jnp.asarray(style_vectors, jnp.float32), jnp.asarray(context_matrix, jnp.float32))


def _validate_params(params: HRVParams, hrv_dim: int) -> None:
    """Reject impossible constants before anything is compiled (traced changes later, e.g.
    a curriculum, are the caller's responsibility)."""
    shapes = {
        "style_vectors": (NUM_STYLES, hrv_dim),
        "context_matrix": (hrv_dim, CONTEXT_DIM),
        "step_scale": (3,),
        "content_effects": (3, NUM_CONTENT_STATS),
    }
    for name, shape in shapes.items():
        actual = tuple(np.shape(getattr(params, name)))
        if actual != shape:
            raise ValueError(f"HRVParams.{name} has shape {actual}, expected {shape}")
    if not np.all(np.asarray(params.step_scale) > 0):
        raise ValueError(f"HRVParams.step_scale must be positive, got {params.step_scale}")

    def number(name: str) -> float:
        return float(getattr(params, name))

    def require(condition: bool, name: str, expected: str) -> None:
        if not condition:
            raise ValueError(f"HRVParams.{name}={getattr(params, name)!r}, expected {expected}")

    require(number("difficulty") >= 0, "difficulty", ">= 0")
    half_width = number("difficulty") / 3
    require(
        0 <= number("target_center") - half_width and number("target_center") + half_width <= 1,
        "difficulty",
        f"target range target_center +- difficulty/3 inside [0, 1] (target_center={number('target_center')})",
    )
    require(0 <= number("start_low") <= 1, "start_low", "in [0, 1]")
    require(number("start_low") <= number("start_high") <= 1, "start_high", f"in [start_low={number('start_low')}, 1]")
    require(0 <= number("content_stats_start") <= 1, "content_stats_start", "in [0, 1]")
    require(number("step_size") > 0, "step_size", "> 0")
    require(number("noise_scale") >= 0, "noise_scale", ">= 0")
    require(number("gain_offset") >= 0, "gain_offset", ">= 0")
    require(number("target_precision") > 0, "target_precision", "> 0")
    require(0 < number("gamma") <= 1, "gamma", "in (0, 1]")
    require(math.isfinite(number("progress_weight")), "progress_weight", "a finite number")
    require(math.isfinite(number("time_cost")) and number("time_cost") >= 0, "time_cost", "a finite number >= 0")
    length = params.max_episode_length
    require(
        isinstance(length, (int, np.integer)) and not isinstance(length, bool) and length >= 1,
        "max_episode_length",
        "an int >= 1",
    )


def context_gain(context: jax.Array, params: HRVParams) -> jax.Array:
    """How strongly each HRV dimension responds for this audience: offset + sigmoid(W c)."""
    return params.gain_offset + jax.nn.sigmoid(params.context_matrix @ context)


class HRWritingEnv(Environment[HRVState, HRVParams]):
    """Steer the HRV of a text toward a target (``docs/hrv_task.md``).

    ``similarity`` ("hrv_similarity" | "cosine") and ``reward_form`` (one of ``REWARD_FORMS``)
    pick the reward; ``gap_features`` adds the scaled gap ``(target - current) / step_size``
    and the context gain to the observation (decisions live at the step scale, which the
    raw vectors in [0, 1] hide); ``observe_audience=False`` (task ``hrv-hidden-audience``)
    hides the audience, ``generation_context`` and ``gain``, from the observation (the same
    dynamics and rewards: the gain must be read off how the text responds to the edits);
    ``reading_dropout=p`` (task ``hrv-flicker``) loses the reading of the text, ``current_hrv``
    and ``gap``, with probability p at each step (zeros in its place, ``reading_seen`` 0), so
    a policy must carry what it last read through the steps it reads nothing;
    ``param_overrides`` replace fields of ``HRVParams``.
    An invalid action component acts as the neutral choice and sets ``info["invalid_action"]``
    (``checked_action``); a state that is no longer finite terminates the episode with reward
    0 and ``info["nonfinite_state"]`` set.
    """

    name = "hrv"

    def __init__(
        self,
        hrv_dim: int = 8,
        similarity: str = "hrv_similarity",
        reward_form: str = "distance",
        gap_features: bool = True,
        observe_audience: bool = True,
        reading_dropout: float = 0.0,
        **param_overrides: Any,
    ):
        if isinstance(hrv_dim, bool) or not isinstance(hrv_dim, (int, np.integer)) or hrv_dim < 1:
            raise ValueError(f"hrv_dim={hrv_dim!r}, expected an int >= 1")
        if similarity not in SIMILARITIES:
            raise ValueError(f"similarity={similarity!r}, expected one of {SIMILARITIES}")
        if reward_form not in REWARD_FORMS:
            raise ValueError(f"reward_form={reward_form!r}, expected one of {REWARD_FORMS}")
        if not isinstance(gap_features, (bool, np.bool_)):
            raise ValueError(f"gap_features={gap_features!r}, expected True or False")
        if not isinstance(observe_audience, (bool, np.bool_)):
            raise ValueError(
                f"observe_audience={observe_audience!r}, expected True (observe generation_context and gain) "
                "or False (hide them)"
            )
        if (
            isinstance(reading_dropout, bool)
            or not isinstance(reading_dropout, (int, float, np.integer, np.floating))
            or not 0.0 <= float(reading_dropout) < 1.0
        ):
            raise ValueError(
                f"reading_dropout={reading_dropout!r}, expected a probability in [0, 1) "
                "(0: the text is read after every edit)"
            )
        known = set(HRVParams.__dataclass_fields__)
        unknown = sorted(set(param_overrides) - known)
        if unknown:
            raise ValueError(f"unknown HRVParams field(s) {unknown}; known: {sorted(known)}")
        self.hrv_dim = int(hrv_dim)
        self.similarity = similarity
        self.reward_form = reward_form
        self.gap_features = bool(gap_features)
        self.observe_audience = bool(observe_audience)
        if not self.observe_audience:
            self.name = "hrv-hidden-audience"  # the task it belongs to (the logs name the task by it)
        self.reading_dropout = float(reading_dropout)
        if self.reading_dropout:
            self.name = "hrv-flicker"
        style_vectors, context_matrix = _fixed_directions(self.hrv_dim)
        fields = dict(style_vectors=style_vectors, context_matrix=context_matrix)
        fields.update(param_overrides)
        params = HRVParams(**fields)
        _validate_params(params, self.hrv_dim)
        self._default_params = params

    @property
    def default_params(self) -> HRVParams:
        return self._default_params

    # --- spaces -----------------------------------------------------------------------

    def observation_space(self, params: HRVParams | None = None) -> spaces.Dict:
        unit = lambda n: spaces.Box(0.0, 1.0, (n,))  # noqa: E731
        entries = {
            "current_hrv": unit(self.hrv_dim),
            "target_hrv": unit(self.hrv_dim),
            "content_stats": unit(NUM_CONTENT_STATS),
            "generation_context": spaces.Box(-np.inf, np.inf, (CONTEXT_DIM,)),
            "episode_fraction": unit(1),
        }
        if self.gap_features:
            params = self.default_params if params is None else params
            reach = 1.0 / float(params.step_size)
            entries["gap"] = spaces.Box(-reach, reach, (self.hrv_dim,))
            entries["gain"] = spaces.Box(float(params.gain_offset), float(params.gain_offset) + 1.0, (self.hrv_dim,))
        if self.reading_dropout:
            entries["reading_seen"] = unit(1)
        return spaces.Dict(self._seen(entries))

    def action_space(self, params: HRVParams | None = None) -> spaces.MultiDiscrete:
        return spaces.MultiDiscrete((NUM_STYLES, 3) + (3,) * self.hrv_dim)

    def max_episode_steps(self, params: HRVParams | None = None) -> int:
        return int((self.default_params if params is None else params).max_episode_length)

    # --- reward -------------------------------------------------------------------------

    def similarity_to_target(self, hrv: jax.Array, target: jax.Array) -> jax.Array:
        """sim(x) of the spec, for the similarity this environment was built with."""
        if self.similarity == "cosine":
            norms = jnp.linalg.norm(hrv) * jnp.linalg.norm(target)
            return jnp.dot(hrv, target) / jnp.maximum(norms, 1e-8)
        return 1.0 - jnp.linalg.norm(hrv - target) / math.sqrt(self.hrv_dim)

    @staticmethod
    def shaping_terms(hrv: jax.Array, params: HRVParams) -> jax.Array:
        """Diversity bonus + stability bonus - extreme-value penalty (std is the population
        std, ddof=0)."""
        diversity = params.diversity_weight * (1.0 - jnp.std(hrv))
        stability = params.stability_weight * (1.0 - jnp.abs(jnp.mean(hrv) - params.stability_center))
        extreme = params.extreme_weight * jnp.sum(jnp.maximum(0.0, jnp.abs(hrv - 0.5) - params.extreme_margin))
        return diversity + stability - extreme

    def potential(self, hrv: jax.Array, target: jax.Array, params: HRVParams) -> jax.Array:
        """Phi(x) = sim(x) + shaping terms."""
        return self.similarity_to_target(hrv, target) + self.shaping_terms(hrv, params)

    def reward(
        self, current: jax.Array, next_hrv: jax.Array, target: jax.Array, success: jax.Array, params: HRVParams
    ) -> jax.Array:
        """The step reward of the configured form (docs/hrv_task.md, "Rewards")."""
        bonus = params.success_bonus * success.astype(jnp.float32)
        if self.reward_form == "distance":
            return -jnp.linalg.norm(next_hrv - target) / math.sqrt(self.hrv_dim) + bonus
        if self.reward_form == "progress":
            progress = jnp.sum(jnp.abs(current - target) - jnp.abs(next_hrv - target)) / params.step_size
            return params.progress_weight * progress - params.time_cost + bonus
        if self.reward_form == "seed":
            return (
                self.similarity_to_target(next_hrv, target)
                - self.similarity_to_target(current, target)
                + self.shaping_terms(next_hrv, params)
                + bonus
            )
        return params.gamma * self.potential(next_hrv, target, params) - self.potential(current, target, params) + bonus

    # --- dynamics -----------------------------------------------------------------------

    def _observation(self, state: HRVState, params: HRVParams) -> dict[str, jax.Array]:
        fraction = state.time.astype(jnp.float32) / params.max_episode_length
        observation = {
            "current_hrv": state.current_hrv,
            "target_hrv": state.target_hrv,
            "content_stats": state.content_stats,
            "generation_context": state.context,
            "episode_fraction": fraction[None],
        }
        if self.gap_features:
            observation["gap"] = (state.target_hrv - state.current_hrv) / params.step_size
            observation["gain"] = context_gain(state.context, params)
        return self._seen(observation)

    def _read(self, observation: dict[str, jax.Array], seen: jax.Array) -> dict[str, jax.Array]:
        """With ``reading_dropout``: the reading of the text (``READING_KEYS``) where ``seen``,
        zeros in its place where not, and ``reading_seen`` says which."""
        if not self.reading_dropout:
            return observation
        read = {k: jnp.where(seen, v, jnp.zeros_like(v)) if k in READING_KEYS else v for k, v in observation.items()}
        return {**read, "reading_seen": seen.astype(jnp.float32)[None]}

    def _seen(self, entries: dict[str, Any]) -> dict[str, Any]:
        """``entries`` less the audience's (``AUDIENCE_KEYS``) unless ``observe_audience``."""
        if self.observe_audience:
            return entries
        return {key: value for key, value in entries.items() if key not in AUDIENCE_KEYS}

    def reset(self, key: jax.Array, params: HRVParams | None = None) -> tuple[dict[str, jax.Array], HRVState]:
        params = self.default_params if params is None else params
        target_key, start_key, context_key = jax.random.split(key, 3)
        half_width = params.difficulty / 3.0
        target = jax.random.uniform(
            target_key,
            (self.hrv_dim,),
            jnp.float32,
            params.target_center - half_width,
            params.target_center + half_width,
        )
        current = jax.random.uniform(start_key, (self.hrv_dim,), jnp.float32, params.start_low, params.start_high)
        state = HRVState(
            current_hrv=current,
            target_hrv=jnp.clip(target, 0.0, 1.0),
            content_stats=jnp.full((NUM_CONTENT_STATS,), params.content_stats_start, jnp.float32),
            context=jax.random.normal(context_key, (CONTEXT_DIM,), jnp.float32),
            time=jnp.zeros((), jnp.int32),
        )
        return self._read(self._observation(state, params), jnp.asarray(True)), state  # read at the start

    def step(self, key: jax.Array, state: HRVState, action: jax.Array, params: HRVParams | None = None) -> StepResult:
        """Apply one edit. Terminated on success; truncated at max_episode_length unless the
        same step succeeded (terminated wins, so PPO never bootstraps past a success)."""
        params = self.default_params if params is None else params
        action, invalid = self.checked_action(action)
        style, content_op = action[0], action[1]
        modification = action[2:] - MOD_KEEP
        direction = modification.astype(jnp.float32) + params.style_vectors[style]
        delta = params.step_scale[content_op] * params.step_size * context_gain(state.context, params) * direction
        noise = params.noise_scale * jax.random.normal(key, (self.hrv_dim,), jnp.float32)
        # the reading is lost with probability reading_dropout (a key of its own: the noise stream is the task's)
        seen = jax.random.uniform(jax.random.fold_in(key, 1)) >= self.reading_dropout if self.reading_dropout else None
        next_hrv = jnp.clip(state.current_hrv + delta + noise, 0.0, 1.0)

        error = next_hrv - state.target_hrv
        success = jnp.max(jnp.abs(error)) <= params.target_precision
        time = state.time + 1
        truncated = jnp.logical_and(time >= params.max_episode_length, jnp.logical_not(success))
        reward = self.reward(state.current_hrv, next_hrv, state.target_hrv, success, params)

        next_state = HRVState(
            current_hrv=next_hrv,
            target_hrv=state.target_hrv,
            content_stats=jnp.clip(state.content_stats + params.content_effects[content_op], 0.0, 1.0),
            context=state.context,
            time=time,
        )
        info = {
            "success": success,
            "distance": jnp.linalg.norm(error),
            "max_abs_error": jnp.max(jnp.abs(error)),
            "similarity": self.similarity_to_target(next_hrv, state.target_hrv),
            "invalid_action": invalid,
        }
        reward = reward.astype(jnp.float32)
        # a state that is no longer finite ends the episode (terminated, reward 0: no NaN to bootstrap)
        return end_if_not_finite(
            (self._read(self._observation(next_state, params), seen), next_state, reward, success, truncated, info),
            all_finite(next_state) & jnp.isfinite(reward),
        )

    def checked_action(self, action: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The action as int32 components, and whether it was invalid. A component that is NaN,
        infinite, fractional or outside ``0 .. nvec - 1`` becomes the neutral choice (no style,
        keep the content, keep that dimension) rather than a clipped neighbour, and the action
        is flagged (``info["invalid_action"]``): a broken policy is seen, not silently steered."""
        action = jnp.asarray(action)
        nvec = np.asarray(self.action_space().nvec)
        if action.shape != nvec.shape:
            raise ValueError(
                f"action of shape {action.shape}: expected shape {nvec.shape} "
                f"(style, content op, one modification per HRV dimension)"
            )
        neutral = jnp.asarray([STYLE_NONE, CONTENT_KEEP] + [MOD_KEEP] * self.hrv_dim, jnp.int32)
        valid = (action >= 0) & (action < nvec)
        if jnp.issubdtype(action.dtype, jnp.inexact):
            valid = valid & jnp.isfinite(action) & (action == jnp.round(action))
        checked = jnp.where(valid, action, neutral).astype(jnp.int32)
        return checked, jnp.logical_not(jnp.all(valid))

    def diagnostics(self, info: dict[str, jax.Array]) -> dict[str, jax.Array]:
        return {"distance": info["distance"]}
