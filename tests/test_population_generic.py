"""Population-based training for any algorithm: a member copies its algorithm's
``population_fields`` (not PPO's ``params``/``opt_state``) and explores the hyperparameters its
state carries, with default bounds and scales read from their names; a stand-in algorithm
(registered for the test) whose state and hyperparameters share no name with PPO's."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from purehr.algorithms import registry
from purehr.experiments.sweep import validate_axes  # before the stand-in registers: its metrics are not read
from purehr.population.exploit_explore import exploit_and_explore, explore, pbt_record
from purehr.population.settings import PBTSettings, default_bounds, in_complement_scale
from purehr.protocol_settings import ProtocolSettings

N = 8


@struct.dataclass
class StandInHyperparams:
    actor_learning_rate: jax.Array
    polyak_tau: jax.Array
    td_lambda: jax.Array


@struct.dataclass
class StandInState:
    actor: Any
    critics: Any
    buffer: Any
    key: jax.Array
    update_index: jax.Array
    hparams: StandInHyperparams


HYPERPARAMETERS = tuple(field.name for field in dataclasses.fields(StandInHyperparams))
POPULATION_FIELDS = ("actor", "critics")  # the buffer (its own experience) stays with the member


@dataclasses.dataclass(frozen=True)
class StandInConfig:
    total_timesteps: int = 4096
    actor_learning_rate: float = 3e-4
    polyak_tau: float = 0.005
    td_lambda: float = 0.9

    @property
    def batch_size(self) -> int:
        return 512

    @property
    def num_updates(self) -> int:
        return -(-self.total_timesteps // self.batch_size)


@pytest.fixture
def stand_in(monkeypatch):
    module = __name__
    entry = registry.AlgorithmEntry(
        "stand_in",
        "a test's",
        f"{module}:StandInConfig",
        f"{module}:missing",
        f"{module}:missing",
        f"{module}:HYPERPARAMETERS",
    )
    monkeypatch.setitem(registry.ALGORITHMS, "stand_in", entry)
    return entry


def population() -> StandInState:
    """Member i holds i in every learned leaf, 1000 i in its buffer."""
    member = jnp.arange(N, dtype=jnp.float32)
    return StandInState(
        actor={"w": member[:, None] * jnp.ones((N, 3))},
        critics=(10 * member, {"count": jnp.arange(N, dtype=jnp.int32)}),
        buffer=1000 * member,
        key=jnp.stack([jnp.arange(N, dtype=jnp.uint32)] * 2, axis=1),
        update_index=jnp.full((N,), 7, jnp.int32),
        hparams=StandInHyperparams(
            actor_learning_rate=1e-4 * (1 + member), polyak_tau=jnp.full((N,), 0.005), td_lambda=jnp.full((N,), 0.9)
        ),
    )


def test_a_member_copies_its_algorithms_population_fields_and_explores_only_its_hyperparameters(stand_in):
    runner = population()
    parent = jnp.array([0, 1, 2, 5, 4, 5, 6, 1], jnp.int32)  # 3 copies 5, 7 copies 1
    # the default explore set (PPO's learning_rate, ent_coef, clip_range) meets none of these names
    settings = PBTSettings.checked(explore=["actor_learning_rate", "td_lambda"], resample_probability=0.0)
    after = exploit_and_explore(runner, parent, jax.random.PRNGKey(0), settings, POPULATION_FIELDS)
    expected = np.array([0, 1, 2, 5, 4, 5, 6, 1], np.float32)
    np.testing.assert_array_equal(after.actor["w"][:, 0], expected)
    np.testing.assert_array_equal(after.critics[0], 10 * expected)
    np.testing.assert_array_equal(after.critics[1]["count"], expected.astype(np.int32))
    for name in ("buffer", "key", "update_index"):  # not a population field: each member keeps its own
        np.testing.assert_array_equal(getattr(after, name), getattr(runner, name))
    lr, lam = np.asarray(after.hparams.actor_learning_rate), np.asarray(after.hparams.td_lambda)
    for member, source in ((3, 5), (7, 1)):
        ratio = lr[member] / np.asarray(runner.hparams.actor_learning_rate)[source]
        assert min(abs(ratio - 0.8), abs(ratio - 1.25)) < 1e-6
        # td_lambda moves through 1 - x (its name ends in lambda): 0.1 x 0.8 or x 1.25
        assert min(abs((1 - lam[member]) / 0.1 - f) for f in (0.8, 1.25)) < 1e-4
    np.testing.assert_array_equal(after.hparams.polyak_tau, runner.hparams.polyak_tau)  # not explored
    record = pbt_record(after, jnp.zeros(N), parent, jnp.zeros(N, jnp.int32), settings)
    assert sorted(record) == [
        "pbt_actor_learning_rate",
        "pbt_diverged_at_update",
        "pbt_fitness",
        "pbt_parent",
        "pbt_td_lambda",
    ]


def test_default_bounds_and_scales_follow_the_name_and_an_unbounded_name_is_refused_with_the_fix():
    assert default_bounds("learning_rate") == (1e-5, 1e-2)  # PPO's own table first
    assert default_bounds("critic_learning_rate") == default_bounds("q_lr") == (1e-5, 1e-2)
    assert default_bounds("td_lambda") == (0.8, 0.999) and in_complement_scale("td_lambda")
    assert default_bounds("discount_gamma") == (0.5, 0.9999) and in_complement_scale("discount_gamma")
    assert default_bounds("polyak_tau") == (1e-5, 10.0) and not in_complement_scale("polyak_tau")
    assert default_bounds("widget") is None
    values = np.asarray(explore(jnp.full((2000,), 0.95), "td_lambda", jax.random.PRNGKey(3), PBTSettings()))
    assert values.min() >= 0.8 and values.max() <= 0.999


def test_explore_names_are_checked_against_each_tasks_algorithm(stand_in):
    configs = {"swing": StandInConfig(), "hrv": registry.default_config("ppo")}
    protocol = ProtocolSettings(checkpoint_interval=1024)
    fires = {task: [4] for task in configs}
    run = dict(steps_between=fires, checkpoints_between=fires, protocols={t: protocol for t in configs})
    with pytest.raises(ValueError) as said:
        PBTSettings.checked(explore=["widget"])
    assert "'widget'" in str(said.value) and "stand_in: ['actor_learning_rate', 'polyak_tau', 'td_lambda']" in str(
        said.value
    )
    # swing (stand_in) carries none of the default set: refused, naming its own hyperparameters
    with pytest.raises(
        ValueError,
        match=r"--pbt: swing trains stand_in, which has none of the hyperparameters PBT explores by default "
        r"\(learning_rate ent_coef clip_range: PPO's\); expected --pbt-explore with some of stand_in's: "
        r"actor_learning_rate polyak_tau td_lambda \(e.g. --pbt-explore actor_learning_rate\)",
    ):
        PBTSettings.checked().check_run(8, configs, **run)
    with pytest.raises(ValueError, match=r"swing's algorithm stand_in has none of them; expected some of its"):
        PBTSettings.checked(explore=["learning_rate"]).check_run(8, configs, **run)  # a set given: as before
    # one name per algorithm: each task explores its own
    PBTSettings.checked(explore=["learning_rate", "actor_learning_rate"]).check_run(8, configs, **run)
    with pytest.raises(ValueError, match=r"'clip_range': no task of this run has it"):
        PBTSettings.checked(explore=["actor_learning_rate", "clip_range"]).check_run(
            8, {"swing": configs["swing"]}, **run
        )
    with pytest.raises(ValueError, match=r"exclude swing's starting value polyak_tau=0.005"):
        settings = PBTSettings.checked(explore=["polyak_tau"], bounds={"polyak_tau": (0.01, 0.1)})
        settings.check_run(8, {"swing": configs["swing"]}, **run)


def test_sweep_axes_are_the_configs_algorithms_hyperparameters(stand_in):
    assert validate_axes({"polyak_tau": [0.01, 0.005]}, "stand_in") == {"polyak_tau": (0.01, 0.005)}
    with pytest.raises(ValueError, match=r"sweep axis 'clip_range' is not a continuous hyperparameter of stand_in; "):
        validate_axes({"clip_range": [0.1, 0.2]}, "stand_in")
    assert validate_axes({"clip_range": [0.1, 0.2]}) == {"clip_range": (0.1, 0.2)}  # PPO's, the default
