"""Population-based training's exploit/explore step against hand-computed populations, and its
settings' checks (refused before anything compiles). The step inside a run, with a kill and a
resume, is tests/test_pbt_run.py."""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.ppo.algorithm import RunnerState
from purehr.algorithms.ppo.config import PPOConfig
from purehr.cli.pbt_flags import add_pbt_flags, pbt_from_args
from purehr.population.exploit_explore import (
    choose_parents,
    exploit_and_explore,
    explore,
    fitness,
    rank_worst_first,
)
from purehr.population.settings import PBTSettings
from purehr.protocol_settings import ProtocolSettings
from purehr.run.compiled.train_all import checkpoint_schedule, population_updates

N = 8


def population_runner() -> RunnerState:
    """8 members whose every leaf says which member it is (member i holds i, 10 i, ...)."""
    member = jnp.arange(N, dtype=jnp.float32)
    hparams = PPOConfig().hyperparams()
    hparams = jax.tree.map(lambda x: jnp.broadcast_to(x, (N,)), hparams)
    hparams = hparams.replace(learning_rate=1e-3 * (1 + member))
    return RunnerState(
        params={"w": member[:, None] * jnp.ones((N, 3)), "obs_mean": 10 * member},
        opt_state={"mu": 100 * member, "count": jnp.arange(N, dtype=jnp.int32)},
        env_state=1000 * member,
        observation=-member,
        key=jnp.stack([jnp.arange(N, dtype=jnp.uint32)] * 2, axis=1),
        update_index=jnp.full((N,), 7, jnp.int32),
        hparams=hparams,
    )


def test_fitness_ranks_success_then_return_then_lower_member_with_diverged_and_nan_worst():
    evaluation = {
        "success_rate": jnp.array([1.0, 1.0, 0.5, 1.0, jnp.nan, 0.0, 1.0, 1.0]),
        "return_mean": jnp.array([5.0, 7.0, 9.0, 7.0, 9.0, 3.0, 1.0, 8.0]),
    }
    diverged = jnp.array([False] * 7 + [True])
    primary, tie_break = fitness(evaluation, diverged, "success")
    assert np.isneginf(np.asarray(primary)[[4, 7]]).all()  # a NaN evaluation and a diverged member
    order = np.asarray(rank_worst_first(primary, tie_break)).tolist()
    # worst first: diverged 7 (-inf, tie -inf) and NaN 4 (-inf, tie 9): 7 below 4; then 5 (0.0),
    # 2 (0.5); the 1.0 members by return 6 (1), 0 (5), then 1 and 3 tie on 7: the lower index ranks higher
    assert order == [7, 4, 5, 2, 6, 0, 3, 1]
    primary, _ = fitness(evaluation, diverged, "return")
    assert np.asarray(primary)[:7].tolist() == [5.0, 7.0, 9.0, 7.0, 9.0, 3.0, 1.0]


def test_truncation_selection_copies_the_bottom_from_the_top_and_keeps_the_rest():
    order = jnp.array([7, 4, 5, 2, 6, 0, 3, 1])  # worst first
    for draw in range(20):
        parent = np.asarray(choose_parents(order, jax.random.PRNGKey(draw), 2))
        assert set(parent[[7, 4]]) <= {3, 1}  # the bottom quarter copies the top quarter
        assert parent[[5, 2, 6, 0, 3, 1]].tolist() == [5, 2, 6, 0, 3, 1]  # everyone else keeps itself
    drawn = {tuple(np.asarray(choose_parents(order, jax.random.PRNGKey(k), 2))[[7, 4]]) for k in range(40)}
    assert {p for pair in drawn for p in pair} == {3, 1}  # both top members get drawn


def test_exploit_copies_weights_optimiser_state_and_hyperparameters_and_leaves_the_rest():
    runner = population_runner()
    parent = jnp.array([0, 1, 2, 5, 4, 5, 6, 1], jnp.int32)  # 3 copies 5, 7 copies 1
    settings = PBTSettings.checked(explore=["learning_rate"], resample_probability=0.0)
    after = exploit_and_explore(runner, parent, jax.random.PRNGKey(0), settings)
    expected_member = np.array([0, 1, 2, 5, 4, 5, 6, 1], np.float32)
    np.testing.assert_array_equal(after.params["w"][:, 0], expected_member)
    np.testing.assert_array_equal(after.params["obs_mean"], 10 * expected_member)  # observation statistics
    np.testing.assert_array_equal(after.opt_state["mu"], 100 * expected_member)
    np.testing.assert_array_equal(after.opt_state["count"], expected_member.astype(np.int32))
    for name in ("env_state", "observation", "key", "update_index"):  # each member keeps its own
        np.testing.assert_array_equal(getattr(after, name), getattr(runner, name))
    lr_before, lr_after = np.asarray(runner.hparams.learning_rate), np.asarray(after.hparams.learning_rate)
    unchanged = [0, 1, 2, 4, 5, 6]
    np.testing.assert_array_equal(lr_after[unchanged], lr_before[unchanged])  # bit for bit
    # a copy takes its parent's value times 0.8 or 1.25 (no resampling here)
    for member, source in ((3, 5), (7, 1)):
        ratio = lr_after[member] / lr_before[source]
        assert min(abs(ratio - 0.8), abs(ratio - 1.25)) < 1e-6, (member, ratio)
    np.testing.assert_array_equal(after.hparams.gamma, runner.hparams.gamma)  # not explored


def test_explore_stays_in_bounds_perturbs_by_the_factors_and_resamples_log_uniformly():
    settings = PBTSettings.checked(explore=["learning_rate", "gamma"], bounds={"learning_rate": (1e-4, 2e-3)})
    values = jnp.full((4000,), 1.8e-3)
    explored = np.asarray(explore(values, "learning_rate", jax.random.PRNGKey(1), settings))
    assert explored.min() >= 1e-4 and explored.max() <= 2e-3
    ratio = explored / 1.8e-3
    down, at_bound = np.isclose(ratio, 0.8), np.isclose(explored, 2e-3)  # 1.8e-3 x 1.25 is clipped
    resampled = ~(down | at_bound)
    assert abs(resampled.mean() - 0.25) < 0.03  # the resample probability
    assert abs(down.mean() - 0.75 / 2) < 0.03  # half of the perturbations go down
    # log-uniform resampling: the log of what was drawn is uniform on [log 1e-4, log 2e-3] (width
    # 3.0: the mean of ~1000 draws has a standard deviation of 0.03, the quartiles are at 1/4, 3/4)
    logs = np.log(explored[resampled])
    low, high = np.log(1e-4), np.log(2e-3)
    assert abs(logs.mean() - (low + high) / 2) < 0.12
    assert np.quantile(logs, [0.25, 0.75]) == pytest.approx([low + 0.75, high - 0.75], abs=0.2)
    gammas = np.asarray(explore(jnp.full((4000,), 0.995), "gamma", jax.random.PRNGKey(2), settings))
    assert gammas.min() >= 0.5 and gammas.max() <= 0.9999
    complement = (1 - gammas) / 0.005  # gamma is perturbed through 1 - gamma
    perturbed = np.isclose(complement, 0.8, atol=1e-3) | np.isclose(complement, 1.25, atol=1e-3)
    assert abs(perturbed.mean() - 0.75) < 0.03


def test_the_step_fires_at_every_kth_checkpoint_target_but_never_first_or_last():
    config = PPOConfig(total_timesteps=16384, num_envs=4, num_steps=128, minibatch_size=128)
    protocol = ProtocolSettings(checkpoint_interval=3000)
    assert checkpoint_schedule(config, protocol)[0].tolist() == [
        0,
        6,
        12,
        18,
        24,
        30,
        32,
    ]  # targets 0, 3000, ..., 15000; last
    assert population_updates(config, protocol, 1) == (6, 12, 18, 24, 30)
    assert population_updates(config, protocol, 2) == (12, 24)  # targets 6000 and 12000
    assert population_updates(config, protocol, 6) == ()


CONFIGS = {"hrv": PPOConfig(total_timesteps=300_000, learning_rate=1e-3)}
PROTOCOLS = {"hrv": ProtocolSettings(checkpoint_interval=50_000)}
FIRE_AT = {"hrv": population_updates(CONFIGS["hrv"], PROTOCOLS["hrv"], 1)}
BETWEEN = FIRE_AT  # the checkpoints between the first and the last: where an interval of 1 fires


@pytest.mark.parametrize(
    "given, population, message",
    [
        (dict(explore=["width"]), 8, "--pbt-explore 'width': not a hyperparameter"),
        (dict(explore=["learning_rate", "learning_rate"]), 8, "each hyperparameter may appear once"),
        (dict(bounds={"learning_rate": (0.1, 0.2)}), 8, "exclude hrv's starting value learning_rate=0.001"),
        (dict(bounds={"clip_range": (0.3, 0.1)}), 8, "--pbt-bounds clip_range=0.3:0.1: expected 0 < LOW < HIGH"),
        (dict(bounds={"vf_coef": (0.1, 1.0)}), 8, "--pbt-bounds vf_coef: 'vf_coef' is not explored"),
        (dict(fraction=0.6), 8, "--pbt-fraction 0.6: expected a number in (0, 0.5]"),
        (dict(factors=(0.8, -1.0)), 8, "--pbt-factors [0.8, -1.0]"),
        (dict(resample_probability=1.5), 8, "--pbt-resample 1.5"),
        (dict(interval=0), 8, "--pbt-interval 0: expected a positive integer"),
        (dict(fitness={"hrv": "speed"}), 8, "--pbt-fitness hrv=speed: expected one of"),
        (dict(fitness={"swing": "return"}), 8, "--pbt-fitness for ['swing']: not trained"),
        ({}, 3, "--population 3: truncation selection with --pbt-fraction 0.25 needs at least 4 members"),
        (dict(fraction=0.5), 1, "--population 1"),
    ],
)
def test_bad_settings_are_refused_naming_the_value(given, population, message):
    with pytest.raises(ValueError, match=None) as raised:
        PBTSettings.checked(**given).check_run(population, CONFIGS, FIRE_AT, BETWEEN, PROTOCOLS)
    assert message in str(raised.value)


def test_a_hyperparameter_starting_where_the_log_scale_has_no_place_is_refused_naming_the_way_out():
    """Issue 63: a task whose ent_coef is 0 (the example's, the continuous defaults') cannot explore
    it (0 x any factor is 0; bounds must be > 0): the default set is refused naming the way out,
    leaving ent_coef out, which then passes; so is a gamma of 1 (explored as 1 - x); bounds from 0
    say why too."""
    configs = {"hrv": CONFIGS["hrv"].replace(ent_coef=0.0)}
    with pytest.raises(ValueError) as raised:
        PBTSettings.checked().check_run(8, configs, FIRE_AT, BETWEEN, PROTOCOLS)
    said = str(raised.value)
    assert said.startswith("--pbt: hrv starts at ent_coef=0, which PBT cannot explore"), said
    assert "leave ent_coef out of the explored set (--pbt-explore learning_rate clip_range)" in said
    PBTSettings.checked(explore=["learning_rate", "clip_range"]).check_run(8, configs, FIRE_AT, BETWEEN, PROTOCOLS)
    with pytest.raises(ValueError, match=r"--pbt-bounds ent_coef=0.0:0.1: .*leave ent_coef out of --pbt-explore"):
        PBTSettings.checked(bounds={"ent_coef": (0.0, 0.1)})
    configs = {"hrv": CONFIGS["hrv"].replace(gamma=1.0)}
    with pytest.raises(
        ValueError, match=r"hrv starts at gamma=1, .* log scale of 1 - gamma .*\(--pbt-explore learning_rate\)"
    ):
        PBTSettings.checked(explore=["gamma", "learning_rate"]).check_run(8, configs, FIRE_AT, BETWEEN, PROTOCOLS)


def test_the_default_explore_set_on_a_sac_task_is_refused_naming_sacs_hyperparameters():
    """Issue 63: --pbt on a SAC entry without --pbt-explore: the default set is PPO's, and the
    refusal says so and names SAC's own (whose suggested learning rates then pass)."""
    from purehr.algorithms.sac.config import SACConfig

    configs = {"swing@sac": SACConfig(total_timesteps=300_000)}
    fire_at = {"swing@sac": population_updates(configs["swing@sac"], PROTOCOLS["hrv"], 1)}
    protocols = {"swing@sac": PROTOCOLS["hrv"]}
    with pytest.raises(ValueError) as raised:
        PBTSettings.checked().check_run(8, configs, fire_at, fire_at, protocols)
    said = str(raised.value)
    assert "--pbt-explore learning_rate" not in said, said
    assert "(learning_rate ent_coef clip_range: PPO's); expected --pbt-explore with some of sac's: " in said
    suggested = said.rpartition("(e.g. --pbt-explore ")[2].rstrip(")").split()
    assert suggested == ["actor_learning_rate", "critic_learning_rate", "temperature_learning_rate"]
    PBTSettings.checked(explore=suggested).check_run(8, configs, fire_at, fire_at, protocols)


def test_an_interval_that_never_fires_is_refused():
    settings = PBTSettings.checked(interval=6)  # hrv: targets 50k ... 250k, and the last (300k)
    fire_at = {"hrv": population_updates(CONFIGS["hrv"], PROTOCOLS["hrv"], 6)}
    with pytest.raises(ValueError) as raised:
        settings.check_run(8, CONFIGS, fire_at, BETWEEN, PROTOCOLS)
    said = str(raised.value)
    assert said.startswith("--pbt-interval 6: the PBT step never fires within hrv's budget")
    assert "5 checkpoint targets before its last update (a checkpoint every 50,000 steps)" in said
    assert said.endswith("expected --pbt-interval at most 5")
    fire_at = {"hrv": population_updates(CONFIGS["hrv"], PROTOCOLS["hrv"], 5)}
    PBTSettings.checked(interval=5).check_run(8, CONFIGS, fire_at, BETWEEN, PROTOCOLS)


def test_a_budget_without_a_checkpoint_before_its_end_blames_the_checkpoint_interval_not_pbt_interval():
    """The default interval (1) fires at every checkpoint between the first and the last: where
    it never fires, the checkpoint interval is the cause, with the budget rounded up to updates."""
    config = PPOConfig(total_timesteps=20_000, num_envs=8, num_steps=64, minibatch_size=128)
    protocol = ProtocolSettings(checkpoint_interval=50_000)

    def check(interval, config, protocol):
        fires = {"hrv": population_updates(config, protocol, interval)}
        between = {"hrv": population_updates(config, protocol, 1)}
        PBTSettings.checked(interval=interval).check_run(4, {"hrv": config}, fires, between, {"hrv": protocol})

    with pytest.raises(ValueError) as raised:
        check(1, config, protocol)
    said = str(raised.value)
    assert "--pbt-interval" not in said and "20,000 steps, a checkpoint" not in said
    assert "hrv trains 20,480 steps (total_timesteps 20,000 rounded up to 40 whole updates of 512)" in said
    exact, exact_protocol = config.replace(total_timesteps=20_480), ProtocolSettings(checkpoint_interval=20_480)
    with pytest.raises(
        ValueError, match=r"hrv trains 20,480 steps \(40 updates of 512\) and with a checkpoint every 20,480"
    ):
        check(3, exact, exact_protocol)
    ok = ProtocolSettings(checkpoint_interval=19_968)  # one checkpoint, after update 39 of 40
    assert population_updates(config, ok, 1) == (39,)
    check(1, config, ok)


def parse(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", nargs="+", type=int, default=None)
    add_pbt_flags(parser)
    return pbt_from_args(parser.parse_args(argv))


def test_the_command_line_gives_settings_and_the_population_gives_the_seeds():
    settings, seeds = parse(
        ["--pbt", "--population", "4", "--pbt-explore", "learning_rate", "gamma", "--pbt-bounds", "gamma=0.9:0.999"]
    )
    assert seeds == [0, 1, 2, 3]
    assert settings.explore == ("learning_rate", "gamma") and settings.bounds_of("gamma") == (0.9, 0.999)
    assert PBTSettings.from_dict(settings.to_dict()) == settings  # what the manifest keeps
    assert parse(["--pbt", "--seeds", "5", "6", "7", "8"])[1] == [5, 6, 7, 8]
    assert parse([]) == (None, None)
    for argv, message in [
        (["--population", "4"], "--population given without --pbt"),
        (["--pbt-interval", "2"], "--pbt-interval given without --pbt"),
        (["--pbt", "--population", "4", "--seeds", "1", "2"], "--population 4 but 2 --seeds"),
        (["--pbt", "--pbt-bounds", "gamma=0.9"], "--pbt-bounds gamma=0.9: expected NAME=LOW:HIGH"),
        (["--pbt", "--pbt-fitness", "hrv"], "--pbt-fitness 'hrv': expected TASK=RULE"),
    ]:
        with pytest.raises(ValueError) as raised:
            parse(argv)
        assert message in str(raised.value), argv


def test_the_comparison_takes_the_first_checkpoint_at_the_bar_and_the_best_member_at_the_end():
    from studies.pbt_comparison import best_of, format_table, member_outcome, summary_row

    def row(steps, success, ret, speed):
        return {
            "actual_steps": str(steps),
            "eval_success_rate": str(success),
            "eval_return_mean": str(ret),
            "eval_time_to_rotation": str(speed),
        }

    rows = [row(0, 0.0, -1, "nan"), row(51200, 0.9, 3, 16.0), row(102400, 0.95, 4, 15.0), row(153600, 0.9, 5, 14.0)]
    outcome = member_outcome(rows, "time_to_rotation")
    assert outcome == {"steps_to_bar": 102400.0, "success_rate": 0.9, "return_mean": 5.0, "speed": 14.0}
    assert np.isnan(member_outcome(rows[:2], "time_to_rotation")["steps_to_bar"])  # never reached
    outcomes = {
        3: {"success_rate": 1.0, "return_mean": 7.0},
        1: {"success_rate": 1.0, "return_mean": 7.0},
        2: {"success_rate": 1.0, "return_mean": float("nan")},
        0: {"success_rate": 0.9, "return_mean": 9.0},
    }
    assert best_of(outcomes) == 1  # success, then return, then the lower seed; NaN ranks last
    samples = [{"steps_to_bar": s, "success_rate": 1.0, "speed": v} for s, v in ((1e5, 13.0), (2e5, 14.0), (3e5, 15.0))]
    summary = summary_row("pbt", samples, "best member")
    # mean 2e5, t(0.975, 2) = 4.303, sd 1e5: half-width 4.303 x 1e5 / sqrt(3) = 248,432
    assert summary["steps_to_bar"] == pytest.approx(2e5)
    assert summary["steps_to_bar_ci_high"] - 2e5 == pytest.approx(4.3027 * 1e5 / 3**0.5, rel=1e-3)
    never = summary_row("seeds", [{"steps_to_bar": float("nan"), "success_rate": 0.5, "speed": 20.0}], "one")
    table = format_table([summary, never], "swing")
    assert "| pbt | best member | 200,000 [" in table and "| seeds | one | never |" in table


def test_every_divergence_of_a_member_is_listed_with_the_pbt_step_that_replaced_it():
    """From the rows a run logs: seed 0 diverges at update 11 (frozen until PBT gives it seed 1's
    weights at update 15) and again at 21 (replaced at 25; the copy at update 10, before it
    diverged, replaced nothing); seed 2 diverges at 28 and stays frozen to the end."""
    from types import SimpleNamespace

    from purehr.run.outcome import population_divergences

    setup = SimpleNamespace(name="hrv", config=SimpleNamespace(batch_size=512))
    first = {0: [0] * 10 + [11] * 5 + [0] * 5 + [21] * 5 + [0] * 5, 1: [0] * 30, 2: [0] * 27 + [28] * 3}
    updates = {
        seed: [{"update": u + 1, "diverged_at_update": d} for u, d in enumerate(at)] for seed, at in first.items()
    }
    parents = {0: {10: 3, 15: 1, 25: 1}, 1: {20: 2}, 2: {}}
    checkpoints = {
        seed: [
            {"update": u, "actual_steps": 512 * u, "pbt_parent": parents[seed].get(u, seed)} for u in range(0, 31, 5)
        ]
        for seed in first
    }
    found = population_divergences([setup], [0, 1, 2], {"hrv": updates}, {"hrv": checkpoints})

    def event(update, at=None, by=None):
        return {
            "update": update,
            "env_steps": 512 * update,
            "replaced_at_update": at,
            "replaced_at_steps": None if at is None else 512 * at,
            "replaced_by_seed": by,
        }

    assert found == {
        "hrv": {
            "0": {"update": 11, "env_steps": 5632, "divergences": [event(11, 15, 1), event(21, 25, 1)]},
            "2": {"update": 28, "env_steps": 28 * 512, "divergences": [event(28)]},
        }
    }
    assert population_divergences([setup], [1], {"hrv": {1: updates[1]}}, {"hrv": {1: checkpoints[1]}}) == {}
