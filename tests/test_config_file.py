"""Issue 52, "runs from a file": ``scripts/train_all_seeds.py --config run.toml`` trains what the
same flags train, records the file, and ``--config RUN/manifest.json`` repeats the run.
(Bad files are rows of tests/test_bad_inputs_run_dir.py.)"""

import csv
import hashlib
import json
from pathlib import Path

import pytest
from conftest import train_all_seeds_script

from purehr.cli.config_file import parse_with_config

FLAGS = ["--tasks", "hrv", "--steps", "4096", "--num-envs", "8", "--num-steps", "64"]
FLAGS += ["--minibatch-size", "128", "--seeds", "0", "--no-render", "--no-progress"]
FLAGS += ["--actor-hidden", "16", "--critic-hidden", "16", "--eval-episodes", "4"]
TOML = """\
tasks = ["hrv"]
steps = 4096
num_envs = 8
num-steps = 64
minibatch_size = 128
seeds = [0]
no_render = true
no_progress = true
actor_hidden = [16]
critic-hidden = [16]
eval_episodes = 4
"""
"""The same tiny run both ways (networks of 16 units and 4 held-out episodes instead of hrv's
256-128-64 and its default episodes: the guarantee is equality, which any size shows)."""


def _digests(run_dir: Path) -> list[str]:
    with open(run_dir / "hrv" / "seed_0" / "checkpoints.csv") as rows:
        return [row["state_digest"] for row in csv.DictReader(rows)]


def given_values(layers) -> dict:
    """The field values the settings' sources give every task, the last source's where several do."""
    return {name: value for layer in layers for name, value in layer.every_task.items()}


def test_a_run_from_a_toml_file_is_the_run_of_the_same_flags(tmp_path, capsys):
    config = tmp_path / "run.toml"
    config.write_text(TOML)
    script = train_all_seeds_script()
    assert script.main([*FLAGS, "--run-dir", str(tmp_path / "flags")]) == 0
    assert script.main(["--config", str(config), "--run-dir", str(tmp_path / "file")]) == 0
    assert f"from {config}" in capsys.readouterr().err
    by_flags, by_file = (json.loads((tmp_path / d / "manifest.json").read_text()) for d in ("flags", "file"))
    for key in ("configs", "protocol_settings", "environments"):
        assert by_file[key] == by_flags[key], key
    assert _digests(tmp_path / "file") == _digests(tmp_path / "flags") and _digests(tmp_path / "flags")
    record = by_file["run_config"]
    assert record["path"] == str(config.resolve())
    assert record["sha256"] == hashlib.sha256(config.read_bytes()).hexdigest()
    assert record["values"] == by_flags["run_config"]["values"] and record["values"]["steps"] == 4096
    assert by_flags["run_config"]["path"] is None
    # the manifest repeats the run: the same resolved flags (a new directory given beside it)
    repeated = parse_with_config(script.build_parser(), ["--config", str(tmp_path / "file" / "manifest.json")])
    direct = script.build_parser().parse_args(FLAGS)
    from_manifest, from_flags = script._run_request(repeated.args), script._run_request(direct)
    assert given_values(from_manifest.pop("settings")) == given_values(from_flags.pop("settings"))
    assert from_manifest == from_flags


def test_flags_beside_the_file_override_it_and_task_sections_apply_to_their_task(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text(
        TOML + "learning_rate = 0.01\n[task.hrv]\nnum_epochs = 2\ngamma = 0.9\n[task.hrv.env]\ndifficulty = 0.5\n"
    )
    script = train_all_seeds_script()
    resolved = parse_with_config(script.build_parser(), ["--config", str(config), "--learning-rate", "1e-3"])
    assert resolved.source_line == f"from {config}; --learning-rate 1e-3 given on the command line overrides it"
    request = script._run_request(resolved.args)
    given = given_values(request["settings"])
    assert given["learning_rate"] == 1e-3 and given["total_timesteps"] == 4096
    assert [layer.source for layer in request["settings"]] == [f"config file {config}", "command line"]
    assert resolved.task_overrides == {"hrv": {"num_epochs": 2, "gamma": 0.9}}
    assert request["env_kwargs"] == {"hrv": {"difficulty": 0.5}}
    resolved = parse_with_config(script.build_parser(), ["--config", str(config), "--gamma", "0.95"])
    assert resolved.task_overrides == {"hrv": {"num_epochs": 2}}  # the command line applies to every task
    assert resolved.record["values"]["task"] == {"hrv": {"num_epochs": 2, "env": {"difficulty": 0.5}}}


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[task.hrv]\nnum_epoch = 2\n", "unknown key 'num_epoch'"),
        ("[task.hrv]\nnum_epochs = 'two'\n", "argument --num-epochs: invalid int value: 'two'"),
        ("no_render = 'yes'\n", "no_render = 'yes': expected true or false"),
        ("seeds = [0\n", "not valid TOML"),
        ("tasks = []\n", "tasks = []: expected at least one value"),
        ("actor_hidden = []\n", "actor_hidden = []: expected at least one value"),
        ("[task.hrv]\nactor_hidden = []\n", "[task.hrv] actor_hidden = []: expected at least one value"),
        ("learning_rate = 0.1\nlearning-rate = 0.2\n", "both 'learning_rate' and 'learning-rate'"),
        ("[task.hrv]\nnum_epochs = 2\nnum-epochs = 3\n", "[task.hrv]: both 'num_epochs' and 'num-epochs'"),
    ],
)
def test_a_bad_file_is_one_usage_error(tmp_path, capsys, text, fragment):
    config = tmp_path / "run.toml"
    config.write_text(text)
    with pytest.raises(SystemExit) as stopped:
        parse_with_config(train_all_seeds_script().build_parser(), ["--config", str(config)])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and fragment in " ".join(err.split()) and "Traceback" not in err
