"""Issue 64 item 3: one resolver of a run's settings (``purehr.run.planning.settings``). Every
value comes out of ``resolve_entry`` in one documented order, with its source; the plan prints
the values that are not the defaults by source, the manifest records the sources and a resume
reads them back. Nothing here compiles."""

from __future__ import annotations

import json

import pytest

from purehr.algorithms.ppo.config import PPOConfig
from purehr.algorithms.sac.config import SACConfig
from purehr.cli.profile_flags import profile_layer
from purehr.protocol_settings import ProtocolSettings
from purehr.run.planning.messages import start_banner
from purehr.run.planning.resume import plan_resume
from purehr.run.planning.run_plan import RunPlan, RunRequest, new_run_plan
from purehr.run.planning.settings import SettingsLayer, base_sources, resolve_entry
from purehr.run.status import PROTOCOL_TEXT
from purehr.run.store.run_dir import RunDirectory
from purehr.tasks import HRV_DEFAULTS, get_task


def test_each_source_wins_over_the_ones_below_it_field_by_field():
    """default < task < profile < config file < its [task.NAME] section < command line."""
    layers = [
        profile_layer("accelerator", ["hrv"], None),  # num_envs=256 num_steps=8 minibatch_size=512
        SettingsLayer("config file run.toml", {"num_envs": 128, "gamma": 0.9}, {"hrv": {"gamma": 0.7}}),
        SettingsLayer("command line", {"num_envs": 64, "eval_episodes": 12}),
    ]
    config, protocol = get_task("hrv").settings_for(None)
    resolved = resolve_entry("hrv", config, protocol, base_sources("task", config, protocol), layers)
    assert (resolved.config.num_envs, resolved.config.num_steps, resolved.config.gamma) == (64, 8, 0.7)
    assert resolved.protocol.eval_episodes == 12
    assert resolved.sources["num_envs"] == "command line" and resolved.sources["eval_episodes"] == "command line"
    assert (
        resolved.sources["gamma"] == "config file run.toml" and resolved.sources["num_steps"] == "profile accelerator"
    )
    # a task default that differs from PPOConfig()'s is the task's; one equal to it has no source
    assert HRV_DEFAULTS.learning_rate != PPOConfig().learning_rate and resolved.sources["learning_rate"] == "task"
    assert HRV_DEFAULTS.clip_range == PPOConfig().clip_range and "clip_range" not in resolved.sources


def test_the_plan_prints_every_value_that_is_not_the_default_with_its_source(tmp_path):
    request = RunRequest.checked(["hrv"], [0], settings=[SettingsLayer("command line", {"learning_rate": 1e-3})])
    plan = new_run_plan(tmp_path / "run", request)
    banner = start_banner(tmp_path, plan.tasks, plan.seeds, plan.configs, plan.protocols, sources=plan.sources)
    line = next(line for line in banner.splitlines() if line.startswith("    hrv: "))
    assert "command line: learning_rate=0.001" in line
    assert f"gamma={HRV_DEFAULTS.gamma}" in line.partition("task: ")[2]  # the task's own, not PPOConfig()'s 0.995
    assert "clip_range" not in line  # the default
    # the plan travels (jax.distributed) and is recorded with its sources
    assert RunPlan.from_json(json.loads(json.dumps(plan.to_json()))).sources == plan.sources


def test_python_overrides_are_the_source_given_over_the_command_lines_sources(tmp_path):
    request = RunRequest.checked(
        ["hrv"],
        [0],
        overrides={"num_epochs": 2},
        task_overrides={"hrv": {"num_epochs": 3}},
        settings=[SettingsLayer("command line", {"num_epochs": 5, "ent_coef": 0.02})],
    )
    plan = new_run_plan(tmp_path / "run", request)
    assert plan.configs["hrv"].num_epochs == 3 and plan.sources["hrv"]["num_epochs"] == "given"
    assert plan.configs["hrv"].ent_coef == 0.02 and plan.sources["hrv"]["ent_coef"] == "command line"


def test_a_resume_reads_the_recorded_sources_back_and_names_a_new_budgets(tmp_path):
    plan = new_run_plan(
        tmp_path / "new",
        RunRequest.checked(["hrv"], [0], settings=[SettingsLayer("command line", {"total_timesteps": 4096})]),
    )
    root = tmp_path / "run"
    root.mkdir()
    manifest = dict(
        plan.to_json(),
        status="interrupted",
        protocol=PROTOCOL_TEXT,
        precision="float32",
        configs={"hrv": plan.configs["hrv"].replace(anneal_lr=False).to_dict()},
    )
    (root / "manifest.json").write_text(json.dumps(manifest))
    resumed = plan_resume(RunDirectory(root), manifest, RunRequest.checked())
    assert resumed.sources == plan.sources and resumed.sources["hrv"]["total_timesteps"] == "command line"
    extended = plan_resume(
        RunDirectory(root),
        manifest,
        RunRequest.checked(settings=[SettingsLayer("resume flags", {"total_timesteps": 8192})]),
    )
    assert extended.sources["hrv"]["total_timesteps"] == "resume flags" and extended.extended == {"hrv": (4096, 8192)}
    del manifest["setting_sources"]  # a run recorded before sources: its values are the record's
    older = plan_resume(RunDirectory(root), manifest, RunRequest.checked())
    assert older.sources["hrv"]["total_timesteps"] == "recorded" and older.configs == resumed.configs


def test_values_that_do_not_fit_together_are_refused_naming_each_source(tmp_path):
    layers = [
        SettingsLayer("config file run.toml", {"num_steps": 8}),
        SettingsLayer("command line", {"num_envs": 10}),
    ]
    with pytest.raises(ValueError) as raised:
        new_run_plan(tmp_path / "run", RunRequest.checked(["hrv"], [0], settings=layers))
    message = str(raised.value)
    assert message.startswith("hrv: PPOConfig.minibatch_size=") and "num_steps=8 from config file run.toml" in message
    assert "num_envs=10 given" in message and not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match=r"SACConfig\(eval_episodes=3\): eval_episodes is a protocol setting"):
        SACConfig(eval_episodes=3)  # a protocol setting goes to its owner, ProtocolSettings
    assert ProtocolSettings(eval_episodes=3).eval_episodes == 3
