"""Issue 49 item 4, the accelerator profile (``purehr.tasks.profiles``, ``--profile``): ``auto``
is ``cpu`` here, ``cpu`` is the tasks' defaults, flags given win over the profile, a bad value
is refused by name, the manifest records the profile and a resume keeps it."""

import json

import pytest
from conftest import train_all_seeds_script

from purehr.cli.profile_flags import profile_layer, run_profile
from purehr.run.planning.run_plan import RunRequest, new_run_plan
from purehr.run.planning.settings import SettingsLayer
from purehr.tasks import HRV_DEFAULTS, SWING_DEFAULTS, get_task
from purehr.tasks.profiles import check_profile, profile_config, profile_values, resolve_profile


def _plan(tmp_path, profile, tasks=("swing", "hrv"), overrides=None, task_overrides=None, algorithm=None):
    """A new run's plan from the profile with the flags given (nothing compiled)."""
    layers = [profile_layer(profile, list(tasks), algorithm), SettingsLayer("command line", overrides or {})]
    layers.append(SettingsLayer("config file run.toml", {}, task_overrides or {}))
    request = RunRequest.checked(list(tasks), [0], algorithm=algorithm, settings=layers)
    return new_run_plan(tmp_path / "run", request)


def _configs(tmp_path, profile, *tasks, **given):
    return _plan(tmp_path, profile, *tasks, **given).configs


def test_auto_is_cpu_on_this_machine_and_accelerator_on_a_gpu_or_tpu():
    assert resolve_profile() == "cpu"  # the suite runs on a CPU
    assert resolve_profile("auto", "gpu") == resolve_profile("auto", "tpu") == "accelerator"
    assert resolve_profile("auto", "cpu") == "cpu"
    assert resolve_profile("cpu", "gpu") == "cpu" and resolve_profile("accelerator", "cpu") == "accelerator"


def test_a_bad_profile_is_refused_naming_it_and_the_choices(capsys):
    with pytest.raises(ValueError, match=r"profile='gpu': expected one of auto, cpu, accelerator"):
        check_profile("gpu")
    with pytest.raises(SystemExit) as exited:
        train_all_seeds_script().main(["--profile", "gpu", "--run-dir", "/nonexistent/never"])
    assert exited.value.code == 2
    assert "--profile: invalid choice: 'gpu' (choose from 'auto', 'cpu', 'accelerator')" in capsys.readouterr().err


def test_the_cpu_profile_is_todays_defaults(tmp_path):
    configs = _configs(tmp_path, "cpu")
    assert configs == {"swing": SWING_DEFAULTS, "hrv": HRV_DEFAULTS}
    assert profile_config(SWING_DEFAULTS, "cpu", "swing") is not None and profile_values("cpu", "swing") == {}


def test_the_accelerator_profile_keeps_batches_and_updates_with_shorter_rollouts(tmp_path):
    configs = _configs(tmp_path, "accelerator")
    for task, defaults in (("swing", SWING_DEFAULTS), ("hrv", HRV_DEFAULTS)):
        config = configs[task]
        assert config.num_steps < defaults.num_steps and config.num_envs > defaults.num_envs
        assert (config.batch_size, config.num_updates) == (defaults.batch_size, defaults.num_updates)
        shape = dict(num_envs=defaults.num_envs, num_steps=defaults.num_steps, minibatch_size=defaults.minibatch_size)
        assert config.replace(**shape) == defaults  # nothing else changed
    assert configs["swing"].num_minibatches == 2 * SWING_DEFAULTS.num_minibatches  # what kept every seed
    # no values for an algorithm or a task it was not checked on: their defaults
    assert _configs(tmp_path, "accelerator", ["hrv"], algorithm="pqn")["hrv"] == get_task("hrv").config_for("pqn")
    assert profile_values("accelerator", "swing@sac") == profile_values("accelerator", "swing-angles") == {}


def test_flags_given_win_over_the_profile(tmp_path):
    configs = _configs(tmp_path, "accelerator", overrides={"num_envs": 64}, task_overrides={"hrv": {"num_steps": 16}})
    assert (configs["swing"].num_envs, configs["swing"].num_steps, configs["swing"].minibatch_size) == (64, 32, 128)
    assert (configs["hrv"].num_envs, configs["hrv"].num_steps, configs["hrv"].minibatch_size) == (64, 16, 512)
    plan = _plan(tmp_path, "accelerator", overrides={"num_envs": 64}, task_overrides={"hrv": {"num_steps": 16}})
    overridden = {
        task: sorted(k for k, v in plan.sources[task].items() if v in ("command line", "config file run.toml"))
        for task in plan.tasks
    }
    assert overridden == {"swing": ["num_envs"], "hrv": ["num_envs", "num_steps"]}


def test_a_resume_keeps_the_recorded_profile(tmp_path):
    run = tmp_path / "gpu_run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"run_config": {"values": {"profile": "accelerator"}}}))
    assert run_profile(None, True, run)[0] == run_profile("auto", True, run)[0] == "accelerator"
    with pytest.raises(ValueError, match=r"--profile cpu: .*gpu_run was started with profile 'accelerator'"):
        run_profile("cpu", True, run)
    (run / "manifest.json").write_text(json.dumps({"run_config": {"values": {}}}))  # a run of before profiles
    assert run_profile(None, True, run)[0] == "cpu"


def test_the_manifest_records_the_profile_and_a_resume_keeps_it(tmp_path, capsys):
    """One tiny hrv run under --profile accelerator with --num-envs given (one update of 64 x 8)."""
    script, run = train_all_seeds_script(), tmp_path / "run"
    flags = ["--tasks", "hrv", "--seeds", "0", "--steps", "512", "--num-envs", "64", "--actor-hidden", "8"]
    flags += ["--critic-hidden", "8", "--eval-episodes", "4", "--no-render", "--no-progress", "--run-dir", str(run)]
    assert script.main([*flags, "--profile", "accelerator"]) == 0
    assert "profile accelerator (--profile): hrv num_envs=256 (given: yours) num_steps=8" in capsys.readouterr().err
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["run_config"]["values"]["profile"] == "accelerator"
    config = manifest["configs"]["hrv"]
    assert (config["num_envs"], config["num_steps"], config["minibatch_size"]) == (64, 8, 512)
    assert script.main(["--run-dir", str(run), "--resume", "--no-render"]) == 0  # auto here is cpu
    assert "profile accelerator (the resumed run's)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        script.main(["--run-dir", str(run), "--resume", "--profile", "cpu"])
    assert exited.value.code == 2 and "started with profile 'accelerator'" in capsys.readouterr().err


def test_a_given_value_that_does_not_fit_the_profiles_says_which_are_whose(tmp_path, capsys):
    """Issue 63 W5: --num-envs 10 beside the accelerator profile's hrv num_steps=8 and
    minibatch_size=512 makes no batch; the refusal names the profile's values and the user's,
    and the ways out, before anything is written."""
    with pytest.raises(ValueError) as raised:
        _plan(tmp_path, "accelerator", ["hrv"], overrides={"num_envs": 10})
    message = " ".join(str(raised.value).split())
    assert message.startswith("hrv: PPOConfig.minibatch_size=512 does not divide the batch num_envs * num_steps")
    assert "num_steps=8 minibatch_size=512 from --profile accelerator; num_envs=10 given" in message
    assert "--profile cpu" in message and "--num-steps and --minibatch-size too" in message
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exited:
        train_all_seeds_script().main(
            ["--tasks", "hrv", "--profile", "accelerator", "--num-envs", "10"] + ["--run-dir", str(run)]
        )
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "from --profile accelerator; num_envs=10 given" in err and not run.exists()
