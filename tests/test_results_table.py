"""The headline table and goal verdicts of a run, from hand-written files (no training), and
the environments a manifest rebuilds (recorded, or the first designs for older runs)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from conftest import write_synthetic_run

from purehr.reports.results_table import final_checkpoint_metrics, goals_met, results_table
from purehr.run.status import PROTOCOL_TEXT
from purehr.run.store.record import recorded_env
from purehr.tasks import get_task

SWING_SUCCESS = [0.98, 0.98, 1.0, 1.0, 0.14]
SWING_TIMES = [15.2, 16.0, 15.9, 15.1, 27.7]
HRV_LENGTHS = [4.4, 4.4, 4.2, 4.5, 4.2]


def _write_run(root, swing_success=SWING_SUCCESS, swing_times=SWING_TIMES, hrv_lengths=HRV_LENGTHS):
    seeds = list(range(len(swing_success)))
    manifest = {
        "tasks": ["swing", "hrv"],
        "seeds": seeds,
        "baselines": {
            "swing": {
                "name": "structured controller",
                "metrics": {"success_rate": 1.0, "time_to_rotation": 13.95, "return_mean": 12.59},
                "floors": {"zero action": {"success_rate": 0.0, "time_to_rotation": math.nan, "return_mean": -1.66}},
            },
            "hrv": {
                "name": "oracle",
                "metrics": {"success_rate": 1.0, "episode_length": 6.2, "return_mean": 0.48},
                "floors": {},
            },
        },
        # what every reader checks a purehr manifest by (run_dir.run_manifest_problem)
        "configs": {"swing": {}, "hrv": {}},
        "protocol": PROTOCOL_TEXT,
        "status": "finished",
    }
    checkpoints = {}
    for task, rows in (
        (
            "swing",
            [
                {"eval_success_rate": s, "eval_time_to_rotation": t, "eval_return_mean": 12.0}
                for s, t in zip(swing_success, swing_times)
            ],
        ),
        ("hrv", [{"eval_success_rate": 1.0, "eval_episode_length": n, "eval_return_mean": 0.7} for n in hrv_lengths]),
    ):
        for seed, last in zip(seeds, rows):
            earlier = {name: 0.0 for name in last}
            checkpoints[task, seed] = [
                {"actual_steps": 0, **earlier},  # only the last row counts
                {"actual_steps": 4096, **last},
            ]
    return write_synthetic_run(root, manifest, {}, checkpoints)


def test_the_last_checkpoint_of_every_seed_is_reported(tmp_path):
    run = _write_run(tmp_path)
    metrics = final_checkpoint_metrics(run, "swing", [0, 1, 2, 3, 4])
    assert metrics["success_rate"].tolist() == SWING_SUCCESS and metrics["steps"].tolist() == [4096] * 5
    table = results_table(run)
    # success mean 0.82; sample std 0.38026, t(0.975, 4) = 2.7764 -> half width 0.4722, clipped to 1
    assert "| swing | PPO, 5 seeds, 4,096 steps | 0.82 [0.35, 1.00] |" in table
    assert "| swing | zero action | 0.00 | time to rotation (s): - | -1.66 | |" in table
    assert "| hrv | oracle | 1.00 | episode length (steps): 6.2 | 0.48 | |" in table


def test_a_variant_is_tabled_with_its_familys_speed(tmp_path):
    """swing-angles' evaluation is the swing's (time to rotation, no episode length): its rows
    show that speed (the table once asked for an episode length and raised KeyError at the end
    of a swing-angles run); hrv-flicker's the episode length."""
    manifest = {
        "tasks": ["swing-angles", "hrv-flicker"],
        "seeds": [0, 1],
        "baselines": {
            "swing-angles": {"floors": {"zero action": {"success_rate": 0.0, "time_to_rotation": math.nan}}},
            "hrv-flicker": {"floors": {}},
        },
        "configs": {"swing-angles": {}, "hrv-flicker": {}},
        "protocol": PROTOCOL_TEXT,
        "status": "finished",
    }
    swing = [{"eval_success_rate": 1.0, "eval_time_to_rotation": t, "eval_return_mean": 12.0} for t in (15.0, 17.0)]
    hrv = [{"eval_success_rate": 0.5, "eval_episode_length": n, "eval_return_mean": 0.3} for n in (40.0, 60.0)]
    checkpoints = {("swing-angles", seed): [{"actual_steps": 8192, **row}] for seed, row in enumerate(swing)}
    checkpoints |= {("hrv-flicker", seed): [{"actual_steps": 2048, **row}] for seed, row in enumerate(hrv)}
    table = results_table(write_synthetic_run(tmp_path, manifest, {}, checkpoints))
    # mean 16.0, sample std 1.4142, t(0.975, 1) = 12.706: half width 12.71
    assert "time to rotation (s): 16.00 [3.29, 28.71]* | 12.00 [12.00, 12.00]* | 1.00 (15.00), 1.00 (17.00) |" in table
    assert "| swing-angles | zero action | 0.00 | time to rotation (s): - |" in table
    assert "episode length (steps): 50.0 [0.0, 177.1]* | 0.30 [0.30, 0.30]* | 0.50 (40.0), 0.50 (60.0) |" in table


def test_goal_verdicts_follow_the_protocol_rules(tmp_path):
    verdicts = goals_met(_write_run(tmp_path / "a"))
    # swing: 4 of 5 seeds >= 0.95 but the median time 15.9 s > 13.95 s; hrv: 4.34 <= 1.2 x 6.2
    assert verdicts["swing"]["seeds_at_0.95"] == 4 and verdicts["swing"]["median_time_to_rotation"] == 15.9
    assert not verdicts["swing"]["met"]
    assert verdicts["hrv"]["met"] and verdicts["hrv"]["mean_episode_length"] == pytest.approx(4.34)
    fast = goals_met(
        _write_run(tmp_path / "b", swing_times=[13.0, 13.5, 13.9, 14.5, 27.7], hrv_lengths=[7.0, 7.5, 7.9, 7.8, 7.6])
    )
    assert fast["swing"]["met"]  # median 13.9 <= 13.95
    assert not fast["hrv"]["met"]  # mean 7.56 > 7.44


def test_manifests_rebuild_their_environments():
    hrv_task, swing_task = get_task("hrv"), get_task("swing")
    recorded = recorded_env(
        {
            "environments": {
                "hrv": {"hrv_dim": 8, "similarity": "cosine", "reward_form": "progress", "gap_features": True}
            }
        },
        hrv_task,
    )
    assert (recorded.similarity, recorded.reward_form, recorded.gap_features) == ("cosine", "progress", True)
    legacy = recorded_env({}, hrv_task)  # a run recorded with the first design
    assert (legacy.reward_form, legacy.gap_features) == ("potential", False)
    assert recorded_env({}, swing_task).default_params.reset_noise == 0.01
    assert recorded_env({"environments": {"swing": {}}}, swing_task).default_params.reset_noise == 1.0
    assert hrv_task.env_kwargs(hrv_task.make_env()) == {
        "hrv_dim": 8,
        "similarity": "hrv_similarity",
        "reward_form": "distance",
        "gap_features": True,
    }


def test_final_summary_has_wall_time_results_figures_and_next_commands_for_this_run(tmp_path):
    from purehr.reports.summary import final_summary, interpreter

    run = _write_run(tmp_path / "runs" / "quick")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(status="finished", wall_time_s=190.0, compile_s=117.4, render_s=40.2, wall_time_with_render_s=230.4)
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "figures").mkdir()
    for name in ("swing_learning.png", "hrv_learning.png", "replay_poster.png", "replay.html"):
        (run / "figures" / name).write_text("x")
    text = final_summary(run, scripts_dir=tmp_path / "scripts", cwd=tmp_path)
    lines = text.splitlines()
    assert lines[0] == (
        "finished " + str(run) + " in 3 min 50 s wall time, including rendering "
        "(of which compilation 1 min 57 s, rendering 40 s)"
    )
    assert "| swing | PPO, 5 seeds, 4,096 steps | 0.82 [0.35, 1.00] |" in text  # results_table's rows
    assert "| hrv | oracle | 1.00 | episode length (steps): 6.2 | 0.48 | |" in text
    assert "swing goal NOT met: seeds_at_0.95=4" in text
    figures = lines[lines.index("figures:") + 1 : lines.index("next:") - 1]
    assert figures == [
        "  runs/quick/figures/hrv_learning.png",
        "  runs/quick/figures/swing_learning.png",
        "  runs/quick/figures/replay.html   (the replay: open it in a browser)",
    ]
    python = interpreter(tmp_path)  # the interpreter that ran, never a bare `python`
    assert python != "python" and Path(python).samefile(sys.executable)
    assert f"  {python} scripts/analyze_run.py --run-dir runs/quick" in lines
    assert f"  {python} scripts/evaluate.py --checkpoint runs/quick --task swing --seed 0 --step latest" in lines
    assert "  from purehr.run import restore; r = restore('runs/quick', task='swing', seed=0, step='latest')" in lines
    # not rendered: the summary says how to draw the figures, and that its time is training only
    manifest.pop("render_s"), manifest.pop("wall_time_with_render_s")
    (run / "manifest.json").write_text(json.dumps(manifest))
    for path in (run / "figures").iterdir():
        path.unlink()
    bare = final_summary(run, scripts_dir=tmp_path / "scripts", cwd=tmp_path)
    assert bare.splitlines()[0].endswith("in 3 min 10 s wall time, training only (of which compilation 1 min 57 s)")
    assert f"figures: not drawn yet; {python} scripts/render.py --run-dir runs/quick draws them" in bare
    # a run started as `purehr train` (perhaps installed without a checkout): the command's names, no script path
    console = final_summary(run, scripts_dir=tmp_path / "scripts", cwd=tmp_path, console=True).splitlines()
    assert "  purehr analyze --run-dir runs/quick" in console
    assert "  purehr evaluate --checkpoint runs/quick --task swing --seed 0 --step latest" in console
    assert "figures: not drawn yet; purehr render --run-dir runs/quick draws them" in console
    assert not any("scripts/" in line for line in console)


def test_every_divergence_the_manifest_records_is_under_the_table(tmp_path):
    """A diverged run's table says which seeds diverged and when, also where PBT replaced the
    member afterwards (its last checkpoint then holds healthy weights: the table alone would not
    tell); a run without divergence says nothing of it."""
    run = _write_run(tmp_path)
    assert "diverged" not in results_table(run)
    manifest = json.loads((run / "manifest.json").read_text())

    def event(update, at=None, by=None):
        steps = None if at is None else 512 * at
        return dict(
            update=update, env_steps=512 * update, replaced_at_update=at, replaced_at_steps=steps, replaced_by_seed=by
        )

    manifest.update(
        status="diverged",
        diverged={
            "swing": {"1": {"update": 31, "env_steps": 15872}},
            "hrv": {
                "0": {"update": 11, "env_steps": 5632, "divergences": [event(11, 15, 1), event(21, 25, 3)]},
                "2": {"update": 28, "env_steps": 14336, "divergences": [event(28)]},
            },
        },
    )
    (run / "manifest.json").write_text(json.dumps(manifest))
    table = results_table(run)
    assert (
        "diverged (a loss or parameter became NaN or infinite; not a finished result): swing seed 1 at update 31 "
        "(15,872 env steps); hrv seed 0 at update 11 (5,632 env steps; PBT gave it seed 1's weights at update 15) "
        "and at update 21 (10,752 env steps; PBT gave it seed 3's weights at update 25); hrv seed 2 at update 28 "
        "(14,336 env steps; frozen to the end)"
    ) in table


def test_a_pbt_run_is_tabled_as_one_population_without_an_interval_over_members(tmp_path):
    """PBT members copy each other's weights: they are not independent seeds, so the table names
    the population and gives the members' mean and range, never a t interval over them."""
    run = _write_run(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["pbt"] = {"interval": 1}
    (run / "manifest.json").write_text(json.dumps(manifest))
    table = results_table(run)
    assert "| swing | PBT population of 5 members, 4,096 steps | 0.82 (members 0.14 to 1.00) |" in table
    assert "PPO, 5 seeds" not in table and "[" not in table.split("\n\n")[0]  # no t interval anywhere
    assert "not independent" in table


def test_an_entry_is_judged_by_its_tasks_goal_and_named_by_its_algorithm(tmp_path):
    """``swing@sac`` and ``hrv@pqn`` (issue 50): the table names the algorithm that trained each
    entry and the verdicts apply the swing's and hrv's goals (the reports once keyed goals by the
    entry's name: "swing@sac (no protocol goal)", "PPO held-out return")."""
    run = _write_run(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    for old, new in (("swing", "swing@sac"), ("hrv", "hrv@pqn")):
        (run / old).rename(run / new)
        for key in ("baselines", "configs"):
            manifest[key][new] = manifest[key].pop(old)
    manifest["tasks"] = ["swing@sac", "hrv@pqn"]
    manifest["algorithms"] = {"swing@sac": "sac", "hrv@pqn": "pqn"}
    (run / "manifest.json").write_text(json.dumps(manifest))
    table = results_table(run)
    assert "| swing@sac | SAC, 5 seeds, 4,096 steps | 0.82 [0.35, 1.00] |" in table
    assert "| hrv@pqn | PQN, 5 seeds, 4,096 steps |" in table
    verdicts = goals_met(run)
    assert set(verdicts) == {"swing@sac", "hrv@pqn"}
    assert verdicts["swing@sac"]["median_time_to_rotation"] == 15.9 and not verdicts["swing@sac"]["met"]
    assert verdicts["hrv@pqn"]["met"] and verdicts["hrv@pqn"]["mean_episode_length"] == pytest.approx(4.34)


def test_one_seed_is_said_in_the_singular_and_the_floors_note_names_the_algorithm(tmp_path):
    """Issue 63 F13 and W2: "PPO, 1 seeds"; a PQN entry without a reference policy was noted
    as "PPO against the floors only"."""
    run = _write_run(tmp_path, swing_success=[0.98], swing_times=[15.2], hrv_lengths=[4.4])
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "hrv").rename(run / "hrv@pqn")
    manifest["baselines"]["hrv@pqn"] = dict(manifest["baselines"].pop("hrv"), metrics=None)
    manifest["configs"]["hrv@pqn"] = manifest["configs"].pop("hrv")
    manifest["tasks"], manifest["algorithms"] = ["swing", "hrv@pqn"], {"hrv@pqn": "pqn"}
    (run / "manifest.json").write_text(json.dumps(manifest))
    table = results_table(run)
    assert "| swing | PPO, 1 seed, 4,096 steps |" in table and "| hrv@pqn | PQN, 1 seed, 4,096 steps |" in table
    assert "no reference policy for hrv@pqn: PQN against the floors only" in table


def test_a_choice_of_reported_checkpoints_not_made_is_said_and_refused(tmp_path, capsys):
    """Issue 63 W11: a run that chooses its reported checkpoints on validation episodes, killed
    during the choice (no reported.csv): the table said nothing while showing the last
    checkpoints under "reported", and restore(step='reported') and evaluate.py --step reported
    silently gave the latest. Now the table says so, and both refuse, naming the missing file
    and the ways out."""
    from test_record_restore import load

    from purehr.run.restoring import restore

    run = _write_run(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["protocol_settings"] = {"hrv": {"report_candidates": 3}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    missing = run / "hrv" / "seed_0" / "reported.csv"
    note = next(line for line in results_table(run).splitlines() if line.startswith("hrv: "))
    assert f"{missing} is missing" in note and "scripts/report_checkpoint.py" in note and "last checkpoint" in note
    assert "swing: " not in results_table(run)  # the swing here reports its last checkpoints: nothing to say
    with pytest.raises(FileNotFoundError, match=f"restore\\(step='reported'\\): {missing} is missing") as error:
        restore(run, "hrv", 0, "reported")
    assert "--candidates 3" in str(error.value) and "'latest'" in str(error.value)
    argv = ["--run-dir", str(run), "--task", "hrv", "--seed", "0", "--step", "reported"]
    assert load("evaluate").main(argv) == 2
    assert f"{missing} is missing" in capsys.readouterr().err
