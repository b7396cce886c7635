"""The memory comparison (studies.memory_comparison, studies/scripts/compare_memory.py): the
arms are the documented runs, the summary of synthetic checkpoints.csv rows equals hand-computed
means, t intervals (t quantiles from a printed table, not scipy), seeds at the bar and the sign
of the GRU-minus-MLP difference; unfinished or differently trained runs and bad flags are
refused; the tables are rebuilt from the record alone. Nothing trains."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from purehr.run.store.files import read_csv, write_csv
from purehr.tasks import get_task
from studies import memory_comparison as memory

ROOT = Path(__file__).resolve().parents[2]
T975 = {1: 12.706204736174707, 2: 4.302652729911275, 4: 2.7764451051977987}
"""Two-sided 95% Student-t quantiles t(0.975, df), as printed in any t table."""
STEPS = (0, 50_000, 100_000)


def load_script():
    name = "compare_memory_cli"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "studies" / "scripts" / "compare_memory.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# --- the arms are the documented runs -------------------------------------------------------


def test_the_arms_are_the_documented_runs():
    """The driver's settings: budgets swing 2M / hrv 300k, GRU width 64 (the full swing's
    minibatch 1024, swing-angles' clip range 0.1 and skip readout; hrv-flicker's width 128 and
    skip readout), everything else the task's defaults; the MLP arms change only the budget."""
    assert [(a.name, a.policy, a.tasks) for a in memory.ARMS] == [
        ("gru_partial", "gru", ("swing-angles", "hrv-hidden-audience")),
        ("mlp_partial", "mlp", ("swing-angles", "hrv-hidden-audience")),
        ("gru_full", "gru", ("swing", "hrv")),
        ("mlp_full", "mlp", ("swing", "hrv")),
        ("gru_flicker", "gru", ("hrv-flicker",)),
        ("mlp_flicker", "mlp", ("hrv-flicker",)),
    ]
    assert load_script().ARM_NAMES == tuple(memory.ARM_BY_NAME)
    budget = {"swing-angles": 2_000_000, "swing": 2_000_000, "hrv-hidden-audience": 300_000, "hrv": 300_000}
    budget["hrv-flicker"] = 300_000
    gru = {
        "swing-angles": dict(policy="gru", recurrent_width=64, clip_range=0.1, recurrent_skip=True),
        "swing": dict(policy="gru", recurrent_width=64, minibatch_size=1024),
        "hrv-hidden-audience": dict(policy="gru", recurrent_width=64),
        "hrv": dict(policy="gru", recurrent_width=64),
        "hrv-flicker": dict(policy="gru", recurrent_width=128, recurrent_skip=True),
    }
    for arm in memory.ARMS:
        for task, config in arm.configs().items():
            expected = get_task(task).default_config.replace(total_timesteps=budget[task])
            if arm.policy == "gru":
                expected = expected.replace(**gru[task])
            else:
                assert config.policy == "mlp"
            assert config == expected, (arm.name, task)
    assert memory.ARMS[0].configs()["hrv-hidden-audience"].minibatch_size == 512  # hrv's default, kept


def test_memory_chain_settings_are_the_tests():
    assert memory.MEMORY_CHAIN_SETTINGS == dict(
        total_timesteps=40_960,
        num_envs=16,
        num_steps=32,
        minibatch_size=128,
        recurrent_width=32,
        actor_hidden=(32,),
        critic_hidden=(32,),
        learning_rate=1e-3,
    )
    assert load_script().build_parser().parse_args(["--out", "x"]).chain_steps == memory.MEMORY_CHAIN_STEPS


# --- synthetic runs -------------------------------------------------------------------------

# per arm, task: each seed's success at the three checkpoints, final return and final speed
SYNTHETIC = {
    "gru_partial": {
        "swing-angles": [((0.0, 0.96, 1.0), 10.0, 20.0), ((0.0, 0.5, 0.9), 12.0, 22.0), ((0.0, 0.95, 0.8), 14.0, 24.0)],
        "hrv-hidden-audience": [
            ((0.0, 1.0, 1.0), 5.0, 30.0),
            ((0.0, 0.9, 1.0), 5.0, 40.0),
            ((0.0, 0.0, 1.0), 5.0, 50.0),
        ],
    },
    "mlp_partial": {
        "swing-angles": [((0.0, 0.0, 0.2), 4.0, 30.0), ((0.0, 0.1, 0.1), 6.0, 40.0), ((0.0, 0.0, 0.0), 8.0, math.nan)],
        "hrv-hidden-audience": [
            ((0.0, 0.0, 0.5), 1.0, 90.0),
            ((0.0, 0.0, 0.5), 2.0, 90.0),
            ((0.0, 0.0, 0.5), 3.0, 90.0),
        ],
    },
}


def synthetic_run(root: Path, arm: str, status: str = "finished", **config_changes) -> Path:
    """A run directory of ``SYNTHETIC[arm]``: a manifest with the arm's configs and each seed's
    checkpoints.csv (the task's speed column; earlier rows with return 0 and speed NaN)."""
    run_dir = root / arm
    configs = {t: c.replace(**config_changes).to_dict() for t, c in memory.ARM_BY_NAME[arm].configs().items()}
    seeds = list(range(len(next(iter(SYNTHETIC[arm].values())))))
    manifest = {"status": status, "tasks": list(SYNTHETIC[arm]), "seeds": seeds, "configs": configs}
    run_dir.mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    for task, per_seed in SYNTHETIC[arm].items():
        speed = "eval_time_to_rotation" if task.startswith("swing") else "eval_episode_length"
        for seed, (successes, final_return, final_speed) in enumerate(per_seed):
            rows = [
                {
                    "target_steps": steps,
                    "actual_steps": steps,
                    "eval_episodes": 100 if steps != 50_000 else 20,
                    "eval_return_mean": final_return if steps == STEPS[-1] else 0.0,
                    "eval_success_rate": success,
                    speed: final_speed if steps == STEPS[-1] else math.nan,
                }
                for steps, success in zip(STEPS, successes, strict=True)
            ]
            write_csv(run_dir / task / f"seed_{seed}" / "checkpoints.csv", list(rows[0]), rows)
    return run_dir


@pytest.fixture()
def partial_runs(tmp_path):
    return {arm: synthetic_run(tmp_path, arm) for arm in SYNTHETIC}


def half_width(sd: float, n: int) -> float:
    return T975[n - 1] * sd / math.sqrt(n)


def test_the_summary_is_the_hand_computed_one(partial_runs):
    members = memory.read_outcomes(partial_runs)
    assert math.isnan(members["gru_partial"]["swing-angles"][1]["steps_to_bar"])  # seed 1 never reached 0.95
    assert members["gru_partial"]["swing-angles"][2]["steps_to_bar"] == 50_000  # 0.95 itself is at the bar
    rows = memory.summarise(members)
    by = {(r["section"], r["task"], r["policy"]): r for r in rows}
    assert [(r["section"], r["task"], r["policy"]) for r in rows] == [
        ("protocol", "swing-angles", "gru"),
        ("protocol", "swing-angles", "mlp"),
        ("protocol", "hrv-hidden-audience", "gru"),
        ("protocol", "hrv-hidden-audience", "mlp"),
        ("difference", "swing-angles", "gru - mlp"),
        ("difference", "hrv-hidden-audience", "gru - mlp"),
    ]
    gru = by["protocol", "swing-angles", "gru"]
    # success 1.0, 0.9, 0.8: mean 0.9, sd 0.1; the upper bound is clipped to 1
    assert gru["success_rate"] == pytest.approx(0.9)
    assert gru["success_rate_ci_low"] == pytest.approx(0.9 - half_width(0.1, 3))
    assert gru["success_rate_ci_high"] == 1.0
    # return 10, 12, 14: mean 12, sd 2
    assert (gru["return_mean_ci_low"], gru["return_mean_ci_high"]) == pytest.approx(
        (12 - half_width(2, 3), 12 + half_width(2, 3))
    )
    assert gru["speed"] == pytest.approx(22.0) and gru["speed_metric"] == "time_to_rotation"
    # steps to the bar: seeds 0 and 2 at 50,000, seed 1 never
    assert (gru["steps_to_bar"], gru["steps_to_bar_n"], gru["steps_to_bar_ci_low"]) == (50_000, 2, 50_000)
    assert gru["seeds_at_bar"] == 1 and gru["n"] == 3 and gru["steps"] == 100_000
    mlp = by["protocol", "swing-angles", "mlp"]
    # success 0.2, 0.1, 0.0: the lower bound is clipped to 0; speed NaN where no episode rotated
    assert mlp["success_rate_ci_low"] == 0.0
    assert mlp["success_rate_ci_high"] == pytest.approx(0.1 + half_width(0.1, 3))
    assert (mlp["speed"], mlp["speed_n"]) == (35.0, 2)
    assert mlp["speed_ci_high"] == pytest.approx(35 + half_width(math.sqrt(50), 2))
    assert (mlp["steps_to_bar_n"], mlp["seeds_at_bar"]) == (0, 0)
    # GRU minus MLP on return: equal variances (4) and n, so Welch's df is 2(n - 1) = 4
    difference = by["difference", "swing-angles", "gru - mlp"]
    assert difference["return_mean"] == pytest.approx(6.0)
    half = T975[4] * math.sqrt(4 / 3 + 4 / 3)
    assert (difference["return_mean_ci_low"], difference["return_mean_ci_high"]) == pytest.approx((6 - half, 6 + half))
    assert difference["success_rate"] == pytest.approx(0.8) and difference["speed"] == pytest.approx(-13.0)
    assert difference["seeds_at_bar"] == 1
    hrv = by["difference", "hrv-hidden-audience", "gru - mlp"]
    # neither varies in success: a zero-width interval; the GRU's episodes are shorter (faster)
    assert (hrv["success_rate"], hrv["success_rate_ci_low"], hrv["success_rate_ci_high"]) == pytest.approx((0.5,) * 3)
    assert hrv["speed"] == pytest.approx(-50.0) and hrv["seeds_at_bar"] == 3
    assert by["protocol", "hrv-hidden-audience", "gru"]["steps_to_bar"] == pytest.approx(250_000 / 3)


def test_welch_difference_edges():
    assert memory.welch_difference([1.0, 3.0], [math.nan]) == {
        "mean": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
    }
    one = memory.welch_difference([2.0], [1.0, 3.0])
    assert one["mean"] == 0.0 and math.isnan(one["ci_low"])
    # one side constant: df = n - 1 of the other side
    half = T975[2] * math.sqrt(1.0 / 3)
    assert memory.welch_difference([1.0, 2.0, 3.0, math.nan], [0.0, 0.0, 0.0]) == pytest.approx(
        {"mean": 2.0, "ci_low": 2.0 - half, "ci_high": 2.0 + half}
    )


def test_unfinished_or_differently_trained_runs_are_refused(tmp_path):
    running = synthetic_run(tmp_path / "a", "gru_partial", status="running")
    with pytest.raises(ValueError, match="says 'running', expected 'finished'"):
        memory.read_outcomes({"gru_partial": running})
    other = synthetic_run(tmp_path / "b", "gru_partial", recurrent_width=32)
    with pytest.raises(ValueError, match=r"trained with \{'recurrent_width': 32\}"):
        memory.read_outcomes({"gru_partial": other})
    with pytest.raises(ValueError, match="arm 'gru_half': expected one of"):
        memory.read_outcomes({"gru_half": other})
    mismatched = synthetic_run(tmp_path / "c", "mlp_partial")
    with pytest.raises(ValueError, match="trained with .*'policy': 'mlp'"):
        memory.read_outcomes({"gru_partial": mismatched})  # the MLP's run is not the GRU arm's


# --- the script -----------------------------------------------------------------------------

CHAIN = {
    "task": memory.MEMORY_CHAIN,
    "settings": dict(memory.MEMORY_CHAIN_SETTINGS),
    "returns": {"gru": [1.0, 1.0, 1.0], "mlp": [0.1, -0.1, 0.1]},
}


def test_tables_are_rebuilt_from_the_record_alone(partial_runs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    members = memory.read_outcomes(partial_runs)
    (out / "comparison.json").write_text(json.dumps({"members": members, "memory_chain": CHAIN}, default=float))
    assert load_script().main(["--out", str(out), "--tables-only"]) == 0
    rows = read_csv(out / "comparison.csv")
    assert [(r["section"], r["policy"]) for r in rows[-3:]] == [
        ("memory_chain", "gru"),
        ("memory_chain", "mlp"),
        ("memory_chain", "gru - mlp"),
    ]
    assert float(rows[-1]["return_mean"]) == pytest.approx(1.0 - 0.1 / 3)
    assert float(rows[0]["return_mean"]) == pytest.approx(12.0)
    table = (out / "comparison.md").read_text()
    assert "| swing-angles | partial | gru | 3 | 100,000 | 0.90 [0.65, 1.00] |" in table
    assert "| gru - mlp | 3 | +0.97 [" in table


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tables-only"], "comparison.json not found"),
        (["--tables-only", "--skip-train"], "not both"),
        (["--chain-seeds", "1"], "--chain-seeds 1 (expected >= 2)"),
        (["--chain-steps", "0"], "--chain-steps 0 (> 0)"),
        (["--skip-train", "--runs", "{tmp}/nowhere"], "no run of gru_partial, mlp_partial, gru_full, mlp_full"),
        (["--skip-train", "--runs", "{tmp}/nowhere", "--arms", "mlp_full"], "no run of mlp_full under"),
        (["--arms", "gru_half"], "invalid choice: 'gru_half'"),
    ],
)
def test_bad_flags_are_refused(tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as exit_:
        load_script().main(["--out", str(tmp_path / "new"), *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_non_empty_out_is_refused_unless_rebuilding_tables(tmp_path, capsys):
    (tmp_path / "note.txt").write_text("a previous result")
    with pytest.raises(SystemExit) as exit_:
        load_script().main(["--out", str(tmp_path), "--skip-train"])
    assert exit_.value.code == 2 and "is not an empty directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["note.txt"]


def test_an_unfinished_run_stops_the_script_before_the_memory_chain_trains(tmp_path, capsys):
    synthetic_run(tmp_path / "runs", "gru_partial", status="interrupted")
    argv = ["--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs"), "--arms", "gru_partial", "--skip-train"]
    with pytest.raises(SystemExit) as exit_:
        load_script().main(argv)
    printed = capsys.readouterr()
    assert exit_.value.code == 2 and "says 'interrupted', expected 'finished'" in printed.err
    assert "MemoryChain" not in printed.out and not (tmp_path / "out").exists()
