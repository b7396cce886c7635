"""Does exploration noise alone pump the swing from rest? (issue 50, SAC's exploration.)

A "policy" that acts tanh(sigma * eps_t), eps_t white, AR(1) or pink (1/f) standard-normal
noise: SAC's stochastic policy with its mean at 0 and a latent std of sigma (0.09 is what SAC's
learned temperature leaves on swing). Scored on swing's 100 held-out starts (near rest) with
the task's held-out evaluation: the peak energy (0 hanging, 1 at the top) and the success
rate. Beside it, each noise's share of power near the swing's natural frequency f0 =
sqrt(g / rho0) / 2 pi (the lean's forcing) and near 2 f0 (the squat's parametric pumping),
in bands of an octave, from the same sequences.

Pink noise as Eberhard et al. (2023) and the ``colorednoise`` package make it: per episode, an
FFT of complex normals scaled by 1/sqrt(f) (power 1/f) above the lowest frequency 1/horizon,
back-transformed and scaled to unit variance.

    PYTHONPATH=. python results/algorithms/noise_pumping.py --out results/algorithms/raw/noise_pumping.json
"""

from __future__ import annotations

import argparse
import json
import math

import jax
import jax.numpy as jnp
import numpy as np

from purehr.algorithms.sac.exploration import ar1_step
from purehr.envs.policies import RecurrentPolicy
from purehr.tasks import get_task

RHO0 = 1.4  # m, the swing's effective pendulum length near rest (results/algorithms/README.md)


def pink(key: jax.Array, steps: int, size: int) -> jax.Array:
    """[steps, size] unit-variance 1/f noise (``colorednoise.powerlaw_psd_gaussian(1, ...)``'s
    recipe: random-phase spectrum with amplitude f^-1/2, the lowest bin's amplitude for f below
    1/steps, DC zero)."""
    f = np.fft.rfftfreq(steps)
    scale = np.where(f < 1.0 / steps, 1.0 / steps, f) ** -0.5
    scale[0] = 0.0
    re, im = jax.random.normal(key, (2, size, f.size))
    if steps % 2 == 0:
        im = im.at[:, -1].set(0.0)
    spectrum = (re + 1j * im) * scale
    x = jnp.fft.irfft(spectrum, n=steps, axis=-1)
    sigma = 2 * np.sqrt(np.sum(scale**2)) / steps
    return (x / sigma).T.astype(jnp.float32)


def noise_policy(kind: str, sigma: float, correlation: float, steps: int, size: int) -> RecurrentPolicy:
    """tanh(sigma * eps_t) with eps_t of ``kind``; the memory is the AR(1) state or the episode's
    pink sequence (drawn at t = 0 from the episode's key)."""

    def step(memory, observation, t, key):
        z = jax.random.normal(key, (size,), jnp.float32)
        if kind == "pink":
            sequence = jax.lax.cond(t == 0, lambda: pink(key, steps, size), lambda: memory)
            eps = sequence[t]
            memory = sequence
        elif kind == "ar1":
            eps = jnp.where(t == 0, z, ar1_step(memory, z, correlation))
            memory = eps
        else:
            eps = z
        return jnp.tanh(sigma * eps), memory

    initial = jnp.zeros((steps, size), jnp.float32) if kind == "pink" else jnp.zeros((size,), jnp.float32)
    return RecurrentPolicy(initial, step)


def band_power(sequences: np.ndarray, dt: float, centre: float) -> float:
    """The share of the sequences' power [episodes, T] in the octave around ``centre`` Hz."""
    power = np.abs(np.fft.rfft(sequences - sequences.mean(axis=1, keepdims=True), axis=1)) ** 2
    f = np.fft.rfftfreq(sequences.shape[1], dt)
    band = (f >= centre / math.sqrt(2)) & (f < centre * math.sqrt(2))
    return float(power[:, band].sum() / power[:, 1:].sum())


def sequences(kind: str, correlation: float, steps: int, episodes: int, key: jax.Array) -> np.ndarray:
    keys = jax.random.split(key, episodes)
    if kind == "pink":
        return np.asarray(jax.vmap(lambda k: pink(k, steps, 1)[:, 0])(keys))
    z = np.asarray(jax.random.normal(key, (episodes, steps)))
    if kind == "white":
        return z
    out = np.empty_like(z)
    out[:, 0] = z[:, 0]
    for t in range(1, steps):
        out[:, t] = correlation * out[:, t - 1] + math.sqrt(1 - correlation**2) * z[:, t]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--sigmas", type=float, nargs="+", default=[0.09, 0.3, 1.0])
    parser.add_argument("--correlations", type=float, nargs="+", default=[math.exp(-1 / 30), math.exp(-1 / 120)])
    args = parser.parse_args()
    task = get_task("swing")
    env = task.make_env()
    params = env.default_params
    steps, size = env.max_episode_steps(params), env.action_space(params).shape[0]
    f0 = math.sqrt(params.gravity / RHO0) / (2 * math.pi)
    kinds = [("white", 0.0)] + [("ar1", b) for b in args.correlations] + [("pink", 0.0)]
    rows = []
    for kind, b in kinds:
        seqs = sequences(kind, b, steps, 256, jax.random.key(3))
        spectral = {
            "band_f0": band_power(seqs, params.dt, f0),
            "band_2f0": band_power(seqs, params.dt, 2 * f0),
            "variance": float(seqs.var()),
        }
        for sigma in args.sigmas:
            policy = noise_policy(kind, sigma, b, steps, size)
            result = jax.jit(lambda p=policy: task.heldout_evaluation(env, params, p))()
            row = dict(
                noise=kind,
                correlation=round(b, 4),
                sigma=sigma,
                **spectral,
                peak_energy=float(result["peak_energy"]),
                success_rate=float(result["success_rate"]),
                effort=float(result["effort"]),
            )
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"f0_hz": f0, "dt": params.dt, "steps": steps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
