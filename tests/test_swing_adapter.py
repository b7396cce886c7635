"""The optional SwingRL adapter: a clear error without SwingRL, and the interface with it."""

from __future__ import annotations

import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.envs.swing import SwingEnv, SwingParams, physics
from purehr.envs.swing.swingrl_adapter import SwingRLEnv


def test_without_swing_rl_constructing_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "swing_rl", None)  # import swing_rl -> ImportError
    with pytest.raises(ImportError, match="pip install swing-rl"):
        SwingRLEnv(simulator=object())


class FakeSimulator:
    """SwingRL's simulator interface (docs/swing_model.md), backed by purehr's plant."""

    summary_fields = ("time", "swing_angle", "seat_radius", "energy_norm", "tension", "command_speed")
    n_free, n_actions = 1, 2
    spec = types.SimpleNamespace(nominal_length=SwingParams().length)

    def __init__(self):
        self.env = SwingEnv()
        params = self.env.default_params
        self._reset = jax.jit(self.env.reset_to)
        self._step = jax.jit(self.env.step)
        self._observe = jax.jit(lambda plant: physics.observation(plant, params))
        self._energy_norm = jax.jit(lambda plant: physics.energy_norm(plant, params))

    def initial_state(self, q, q_dot):
        return self._reset(q[0, 0], q_dot[0, 0])[1]

    def advance(self, state, action):
        obs, state, _, _, _, info = self._step(jax.random.PRNGKey(0), state, action[0])
        summary = jnp.stack([info[name] for name in self.summary_fields])[None]
        return state, obs[None], summary

    def observe(self, state, action):
        return self._observe(state.plant)[None]

    def summary(self, state, action):  # only energy_norm matters before the first step
        energy_norm = self._energy_norm(state.plant)
        return {name: jnp.reshape(energy_norm if name == "energy_norm" else 0.0, (1,)) for name in self.summary_fields}


def test_adapter_matches_swing_env_through_the_interface(monkeypatch):
    monkeypatch.setitem(sys.modules, "swing_rl", types.ModuleType("swing_rl"))
    simulator = FakeSimulator()
    adapter = SwingRLEnv(simulator)
    obs_a, state_a = adapter.reset_to(0.05, 0.0)
    obs_e, state_e = simulator._reset(0.05, 0.0)  # the plain SwingEnv, same compilation
    np.testing.assert_allclose(obs_a, obs_e)
    step = simulator._step
    for action in ([0.5, -0.2], [jnp.nan, 3.0]):
        action = jnp.array(action)
        out_a = adapter.step(jax.random.PRNGKey(0), state_a, action)
        out_e = step(jax.random.PRNGKey(0), state_e, action)
        state_a, state_e = out_a[1], out_e[1]
        np.testing.assert_allclose(out_a[0], out_e[0], rtol=1e-6)
        np.testing.assert_allclose(out_a[2], out_e[2], rtol=1e-5, atol=1e-6)  # same reward
        assert set(out_a[5]) == set(out_e[5])
    assert adapter.action_space().shape == (2,) and adapter.max_episode_steps() == 1600
    assert set(adapter.diagnostics(out_a[5])) == {"min_tension", "command_speed"}
