"""The HRV training programme: the curriculum inside the scan (validation, where the stages
fall, the targets the rollout actually draws), its record in the run manifest, and early
stopping through ``train_hr_ppo(callback=...)``."""

from __future__ import annotations

import json
import math

import jax
import numpy as np
import pytest
from conftest import HRV_TINY as TINY

from purehr.algorithms.ppo.algorithm import make_ppo
from purehr.algorithms.trainer import make_train
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.hrv import HRV_OBSERVATION_NOISE_STD, Curriculum, HRWritingEnv
from purehr.model.facade import train_hr_ppo
from purehr.reports.analysis import analyze_run
from purehr.run import restore
from purehr.run.compiled.task_setup import build_setups
from purehr.run.protocol import train_all_seeds
from purehr.run.store.record import manifest_curricula

# --- validation -------------------------------------------------------------------------------


def test_default_is_the_three_stages_of_the_spec():
    assert Curriculum().stages == ((0.2, 0.3, 0.1), (0.4, 0.6, 0.05), (0.4, 0.9, 0.02))
    assert Curriculum.parse("default") == Curriculum()
    assert Curriculum.parse("none") is None
    assert Curriculum.parse("0.5:0.3:0.1, 0.5:0.9:0.02").stages == ((0.5, 0.3, 0.1), (0.5, 0.9, 0.02))
    assert Curriculum.from_dict(Curriculum().to_dict()) == Curriculum()
    assert Curriculum.from_dict(None) is None


@pytest.mark.parametrize(
    "stages, message",
    [
        (((0.5, 0.3, 0.1), (0.4, 0.9, 0.02)), "sum to 0.9"),
        (((0.0, 0.3, 0.1), (1.0, 0.9, 0.02)), "fraction=0.0"),
        (((-0.2, 0.3, 0.1), (1.2, 0.9, 0.02)), "fraction=-0.2"),
        (((1.0, -0.3, 0.1),), "difficulty=-0.3"),
        (((1.0, 0.3, 0.0),), "precision=0.0"),
        (((1.0, 0.3, float("nan")),), "precision=nan"),
        (((1.0, 0.3),), "triple"),
        ((), "non-empty"),
    ],
)
def test_bad_curriculum_raises_naming_the_value(stages, message):
    with pytest.raises(ValueError, match=message):
        Curriculum(stages)


@pytest.mark.parametrize("text", ["0.5:0.3", "0.5:0.3:x,0.5:0.9:0.02", "easy"])
def test_bad_curriculum_text_is_refused(text):
    with pytest.raises(ValueError, match="curriculum"):
        Curriculum.parse(text)


def test_difficulty_outside_the_target_range_is_refused_for_the_env():
    with pytest.raises(ValueError, match="difficulty=1.5"):
        Curriculum(((1.0, 1.5, 0.05),)).final_params(HRWritingEnv(8).default_params)


# --- where the stages fall --------------------------------------------------------------------


def test_stage_starts_are_whole_updates():
    assert Curriculum().stage_starts(10) == (0, 2, 6)
    assert Curriculum().stage_starts(5) == (0, 1, 3)
    assert Curriculum().stage_starts(489) == (0, 98, 294)  # ceil(97.8), ceil(293.4)
    assert [Curriculum().stage_index(u, 10) for u in range(10)] == [0, 0, 1, 1, 1, 1, 2, 2, 2, 2]


@pytest.mark.parametrize("num_updates", [1, 3, 10, 489, 5000])
def test_env_params_at_follow_the_stages_on_the_device(num_updates):
    """The traced schedule (update index -> stage) agrees with the host's stage_index
    at every update, boundaries included."""
    curriculum = Curriculum()
    env = HRWritingEnv(8)
    ppo = make_ppo(
        TINY.replace(total_timesteps=num_updates * TINY.batch_size),
        env,
        env.default_params,
        curriculum.schedule(num_updates),
    )
    near_boundaries = {start + offset for start in curriculum.stage_starts(num_updates) for offset in (-1, 0, 1)}
    updates = np.array(sorted({min(max(u, 0), num_updates - 1) for u in near_boundaries | {0, 1, num_updates - 1}}))
    params = jax.jit(jax.vmap(lambda u: ppo.env_params_at(u, TINY.hyperparams())))(updates.astype(np.int32))
    for index, update in enumerate(updates):
        _, difficulty, precision = curriculum.stages[curriculum.stage_index(int(update), num_updates)]
        assert float(params.difficulty[index]) == pytest.approx(difficulty)
        assert float(params.target_precision[index]) == pytest.approx(precision)


# --- the targets the rollout draws, inside the training scan ----------------------------------


@pytest.fixture(scope="module")
def stopped_training():
    """One compiled make_train (10 updates, default curriculum, episodes of 2 steps so every
    environment resets inside each update's rollout) that a host callback stops after a
    chosen number of updates; the state reached is returned."""
    env = HRWritingEnv(8, max_episode_length=2)
    stop_after = {"updates": TINY.num_updates}
    train = make_train(
        TINY,
        env,
        env.default_params,
        env_params_schedule=Curriculum().schedule(TINY.num_updates),
        callback=lambda metrics: int(metrics["update"][0]) < stop_after["updates"],
    )

    def run(updates):
        stop_after["updates"] = updates
        return train(keys_for_seeds([0]))

    return run


@pytest.mark.parametrize("updates_done", [1, 2, 3, 6, 7, 10])
def test_targets_drawn_in_the_rollout_follow_the_stage_of_each_update(stopped_training, updates_done):
    """After k updates the environments' targets were drawn (at resets within the last two
    steps) under update k-1's stage: U(0.6 -+ difficulty / 3). With 128 draws the largest
    deviation from 0.6 lies in (0.75 w, w] (a wrong stage misses by >= 0.1)."""
    result = stopped_training(updates_done)
    assert int(result.runner.update_index[0]) == updates_done
    targets = np.asarray(result.runner.observation["target_hrv"])
    half_width = Curriculum().stages[Curriculum().stage_index(updates_done - 1, TINY.num_updates)][1] / 3
    deviation = np.max(np.abs(targets - 0.6))
    assert 0.75 * half_width < deviation <= half_width + 1e-6


# --- the manifest, resume and restore ---------------------------------------------------------


def test_manifest_without_curricula_means_none():
    assert manifest_curricula({"tasks": ["hrv"]}) == {}
    assert manifest_curricula({"curricula": {}}) == {}
    assert manifest_curricula({"curricula": {"hrv": Curriculum().to_dict()}}) == {"hrv": Curriculum()}


def test_build_setups_evaluates_on_the_final_stage_and_trains_on_the_schedule():
    config = TINY.replace(total_timesteps=TINY.batch_size)  # one update: only stage 0 trains
    (plain,) = build_setups(["hrv"], {"hrv": config})
    (staged,) = build_setups(["hrv"], {"hrv": config}, {"hrv": Curriculum()})
    assert float(plain.eval_env_params.difficulty) == 0.9 and float(plain.eval_env_params.target_precision) == 0.05
    assert float(staged.eval_env_params.difficulty) == pytest.approx(0.9)
    assert float(staged.eval_env_params.target_precision) == pytest.approx(0.02)
    assert float(staged.algorithm.env_params_at(0, config.hyperparams()).difficulty) == pytest.approx(0.3)


def test_a_curriculum_for_swing_or_an_absent_task_is_refused(tmp_path):
    with pytest.raises(ValueError, match="applies to the hrv task"):
        train_all_seeds(tmp_path / "a", tasks=["swing"], seeds=[0], curricula={"swing": Curriculum()})
    with pytest.raises(ValueError, match="not being trained"):
        train_all_seeds(tmp_path / "b", tasks=["swing"], seeds=[0], curricula={"hrv": Curriculum()})
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_resume_with_a_different_curriculum_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    from purehr.run.status import PROTOCOL_TEXT

    manifest = {
        "status": "running",
        "tasks": ["hrv"],
        "seeds": [0],
        "configs": {"hrv": TINY.to_dict()},
        "curricula": {"hrv": Curriculum().to_dict()},
        "protocol": PROTOCOL_TEXT,
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="started with curricula"):
        train_all_seeds(run_dir, tasks=["hrv"], seeds=[0], resume=True, curricula={"hrv": None})


@pytest.fixture(scope="module")
def curriculum_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("curriculum") / "run"
    config = TINY.replace(checkpoint_interval=TINY.batch_size * 5, eval_episodes=8)
    train_all_seeds(
        run_dir, tasks=["hrv"], seeds=[0], configs={"hrv": config}, progress=False, curricula={"hrv": Curriculum()}
    )
    return run_dir


def test_run_records_the_curriculum_and_restore_rebuilds_it(curriculum_run):
    manifest = json.loads((curriculum_run / "manifest.json").read_text())
    assert manifest["curricula"] == {"hrv": Curriculum().to_dict()}
    restored = restore(curriculum_run, "hrv", 0)
    assert float(restored.env_params.difficulty) == pytest.approx(0.9)
    assert float(restored.env_params.target_precision) == pytest.approx(0.02)


def test_run_reports_noisy_success_so_robustness_is_defined(curriculum_run):
    header = (curriculum_run / "hrv" / "seed_0" / "checkpoints.csv").read_text().splitlines()[0].split(",")
    assert "eval_noisy_success_rate" in header
    manifest = json.loads((curriculum_run / "manifest.json").read_text())
    assert "noisy_success_rate" in manifest["baselines"]["hrv"]["metrics"]
    assert HRV_OBSERVATION_NOISE_STD == 0.02
    seed = analyze_run(curriculum_run)["tasks"]["hrv"]["seeds"][0]
    # an untrained tiny policy may never succeed (robustness is then NaN by definition);
    # the column it is computed from must be finite either way
    assert math.isfinite(seed["heldout_success_rate"])
    if seed["heldout_success_rate"] > 0:
        assert math.isfinite(seed["robustness"])


# --- early stop through train_hr_ppo ----------------------------------------------------------


def test_early_stop_through_train_hr_ppo_keeps_the_state_reached():
    """Stopped after 2 of 10 updates, the model's metrics end at update 2 and its params are
    those of a run of exactly 2 updates (constant learning rate; the default curriculum keeps
    both updates in its first stage, matched by a one-stage curriculum of that stage)."""
    env = HRWritingEnv(8)
    options = dict(
        num_envs=16,
        num_steps=8,
        batch_size=64,
        num_epochs=1,
        actor_hidden=(16,),
        critic_hidden=(16,),
        anneal_lr=False,
        seed=3,
    )
    seen = []

    def stop_after_two(metrics):
        seen.append(metrics["update"])
        return metrics["update"] < 2

    stopped = train_hr_ppo(env, 16 * 8 * 10, callback=stop_after_two, curriculum=Curriculum(), **options)
    exact = train_hr_ppo(env, 16 * 8 * 2, curriculum=Curriculum(((1.0, 0.3, 0.1),)), **options)
    assert seen == [1, 2]
    assert stopped.metrics["update"].tolist() == [1, 2]
    assert np.isfinite(stopped.metrics["loss"]).all()
    initial = make_ppo(stopped.config, env, env.default_params).init(jax.random.PRNGKey(3)).params
    for a, b in zip(jax.tree.leaves(stopped.params), jax.tree.leaves(exact.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    assert any(
        not np.allclose(np.asarray(a), np.asarray(s))
        for a, s in zip(jax.tree.leaves(stopped.params), jax.tree.leaves(initial))
    )
    assert stopped.curriculum == Curriculum()
    assert float(stopped.env_params.difficulty) == pytest.approx(0.9)  # evaluates on the last stage
    assert float(exact.env_params.target_precision) == pytest.approx(0.1)
