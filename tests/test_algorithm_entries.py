"""Issue 50, the run's command line: ``--tasks swing@sac hrv`` trains each task entry by its own
algorithm in one compiled program, keyed by the entry everywhere (configs, algorithms, the run
directory). Entries that cannot run are refused in one line before anything is written; two
entries of one task and algorithm train exactly what a lone entry trains.

``fake`` (registered by a fixture) is a config-only algorithm for the refusals: Discrete actions
only, no ``learning_rate``; nothing of it is ever built or compiled."""

import csv
import dataclasses
import json
from pathlib import Path

import pytest
from conftest import PROTOCOL_CLI, PROTOCOL_SEEDS, train_all_seeds_script

from purehr.algorithms import registry
from purehr.cli.config_file import parse_with_config
from purehr.run.planning.run_plan import RunRequest, new_run_plan
from purehr.tasks import get_task

REFUSED = ["--steps", "1024", "--seeds", "0", "--no-render", "--no-progress"]  # fields every config has


@dataclasses.dataclass(frozen=True)
class FakeConfig:
    """The fields every config has, and one of its own."""

    num_envs: int = 4
    num_steps: int = 8
    total_timesteps: int = 1024
    tau: float = dataclasses.field(default=0.005, metadata={"help": "target smoothing"})

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


FAKE_HYPERPARAMETERS = ("tau",)


def fake_defaults(action_space):
    return FakeConfig()


@pytest.fixture
def fake_algorithm(monkeypatch):
    entry = registry.AlgorithmEntry(
        "fake",
        "a config-only algorithm (tests)",
        f"{__name__}:FakeConfig",
        "unused:make_fake",
        "unused:METRIC_NAMES",
        f"{__name__}:FAKE_HYPERPARAMETERS",
        action_spaces=("Discrete", "MultiDiscrete"),
        defaults=f"{__name__}:fake_defaults",
    )
    monkeypatch.setitem(registry.ALGORITHMS, "fake", entry)


def _refused(tmp_path, capsys, argv) -> str:
    """The one error line of ``argv`` (exit 2), having written nothing."""
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_:
        train_all_seeds_script().main([*argv, *REFUSED, "--run-dir", str(run_dir)])
    assert exit_.value.code == 2
    assert not run_dir.exists()
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    return errors[0]


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--tasks", "swing@nope"], "task entry 'swing@nope': unknown algorithm 'nope'; expected one of "),
        (["--tasks", "swing@ppo", "hrv", "swing@ppo"], "each task entry may appear once (swing@ppo repeated)"),
        (["--tasks", "swing@"], "task entry 'swing@': expected TASK or TASK@ALGORITHM"),
        (["--tasks", "swing@fake"], "swing@fake: fake needs Discrete or MultiDiscrete actions; swing's are Box(2,)"),
        (["--tasks", "swing", "--algorithm", "fake"], "swing: fake needs Discrete or MultiDiscrete actions"),
        (
            ["--tasks", "hrv@fake", "hrv", "--learning-rate", "0.01"],
            "--learning-rate does not apply to task entry 'hrv@fake': it trains fake, whose flags are "
            "--num-envs, --num-steps, --tau (and --steps)",
        ),
    ],
)
def test_a_bad_entry_is_refused_in_one_line_before_anything_is_written(
    tmp_path, capsys, fake_algorithm, argv, expected
):
    assert expected in _refused(tmp_path, capsys, argv)


def test_an_entry_is_the_task_with_the_algorithms_defaults(fake_algorithm):
    swing, entry = get_task("swing"), get_task("swing@ppo")
    assert (entry.name, entry.task_name, entry.algorithm) == ("swing@ppo", "swing", "ppo")
    assert entry.default_config == swing.default_config == swing.default_configs["ppo"]
    assert swing.config_for("ppo") == swing.default_config
    hrv_fake = get_task("hrv@fake")  # no tuned default: the algorithm's own for the action space
    assert hrv_fake.default_config == FakeConfig() and hrv_fake.default_configs["ppo"] == get_task("hrv").default_config


@pytest.fixture(scope="module")
def two_entries(tmp_path_factory, protocol_reference) -> dict[str, Path]:
    """swing beside swing@ppo at PROTOCOL_SMALL, trained by the script, and the session's
    reference run (swing alone among other tasks: conftest.protocol_reference)."""
    run_dir = tmp_path_factory.mktemp("entries") / "two"
    flags = PROTOCOL_CLI[PROTOCOL_CLI.index("--steps") :]
    argv = ["--tasks", "swing", "swing@ppo", *flags, "--seeds", *map(str, PROTOCOL_SEEDS), "--no-render"]
    assert train_all_seeds_script().main([*argv, "--no-progress", "--run-dir", str(run_dir)]) == 0
    return {"two": run_dir, "reference": protocol_reference["summary"].run_dir}


def _digests(run_dir: Path, entry: str, seed: int) -> list[str]:
    with open(run_dir / entry / f"seed_{seed}" / "checkpoints.csv") as rows:
        return [row["state_digest"] for row in csv.DictReader(rows)]


def test_two_entries_of_one_task_train_each_what_a_lone_entry_trains(two_entries):
    for seed in PROTOCOL_SEEDS:
        lone = _digests(two_entries["reference"], "swing", seed)
        assert len(lone) >= 2 and all(lone)
        assert _digests(two_entries["two"], "swing", seed) == lone
        assert _digests(two_entries["two"], "swing@ppo", seed) == lone
    reference = json.loads((two_entries["reference"] / "manifest.json").read_text())
    manifest = json.loads((two_entries["two"] / "manifest.json").read_text())
    assert manifest["configs"]["swing"] == reference["configs"]["swing"]
    assert manifest["tasks"] == ["swing", "swing@ppo"]
    assert manifest["algorithms"] == {"swing": "ppo", "swing@ppo": "ppo"}
    assert manifest["configs"]["swing@ppo"] == manifest["configs"]["swing"]
    assert set(manifest["environments"]) == set(manifest["protocol_settings"]) == {"swing", "swing@ppo"}


def test_a_toml_file_with_an_entry_plans_the_manifest_the_flags_recorded(two_entries, tmp_path):
    config = tmp_path / "run.toml"
    config.write_text(
        'tasks = ["swing", "swing@ppo"]\nalgorithm = "ppo"\nsteps = 16384\nnum_envs = 4\nnum_steps = 128\n'
        "minibatch_size = 128\nnum_epochs = 2\nactor_hidden = [16]\ncritic_hidden = [16]\n"
        "checkpoint_interval = 3000\neval_episodes = 4\nfull_eval_interval = 2\nquick_eval_episodes = 2\n"
        "anneal_lr = false\nseeds = [0, 1]\n"
        '[task."swing@ppo"]\ngamma = 0.9\n'
    )
    script = train_all_seeds_script()
    resolved = parse_with_config(script.build_parser(), ["--config", str(config)])
    assert resolved.task_overrides == {"swing@ppo": {"gamma": 0.9}}
    assert resolved.record["values"]["task"] == {"swing@ppo": {"gamma": 0.9}}
    resolved.args.task_overrides = resolved.task_overrides  # as the script's main sets it
    request = script._run_request(resolved.args)
    request.pop("resume"), request.pop("devices")
    plan = json.loads(json.dumps(new_run_plan(tmp_path / "planned", RunRequest.checked(**request)).to_json()))
    recorded = json.loads((two_entries["two"] / "manifest.json").read_text())
    assert plan["algorithms"] == recorded["algorithms"]
    assert plan["protocol_settings"] == recorded["protocol_settings"]
    assert plan["configs"]["swing"] == recorded["configs"]["swing"]
    assert plan["configs"]["swing@ppo"] == {**recorded["configs"]["swing@ppo"], "gamma": 0.9}
    assert recorded["configs"]["swing@ppo"]["gamma"] != 0.9


def test_the_flags_are_the_union_of_the_algorithms_fields_each_saying_whom_it_applies_to(fake_algorithm, monkeypatch):
    from purehr.cli import ppo_flags

    fields, owners = ppo_flags._union_of_fields()
    names = [field.name for field in fields]
    assert len(names) == len(set(names))  # a field several configs share is one flag
    # every config has num_envs; tau is SAC's (and the fake's); gamma PPO's, SAC's and PQN's
    assert owners["num_envs"] == ("ppo", "sac", "pqn", "fake") and owners["tau"] == ("sac", "fake")
    assert owners["gamma"] == ("ppo", "sac", "pqn") and owners["clip_range"] == ("ppo",)
    assert "checkpoint_interval" in names and "checkpoint_interval" not in owners  # the protocol's: every algorithm
    monkeypatch.setattr(ppo_flags, "FIELD_ALGORITHMS", owners)
    assert ppo_flags.applies_to("tau") == " [sac, fake only]" and ppo_flags.applies_to("clip_range") == " [ppo only]"
    assert ppo_flags.applies_to("gamma") == " [ppo, sac, pqn only]"
    assert ppo_flags.applies_to("num_envs") == "" and ppo_flags.applies_to("eval_episodes") == ""
