"""Upper bound on the swing's fastest rotation: open-loop action sequences improved by shooting
through the differentiable plant, then verified by replay in ``SwingEnv`` itself.

Why this shape (results/limits/README.md, "Swing: the upper bound"):

- **The decision variables** are one action per control step, ``a = sin(u)`` (no dead zone at
  the limits, where a tanh would stop the gradient), held for the control interval exactly as
  ``SwingEnv.step`` holds it; the same ``physics.rk4_advance`` is stepped, so an accepted
  sequence is a sequence of legal environment actions.
- **The objective** is the crossing time of ``|theta| = 2 pi`` (the success condition),
  linearly interpolated between control steps so it moves continuously with the actions. Its
  gradient is that of the signed angle at the step before the crossing (``jax.grad`` through
  every RK4 sub-step, the plant run with ``gradient_substeps`` sub-steps and rematerialised per
  control step to keep the backward pass cheap).
- **A step is accepted** only if the crossing, recomputed with the environment's own
  sub-steps, is earlier: a backtracking line search along the normalised gradient, one step
  size per start, so every accepted change is a verified improvement, never a surrogate one.
- **Basins**: the pumping dynamics make the objective rugged; a sequence found from one start
  (or its mirror image: theta -> -theta, lean -> -lean is a symmetry of the plant) often
  rotates sooner from another start. ``transplant`` offers the fastest sequences of the pool
  to every start between rounds of gradient steps.

Shapes: ``B`` starts, ``N`` control steps, actions ``(B, N, 2)`` (squat, lean) in [-1, 1].
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from purehr.envs.swing import physics
from purehr.envs.swing.env import SwingEnv
from purehr.envs.swing.physics import SwingParams

TWO_PI = 2.0 * math.pi
NO_CROSSING = 1.0e9
"""The crossing of a sequence that never rotates within its steps (larger than any horizon)."""


@dataclass(frozen=True)
class ShootingSettings:
    """The optimiser's budget and step rules (defaults: the recorded results/limits run)."""

    rounds: int = 6  # transplant, then ``iterations`` gradient steps; repeated
    iterations: int = 10  # gradient + line-search steps per round
    gradient_substeps: int = 2  # RK4 sub-steps of the plant the gradient is taken through
    ladder: tuple[float, ...] = (0.2, 0.5, 1.0, 2.5)  # trial steps, multiples of a start's scale
    initial_scale: float = 1.0  # first step length (L2 norm over the whole u sequence)
    grow: float = 1.5  # scale after an accepted step: grow x the accepted length
    shrink: float = 0.3  # scale after a rejected step: shrink x scale
    pool_size: int = 8  # the fastest sequences offered to every start by ``transplant``
    neighbours: int = 6  # and the sequences of the starts nearest in energy, offered to each
    offsets: tuple[int, ...] = (-40, -20, -10, 0, 5, 10, 15, 20, 30, 40, 60, 80)  # transplant: < 0 wait, > 0 skip steps
    screen_substeps: int = 2  # RK4 sub-steps of the cheap plant that screens transplant offers
    screen_width: int = 8  # transplant offers screened per compiled call
    horizon_margin: int = 8  # control steps kept after the latest crossing of the warm starts

    def __post_init__(self):
        if min(self.rounds, self.iterations, self.pool_size, self.neighbours) < 0 or self.gradient_substeps < 1:
            raise ValueError(f"ShootingSettings {self}: rounds, iterations, pool_size, neighbours >= 0; substeps >= 1")
        if not self.ladder or min(self.ladder) <= 0 or self.screen_substeps < 1 or self.screen_width < 1:
            raise ValueError(f"ShootingSettings {self}: positive ladder steps; screen_substeps, screen_width >= 1")


@dataclass
class ShootingResult:
    """The best sequence per start and how it was reached."""

    actions: np.ndarray  # (B, N, 2) float32 environment actions sin(u)
    crossing: np.ndarray  # (B,) interpolated crossing of |theta| = 2 pi, in control steps
    source: np.ndarray  # (B,) object: where each start's sequence came from (warm start or transplant)
    warm_crossing: np.ndarray  # (B,) the crossing of the best warm start, where the search began
    history: list[dict] = field(default_factory=list)  # per round: median / max crossing, seconds


# ----------------------------------------------------------------------------- the plant


def swing_angles(u: jax.Array, theta0, theta_dot0, params: SwingParams, checkpoint: bool = False) -> jax.Array:
    """(N,) unwrapped theta after each control step of actions ``sin(u)`` (u: (N, 2)), from
    ``SwingEnv.reset_to(theta0, theta_dot0)``: rest in the neutral pose."""
    _, state = SwingEnv(params).reset_to(theta0, theta_dot0, params)

    def advance(plant, step_u):
        return physics.rk4_advance(plant, jnp.sin(step_u).astype(plant.theta.dtype), params)

    if checkpoint:
        advance = jax.checkpoint(advance)

    def body(plant, step_u):
        plant = advance(plant, step_u)
        return plant, plant.theta

    return jax.lax.scan(body, state.plant, u)[1]


def crossing_step(angles: jax.Array, theta0) -> jax.Array:
    """The first crossing of ``|theta| = 2 pi`` in control steps, interpolated linearly
    between steps: in (j, j + 1] when step j + 1 is the first successful one (``ceil`` gives
    the success step); ``NO_CROSSING`` when no step succeeds."""
    size = jnp.abs(angles)
    hit = size >= TWO_PI
    row = jnp.argmax(hit)
    before = jnp.where(row > 0, size[jnp.maximum(row - 1, 0)], jnp.abs(jnp.asarray(theta0, size.dtype)))
    fraction = (TWO_PI - before) / jnp.maximum(size[row] - before, 1e-6)
    return jnp.where(jnp.any(hit), row + jnp.clip(fraction, 1e-6, 1.0), NO_CROSSING)


def _crossings(params: SwingParams, theta0: jax.Array, theta_dot0: jax.Array) -> Callable:
    """jitted (C, B, N, 2) candidate u -> (C, B) crossings, each start its own row of every candidate."""

    def one(u, th, thd):
        return crossing_step(swing_angles(u, th, thd, params), th)

    per_start = jax.vmap(one)
    return jax.jit(jax.vmap(lambda u: per_start(u, theta0, theta_dot0)))


def _ascent(params: SwingParams, theta0: jax.Array, theta_dot0: jax.Array) -> Callable:
    """jitted (u (B, N, 2), row (B,), sign (B,)) -> d(sign * theta[row]) / du, through the plant."""

    def one(u, th, thd, row, sign):
        return sign * swing_angles(u, th, thd, params, checkpoint=True)[row]

    return jax.jit(jax.vmap(jax.grad(one), in_axes=(0, 0, 0, 0, 0)))


def mirror(u: np.ndarray) -> np.ndarray:
    """The mirror image of a sequence (lean negated): the plant is symmetric under theta -> -theta."""
    return np.concatenate([u[..., :1], -u[..., 1:]], axis=-1)


def offset(u: np.ndarray, steps: int) -> np.ndarray:
    """Sequences (..., N, 2) moved by ``steps``, the same length: ``steps < 0`` waits that many
    neutral steps first, ``steps > 0`` skips the first ``steps`` actions (neutral at the end)."""
    if steps == 0:
        return u
    neutral = np.zeros_like(u[..., : abs(steps), :])
    if steps < 0:
        return np.concatenate([neutral, u[..., :steps, :]], axis=-2)
    return np.concatenate([u[..., steps:, :], neutral], axis=-2)


# ----------------------------------------------------------------------------- the optimiser


class Shooter:
    """The optimiser for one batch of starts (``theta0, theta_dot0``: (B,)), compiled once for
    sequences of ``horizon`` steps."""

    def __init__(self, params: SwingParams, theta0, theta_dot0, horizon: int, settings: ShootingSettings):
        dtype = jnp.result_type(float)
        self.params, self.settings, self.horizon = params, settings, int(horizon)
        self.theta0 = jnp.asarray(theta0, dtype)
        self.theta_dot0 = jnp.asarray(theta_dot0, dtype)
        self.batch = int(self.theta0.shape[0])
        self._crossings = _crossings(params, self.theta0, self.theta_dot0)
        self._screen = _crossings(params.replace(substeps=settings.screen_substeps), self.theta0, self.theta_dot0)
        gradient_params = params.replace(substeps=settings.gradient_substeps)
        self._ascent = _ascent(gradient_params, self.theta0, self.theta_dot0)
        self._angles = jax.jit(jax.vmap(lambda u, th, thd: swing_angles(u, th, thd, params)))
        env = SwingEnv(params)
        plants = jax.vmap(lambda th, thd: env.reset_to(th, thd, params)[1].plant)(self.theta0, self.theta_dot0)
        energy = np.asarray(jax.vmap(lambda plant: physics.energy_norm(plant, params))(plants), np.float64)
        self.log_energy = np.log(np.maximum(energy, 1e-12))  # (B,) how hard a start is: its neighbours

    def crossings(self, candidates: np.ndarray, screen: bool = False) -> np.ndarray:
        """(C, B, N, 2) u -> (C, B) crossings, in chunks of a fixed width (one compiled program):
        the ladder's length with the environment's sub-steps, or ``screen_width`` with the
        cheap screening plant (``screen=True``)."""
        width = self.settings.screen_width if screen else len(self.settings.ladder)
        program = self._screen if screen else self._crossings
        out = []
        for first in range(0, candidates.shape[0], width):
            chunk = candidates[first : first + width]
            pad = width - chunk.shape[0]
            if pad:
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], pad, axis=0)])
            out.append(np.asarray(program(jnp.asarray(chunk, jnp.float32)))[: width - pad])
        return np.concatenate(out)

    def directions(self, u: np.ndarray, crossing: np.ndarray) -> np.ndarray:
        """(B,) sign of theta at each start's crossing (+1 where none yet: either way is fine)."""
        angles = np.asarray(self._angles(jnp.asarray(u, jnp.float32), self.theta0, self.theta_dot0))
        row = np.clip(np.ceil(crossing).astype(np.int64) - 1, 0, self.horizon - 1)
        sign = np.sign(angles[np.arange(self.batch), row])
        return np.where(sign == 0, 1.0, sign)

    def gradient_steps(self, u: np.ndarray, crossing: np.ndarray, scale: np.ndarray, iterations: int):
        """``iterations`` line-searched gradient steps on every start at once; returns u, crossing, scale."""
        s = self.settings
        ladder = np.asarray(s.ladder, np.float32)
        index = np.arange(self.batch)
        sign = self.directions(u, crossing)
        for _ in range(iterations):
            live = crossing < NO_CROSSING
            row = np.clip(np.ceil(crossing).astype(np.int64) - 2, 0, self.horizon - 1)
            grad = np.asarray(self._ascent(jnp.asarray(u, jnp.float32), self.theta0, self.theta_dot0, row, sign))
            norm = np.linalg.norm(grad.reshape(self.batch, -1), axis=1)
            direction = grad / np.maximum(norm, 1e-12)[:, None, None]
            lengths = scale[None, :] * ladder[:, None]  # (C, B)
            candidates = u[None] + lengths[:, :, None, None] * direction[None]
            trial = self.crossings(candidates)
            pick = trial.argmin(axis=0)
            best = trial[pick, index]
            better = (best < crossing) & live & (norm > 0)
            u = np.where(better[:, None, None], candidates[pick, index], u)
            crossing = np.where(better, best, crossing)
            scale = np.where(better, s.grow * lengths[pick, index], s.shrink * scale)
        return u.astype(np.float32), crossing, scale

    def transplant(self, u: np.ndarray, crossing: np.ndarray, source: np.ndarray):
        """Offer every start the ``pool_size`` fastest sequences and the sequences of its
        ``neighbours`` nearest starts in initial energy, each as it is and mirrored, moved by
        every one of ``offsets``. The offers are screened with the cheap plant; the best one
        per start is then run with the environment's sub-steps and kept only if it rotates
        sooner there."""
        s = self.settings
        index = np.arange(self.batch)
        pool = np.argsort(crossing, kind="stable")[: s.pool_size]
        donors = [np.full(self.batch, j) for j in pool[crossing[pool] < NO_CROSSING]]
        order = np.argsort(np.abs(self.log_energy[:, None] - self.log_energy[None, :]), axis=1, kind="stable")
        donors += [order[:, 1 + n] for n in range(min(s.neighbours, self.batch - 1))]
        variants = [(mirrored, steps) for mirrored in (False, True) for steps in s.offsets]
        if not donors:
            return u, crossing, source
        mirrored_u = mirror(u)
        offers = np.empty((len(donors) * len(variants), *u.shape), np.float32)  # (C, B, N, 2)
        labels = []
        for d, donor in enumerate(donors):
            for v, (mirrored, steps) in enumerate(variants):
                base = (mirrored_u if mirrored else u)[donor]
                offers[d * len(variants) + v] = offset(base, steps) if steps else base
                labels.append((donor, mirrored, steps))
        screened = self.crossings(offers, screen=True)
        pick = screened.argmin(axis=0)  # (B,)
        chosen = offers[pick, index]
        verified = self.crossings(chosen[None])[0]
        better = verified < crossing
        u = np.where(better[:, None, None], chosen, u).astype(np.float32)
        label = []
        for b in index:
            donor, mirrored, steps = labels[pick[b]]
            name = f"start {donor[b]}{' mirrored' if mirrored else ''}{f' {steps:+d}' if steps else ''}"
            label.append(f"{source[b]} <- {name}" if better[b] else source[b])
        return u, np.where(better, verified, crossing), np.asarray(label, dtype=object)


def optimise(
    warm_actions: dict[str, np.ndarray],
    theta0: np.ndarray,
    theta_dot0: np.ndarray,
    params: SwingParams,
    settings: ShootingSettings = ShootingSettings(),
    say: Callable[[str], None] = print,
) -> ShootingResult:
    """The fastest rotation found from each start. ``warm_actions``: name -> (B, N_name, 2)
    environment actions of a policy from these starts (the structured controller's, each PPO
    seed's); each start begins from whichever of them rotates soonest, then ``settings.rounds``
    rounds of transplant + gradient steps. Returns the best sequence found per start."""
    started = time.perf_counter()
    names = list(warm_actions)
    longest = max(a.shape[1] for a in warm_actions.values())
    padded = {n: _as_u(a, longest) for n, a in warm_actions.items()}
    probe = Shooter(params, theta0, theta_dot0, longest, settings)
    first = probe.crossings(np.stack([padded[n] for n in names]))  # (policies, B)
    pick = first.argmin(axis=0)
    crossing = first[pick, np.arange(probe.batch)]
    finite = crossing[crossing < NO_CROSSING]
    horizon = longest if finite.size == 0 else min(longest, int(np.ceil(finite.max())) + settings.horizon_margin)
    u = np.stack([padded[names[p]][b, :horizon] for b, p in enumerate(pick)])
    source = np.asarray([names[p] for p in pick], dtype=object)
    shooter = probe if horizon == longest else Shooter(params, theta0, theta_dot0, horizon, settings)
    crossing = shooter.crossings(u[None])[0]  # the same numbers, on the cut sequences
    warm = crossing.copy()
    scale = np.full(shooter.batch, settings.initial_scale, np.float32)
    history = [_summary("warm start", crossing, started)]
    say(f"[limits] swing warm start: median crossing {history[-1]['median']:.1f} steps, horizon {horizon}")
    for round_index in range(settings.rounds):
        u, crossing, source = shooter.transplant(u, crossing, source)
        u, crossing, scale = shooter.gradient_steps(u, crossing, scale, settings.iterations)
        scale = np.maximum(scale, settings.initial_scale * settings.shrink**2)  # a new round looks again
        history.append(_summary(f"round {round_index + 1}", crossing, started))
        say(
            f"[limits] swing round {round_index + 1}/{settings.rounds}: median crossing "
            f"{history[-1]['median']:.1f} steps, worst {history[-1]['max']:.1f} ({history[-1]['seconds']:.0f} s)"
        )
    return ShootingResult(np.sin(u).astype(np.float32), crossing, source, warm, history)


def _as_u(actions: np.ndarray, steps: int) -> np.ndarray:
    """Environment actions (B, n, 2) -> u = arcsin(a), cut or padded (neutral) to ``steps``."""
    a = np.clip(np.asarray(actions, np.float64), -1.0, 1.0)[:, :steps]
    if a.shape[1] < steps:
        a = np.concatenate([a, np.zeros((a.shape[0], steps - a.shape[1], 2))], axis=1)
    return np.arcsin(a).astype(np.float32)


def _summary(stage: str, crossing: np.ndarray, started: float) -> dict:
    finite = crossing[crossing < NO_CROSSING]
    return {
        "stage": stage,
        "median": float(np.median(finite)) if finite.size else math.inf,
        "max": float(finite.max()) if finite.size else math.inf,
        "rotating": int(finite.size),
        "seconds": time.perf_counter() - started,
    }


# ----------------------------------------------------------------------------- verification


def replay(env: SwingEnv, params: SwingParams, actions: np.ndarray, theta0, theta_dot0) -> dict[str, np.ndarray]:
    """Replays (B, N, 2) actions in ``env`` itself: ``reset_to(theta0, theta_dot0, params)`` then
    ``step`` with each action. Returns per start ``success`` (bool), ``step`` (the first
    successful control step, 0 where none) and ``time`` (that step's ``info["time"]``, s; NaN
    where none): the numbers a start is credited with."""
    dtype = jnp.result_type(float)

    def one(seq, th, thd):
        _, state = env.reset_to(th, thd, params)
        key = jax.random.PRNGKey(0)  # SwingEnv.step draws nothing

        def body(carry, action):
            state, done, step, when = carry
            _, next_state, _, terminated, truncated, info = env.step(key, state, action, params)
            hit = info["success"] & ~done
            carry = (
                jax.tree.map(lambda new, old: jnp.where(done, old, new), next_state, state),
                done | terminated | truncated,
                jnp.where(hit, next_state.step, step),
                jnp.where(hit, info["time"], when),
            )
            return carry, None

        start = (state, jnp.zeros((), bool), jnp.zeros((), jnp.int32), jnp.full((), jnp.nan, dtype))
        (_, _, step, when), _ = jax.lax.scan(body, start, seq)
        return step, when

    steps, times = jax.jit(jax.vmap(one))(
        jnp.asarray(actions, dtype), jnp.asarray(theta0, dtype), jnp.asarray(theta_dot0, dtype)
    )
    steps = np.asarray(steps)
    return {"success": steps > 0, "step": steps, "time": np.asarray(times, np.float64)}
