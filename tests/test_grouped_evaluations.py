"""Grouped quick evaluations (``ProtocolSettings.group_quick_evaluations``, issue 49): the quick
checkpoints between two full ones are held on the host and evaluated together, vmapped over the
group, at the full one. The rows and states are those of a run that evaluates each checkpoint
at its own update (the quick evaluations to float32 rounding); a Ctrl-C in the middle of a group loses the held ones and
the resume ends bit-identical; the plan refuses grouping with PBT or W&B; the sequential
evaluation steps a run counts are one quick evaluation's per group."""

from __future__ import annotations

import contextlib
import io
import json

import jax
import numpy as np
import pytest
from conftest import PROTOCOL_SMALL, at_level_1, ctrl_c_from_a_callback

from benchmarks._evaluation_steps import evaluation_steps, groups_of_quick
from purehr.population import PBTSettings
from purehr.protocol_settings import ProtocolSettings
from purehr.run.compiled.task_setup import build_task_setup
from purehr.run.compiled.train_all import checkpoint_schedule, quick_group_size, stack_held
from purehr.run.host.recorder import RunRecorder
from purehr.run.outcome import RunInterrupted
from purehr.run.planning.run_plan import RunRequest, check_grouping, new_run_plan
from purehr.run.protocol import train_all_seeds
from purehr.run.store.files import read_csv
from purehr.tasks import SWING_DEFAULTS, get_task

SEEDS = [0, 1]
# 32 updates of 4 x 128 = 512 steps; targets every 1,500 steps: updates 3, 6, ..., 30 (k = 1..10)
# and 32; full at 0, 12 (k = 4), 24 (k = 8) and 32: groups of quick checkpoints 3 6 9 | 15 18 21 | 27 30
SMALL = dict(PROTOCOL_SMALL, checkpoint_interval=1500, full_eval_interval=4, quick_eval_episodes=3)
STOP_AFTER = 16  # Ctrl-C heard at this update: quick checkpoint 15 held, full 12 the last written


def _train(run_dir, grouped: bool, **kwargs):
    overrides = dict(SMALL, group_quick_evaluations=grouped)
    with contextlib.redirect_stderr(io.StringIO()) as err:
        summary = train_all_seeds(run_dir, tasks=["swing"], seeds=SEEDS, overrides=overrides, progress=False, **kwargs)
    return summary, err.getvalue()


def _rows(run_dir, seed: int) -> list[dict]:
    """A seed's checkpoints.csv rows without the wall times."""
    return [
        {k: v for k, v in row.items() if k != "elapsed_s"}
        for row in read_csv(run_dir / "swing" / f"seed_{seed}" / "checkpoints.csv")
    ]


def _exact(row: dict) -> dict:
    return {name: value for name, value in row.items() if not name.startswith("eval_")}


@pytest.fixture(autouse=True, scope="module")
def _trains_at_level_1():
    """The grouped and the ungrouped programs compared bit for bit, compiled at level 1 (conftest.at_level_1)."""
    with at_level_1():
        yield


def _floats(row: dict, names: list[str]) -> np.ndarray:
    return np.array([float(row[name]) for name in names])


@pytest.fixture(scope="module")
def ungrouped(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("ungrouped") / "run", grouped=False)[0]


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """The grouped run, Ctrl-C from inside its update callback at update ``STOP_AFTER``."""
    run_dir = tmp_path_factory.mktemp("grouped") / "run"
    logged = RunRecorder.on_update

    def interrupting(self, task, metrics):
        if int(np.asarray(metrics["update"])[0]) == STOP_AFTER:
            ctrl_c_from_a_callback(self)
        return logged(self, task, metrics)

    with pytest.MonkeyPatch.context() as patch, pytest.raises(RunInterrupted) as raised:
        patch.setattr(RunRecorder, "on_update", interrupting)
        _train(run_dir, grouped=True)
    return run_dir, str(raised.value), {seed: _rows(run_dir, seed) for seed in SEEDS}


def test_the_schedule_groups_the_quick_checkpoints_between_full_ones():
    config = SWING_DEFAULTS.replace(**{k: v for k, v in SMALL.items() if k in SWING_DEFAULTS.to_dict()})
    protocol = ProtocolSettings(checkpoint_interval=1500, full_eval_interval=4, group_quick_evaluations=True)
    updates, full = checkpoint_schedule(config, protocol)
    assert updates.tolist() == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 32]
    assert updates[full].tolist() == [0, 12, 24, 32]
    assert quick_group_size(config, protocol) == 3 and groups_of_quick(full) == 3
    assert groups_of_quick(np.array([True, True, False, True, False])) == 1  # a trailing group never closes
    assert quick_group_size(config, protocol.replace(full_eval_interval=1)) == 1


def test_a_grouped_run_counts_one_quick_evaluation_per_group(tmp_path):
    config = SWING_DEFAULTS.replace(total_timesteps=16384, num_envs=4, num_steps=128, minibatch_size=128)
    protocol = ProtocolSettings(checkpoint_interval=1500, full_eval_interval=4, quick_eval_episodes=3)
    counts = {
        g: evaluation_steps(build_task_setup("swing", config, protocol=protocol.replace(group_quick_evaluations=g)))
        for g in (False, True)
    }
    for grouped, count in counts.items():
        per_full = count["full_evaluation"] + count["showcase"]
        quick_runs = 3 if grouped else 8  # three groups, or each of the eight quick checkpoints
        assert count["run_total"] == 4 * per_full + quick_runs * count["quick_evaluation"], grouped
    assert counts[True]["quick_evaluation"] == counts[False]["quick_evaluation"] == 1600 * 8  # horizon x RK4


def test_the_held_parameters_are_stacked_and_padded_with_zeros():
    like = {"w": jax.ShapeDtypeStruct((3, 2, 4), np.float32)}
    held = [{"w": np.full((2, 4), value, np.float32)} for value in (1.0, 2.0)]
    stacked, count = stack_held(held, like)
    assert count == 2 and stacked["w"].shape == (3, 2, 4) and stacked["w"].dtype == np.float32
    assert stacked["w"][:, 0, 0].tolist() == [1.0, 2.0, 0.0]
    empty, none = stack_held([], like)
    assert none == 0 and not empty["w"].any()
    with pytest.raises(RuntimeError, match="4 quick checkpoints held, more than a group's 3"):
        stack_held(held * 2, like)


def test_ctrl_c_in_a_group_loses_its_held_checkpoints_and_says_so(interrupted):
    run_dir, message, rows = interrupted
    for seed in SEEDS:
        assert [int(row["update"]) for row in rows[seed]] == [0, 3, 6, 9, 12], seed  # 15 was held, never written
    assert "swing's 1 quick checkpoint(s) since its last full one were not saved" in message
    assert "swing from its checkpoint at 6,144 steps" in message  # update 12
    assert not (run_dir / "swing" / "seed_0" / "checkpoints" / str(15 * 512)).exists()


def test_the_grouped_run_resumed_is_the_ungrouped_run_row_for_row(interrupted, ungrouped):
    run_dir, _, _ = interrupted
    resumed, _ = _train(run_dir, grouped=True, resume=True)
    for seed in SEEDS:
        ours, theirs = _rows(run_dir, seed), _rows(ungrouped.run_dir, seed)
        assert [int(r["update"]) for r in ours] == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 32]
        # the same steps, paths and states and the same success; the quick evaluations' other
        # statistics to 1%: their matrix products, batched over the group, round in another
        # order, which the swing's 1,600 steps can amplify (results/protocol against a grouped
        # main job: time to rotation within 1 ms, return spread within 0.6%; docs/protocol.md)
        assert [_exact(row) for row in ours] == [_exact(row) for row in theirs], seed
        for a, b in zip(ours, theirs):
            assert (a["eval_success_rate"], a["eval_episodes"]) == (b["eval_success_rate"], b["eval_episodes"])
            held_out = [name for name in a if name.startswith("eval_")]
            assert np.allclose(_floats(a, held_out), _floats(b, held_out), rtol=1e-2, atol=1e-6, equal_nan=True), seed
        assert all(np.isfinite(float(row["eval_return_mean"])) for row in ours)
    for a, b in zip(jax.tree.leaves(resumed.final_runners["swing"]), jax.tree.leaves(ungrouped.final_runners["swing"])):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["protocol_settings"]["swing"]["group_quick_evaluations"] is True


def test_the_swing_groups_by_default_except_under_pbt_or_wandb_where_asking_for_it_is_refused(tmp_path, capsys):
    assert get_task("swing").default_protocol.group_quick_evaluations  # and hrv has no quick checkpoints
    assert new_run_plan(tmp_path / "a", RunRequest.checked(["swing"], [0])).protocols["swing"].group_quick_evaluations
    pbt = RunRequest.checked(["swing", "hrv"], [0, 1, 2, 3], pbt=PBTSettings())
    assert not new_run_plan(tmp_path / "b", pbt).protocols["swing"].group_quick_evaluations
    assert "swing: each quick checkpoint evaluated at its own update, not grouped, for --pbt" in capsys.readouterr().err
    wandb = RunRequest.checked(["swing"], [0], log=["wandb"])
    assert not new_run_plan(tmp_path / "c", wandb).protocols["swing"].group_quick_evaluations
    asked = {"group_quick_evaluations": True}
    with pytest.raises(ValueError, match=r"group_quick_evaluations=True \(swing.*--pbt.*expected --group-quick"):
        new_run_plan(
            tmp_path / "d",
            RunRequest.checked(["swing"], [0, 1, 2, 3], task_overrides={"swing": asked}, pbt=PBTSettings()),
        )
    with pytest.raises(
        ValueError, match=r"group_quick_evaluations=True \(swing.*--log wandb, which takes no step back"
    ):
        new_run_plan(tmp_path / "e", RunRequest.checked(["swing"], [0], overrides=asked, log=["wandb"]))
    # a resumed run keeps what it recorded: W&B cannot join a run that groups
    tracking = new_run_plan(tmp_path / "f", wandb).tracking
    with pytest.raises(ValueError, match=r"--resume: the run groups its quick evaluations \(swing"):
        check_grouping({"swing": ProtocolSettings(group_quick_evaluations=True)}, None, tracking)
    with pytest.raises(ValueError, match="group_quick_evaluations=1: expected true or false"):
        ProtocolSettings(group_quick_evaluations=1)


def test_the_grouped_evaluation_benchmark_compares_slot_by_slot():
    """benchmarks/grouped_evaluation.py's comparison on hand-made statistics: a slot counts as
    bit-identical only when every seed's value is; elsewhere the largest relative difference."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "grouped_evaluation.py"
    sys.path.insert(0, str(path.parent))  # as `python grouped_evaluation.py` runs it: _common importable
    try:
        spec = importlib.util.spec_from_file_location("grouped_evaluation", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    singles = [{"r": np.array([1.0, 2.0], np.float32)}, {"r": np.array([4.0, np.nan], np.float32)}]
    grouped = {"r": np.array([[1.0, 2.0], [4.0 * (1 + 1e-6), np.nan]], np.float32)}
    result = module.compare(grouped, singles)["r"]
    assert result["slots_bit_identical"] == 1 and result["slots"] == 2
    assert result["max_relative_difference"] == pytest.approx(1e-6, rel=0.2)
