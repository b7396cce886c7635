"""benchmarks/: throughput.py --quick runs and reports every field; the Colab notebook is valid;
purejaxql's PQN config maps to PQNConfig (peers.py's purejaxql pairing)."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THROUGHPUT = ROOT / "benchmarks" / "throughput.py"
NOTEBOOK = ROOT / "benchmarks" / "colab_quickstart.ipynb"


def _throughput_module():
    spec = importlib.util.spec_from_file_location("throughput", THROUGHPUT)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(THROUGHPUT.parent))  # as `python throughput.py` runs it: _common importable
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(THROUGHPUT.parent))
    return module


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("throughput") / "quick.json"
    completed = subprocess.run(
        [sys.executable, "-W", "ignore", str(THROUGHPUT), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "steps/s" in completed.stdout  # the printed table
    return json.loads(out.read_text())


@pytest.mark.slow
def test_quick_throughput_records_every_field_with_positive_numbers(quick_result):
    module = _throughput_module()
    records = quick_result["records"]
    assert {r["mode"] for r in records} == set(module.MODES)
    for record in records:
        for field in module.RECORD_FIELDS:
            value = record.get(field)
            assert isinstance(value, (int, float)) and not isinstance(value, bool), (field, record)
            assert value > 0, (field, record)
        assert record["steps_per_s"] == pytest.approx(record["env_steps"] / record["run_s"], rel=0.02)
        assert record["env_steps"] == record["seeds"] * record["envs"] * record["num_steps"] * record["updates"]
    assert quick_result["machine"]["cpu_count"] > 0 and quick_result["machine"]["jax"]
    assert all(g["ratio"] > 0 for g in quick_result["goals"]["training_over_simulation"])
    assert quick_result["goals"]["training_over_simulation"], "training/simulation ratio missing"


def test_goal_evaluation_reads_the_grid():
    goals = _throughput_module().goals
    record = dict(task="swing", dtype="float32", envs=8)
    records = [
        dict(record, mode="simulation", seeds=1, steps_per_s=100.0, run_s=1.0),
        dict(record, mode="training", seeds=1, steps_per_s=50.0, run_s=2.0),
        dict(record, mode="simulation", seeds=5, steps_per_s=200.0, run_s=2.5),
        dict(record, mode="training", seeds=5, steps_per_s=30.0, run_s=7.0),
    ]
    result = goals(records)
    assert [g["ratio"] for g in result["training_over_simulation"]] == [0.5, 0.15]
    assert result["swing_training_at_least_40pct_of_simulation"] is False
    training = [g for g in result["seeds5_over_seeds1_wall"] if g["mode"] == "training"]
    assert training[0]["ratio"] == 3.5 and result["five_seeds_at_most_3x_one_seed"] is False


def test_colab_notebook_is_valid_nbformat_4():
    notebook = json.loads(NOTEBOOK.read_text())
    assert notebook["nbformat"] == 4 and notebook["cells"]
    for cell in notebook["cells"]:
        assert cell["cell_type"] in ("markdown", "code") and isinstance(cell["source"], list)
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and "execution_count" in cell
    sources = "".join("".join(cell["source"]) for cell in notebook["cells"])
    for needle in (
        "jax-cuda12-plugin",
        "libtpu",
        'pip_install("-c", CONSTRAINTS, "-e", ".")',
        "scripts/train_all_seeds.py",
        "replay.mp4",
    ):
        assert needle in sources


def _accelerator_summary_module():
    spec = importlib.util.spec_from_file_location("accelerator_summary", ROOT / "benchmarks" / "accelerator_summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_accelerator_summary_goals_by_hand():
    """benchmarks/accelerator_check.sh's one JSON: the three issue-12 goals from its parts."""
    summarize = _accelerator_summary_module().summarize
    record = dict(mode="training", envs=2048)
    throughput = {
        "records": [
            dict(record, task="hrv", seeds=32, steps_per_s=12_000_000.0, run_s=5.6),
            dict(record, task="hrv", seeds=1, steps_per_s=900_000.0, run_s=1.0),
            dict(record, task="hrv", seeds=5, steps_per_s=4_000_000.0, run_s=1.1),
            dict(record, task="swing", seeds=1, steps_per_s=1.0, run_s=2.0),
            dict(record, task="swing", seeds=5, steps_per_s=1.0, run_s=2.6),
        ]
    }
    summary = summarize({"backend": "gpu"}, throughput, {"speedup_run": 2.5}, {"status": "finished"}, None)
    goals = summary["goals"]
    assert goals["hrv_at_least_10M_steps_per_s"] is True and goals["hrv_training_envs"] == 2048
    assert goals["five_seeds_over_one_seed_wall"] == {"swing": 1.3, "hrv": 1.1}
    assert goals["five_seeds_at_most_1.2x_one_seed"] is False  # swing 1.3 > 1.2
    assert goals["one_scan_at_least_3x_host_loop"] is False  # 2.5 < 3
    assert summary["protocol"]["status"] == "finished"
    missing = summarize(None, None, None, None, None)["goals"]  # a step that failed: not measured
    assert missing["hrv_at_least_10M_steps_per_s"] is None and missing["one_scan_at_least_3x_host_loop"] is None


def _purejaxql_peer_module():
    spec = importlib.util.spec_from_file_location("_purejaxql_peer", ROOT / "benchmarks" / "_purejaxql_peer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# purejaxql's config/config.yaml merged with config/alg/pqn_cartpole.yaml, as its script receives
# them (typed from its published CartPole settings, test episodes switched off)
PUREJAXQL_CARTPOLE = {
    "NUM_SEEDS": 1,
    "SEED": 0,
    "HYP_TUNE": False,
    "WANDB_MODE": "disabled",
    "ENTITY": "",
    "PROJECT": "",
    "alg": {},
    "WANDB_LOG_ALL_SEEDS": False,
    "SAVE_PATH": "./models",
    "ALG_NAME": "pqn",
    "TOTAL_TIMESTEPS": 5e5,
    "TOTAL_TIMESTEPS_DECAY": 5e5,
    "NUM_ENVS": 32,
    "NUM_STEPS": 64,
    "EPS_START": 1.0,
    "EPS_FINISH": 0.2,
    "EPS_DECAY": 0.2,
    "NUM_MINIBATCHES": 16,
    "NUM_EPOCHS": 4,
    "NORM_INPUT": False,
    "HIDDEN_SIZE": 256,
    "NUM_LAYERS": 2,
    "NORM_TYPE": "layer_norm",
    "LR": 0.0001,
    "MAX_GRAD_NORM": 10,
    "LR_LINEAR_DECAY": True,
    "REW_SCALE": 0.1,
    "GAMMA": 0.99,
    "LAMBDA": 0.95,
    "ENV_NAME": "CartPole-v1",
    "ENV_KWARGS": {},
    "TEST_DURING_TRAINING": False,
    "TEST_INTERVAL": 0.05,
    "TEST_NUM_ENVS": 128,
    "EPS_TEST": 0.0,
}


def test_purejaxql_cartpole_config_is_pqns_defaults_at_its_whole_updates():
    """PQNConfig's defaults are documented as purejaxql's CartPole settings: the benchmark's
    mapping of that config must give exactly them, at its 5e5 // (32 x 64) = 244 whole updates
    (499,712 steps) and 32 x 64 / 16 = 128 transitions per minibatch."""
    from purehr.algorithms.pqn.config import PQNConfig

    mapped = _purejaxql_peer_module().purejaxql_as_purehr(dict(PUREJAXQL_CARTPOLE))
    assert mapped == PQNConfig(total_timesteps=499_712)
    assert (mapped.num_updates, mapped.minibatch_size, mapped.hidden) == (244, 128, (256, 256))


@pytest.mark.parametrize(
    "change, named",
    [
        ({"NORM_TYPE": "batch_norm"}, "NORM_TYPE='batch_norm'"),
        ({"NORM_INPUT": True}, "NORM_INPUT=True"),
        ({"TOTAL_TIMESTEPS_DECAY": 1e7}, "TOTAL_TIMESTEPS_DECAY=10000000.0"),
        ({"DUELING": True}, "['DUELING']"),
    ],
)
def test_purejaxql_config_without_a_purehr_counterpart_is_refused_by_name(change, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        _purejaxql_peer_module().purejaxql_as_purehr({**PUREJAXQL_CARTPOLE, **change})


def test_purejaxql_folder_config_composes_to_the_published_settings():
    """With a purejaxql checkout named by PUREJAXQL_FOLDER (and hydra, the purejaxql extra), the
    config Hydra composes from its folder is the one typed above."""
    folder = os.environ.get("PUREJAXQL_FOLDER")
    if not folder or not (Path(folder) / "config" / "config.yaml").is_file():
        pytest.skip("no purejaxql folder: set PUREJAXQL_FOLDER to run it")
    pytest.importorskip("hydra")
    module = _purejaxql_peer_module()
    composed = {**module.compose_config(Path(folder), "CartPole-v1"), **module.SWITCHED_OFF}
    del composed["alg"]
    assert composed == {k: v for k, v in PUREJAXQL_CARTPOLE.items() if k != "alg"}


def test_purejaxql_minatar_config_maps_to_its_cnn_network():
    """pqn_minatar.yaml (typed from its folder) has no HIDDEN_SIZE, NUM_LAYERS or REW_SCALE: its
    network lives in its code (x / 255, a 3 x 3 convolution of 16 channels, Dense 128) and a
    missing REW_SCALE reads as 1; 128 x 32 / 32 = 128 transitions per minibatch."""
    minatar = {k: v for k, v in PUREJAXQL_CARTPOLE.items() if k not in ("HIDDEN_SIZE", "NUM_LAYERS", "REW_SCALE")}
    minatar.update(
        TOTAL_TIMESTEPS=1e7,
        TOTAL_TIMESTEPS_DECAY=1e7,
        NUM_ENVS=128,
        NUM_STEPS=32,
        NUM_MINIBATCHES=32,
        NUM_EPOCHS=2,
        EPS_FINISH=0.05,
        EPS_DECAY=0.1,
        LR=0.0005,
        LAMBDA=0.65,
        ENV_NAME="Asterix-MinAtar",
    )
    mapped = _purejaxql_peer_module().purejaxql_as_purehr(minatar)
    assert (mapped.conv_channels, mapped.hidden, mapped.input_scale) == ((16,), (128,), 1 / 255)
    assert (mapped.minibatch_size, mapped.num_epochs, mapped.reward_scaling, mapped.q_lambda) == (128, 2, 1.0, 0.65)
    assert mapped.total_timesteps == 10_000_000 // 4096 * 4096


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--pair", "pqn", "--purejaxql", ".", "--budgets", "4", "2"], "--budgets 4 2: expected LOW < HIGH"),
        (["--pair", "sac", "--env", "Asterix-MinAtar"], "--env Asterix-MinAtar: purejaxql's configs are for"),
    ],
)
def test_thunk_times_refuses_a_bad_pairing_before_any_work(flags, message):
    """Refused before a program is built (a build takes seconds, a trace minutes)."""
    completed = subprocess.run(
        [sys.executable, "-W", "ignore", str(ROOT / "benchmarks" / "thunk_times.py"), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert completed.returncode == 1 and message in completed.stderr, completed.stderr[-2000:]


MODULE = '''"""Mod."""

import os

X = 1  # on a line of code


def f():
    """F."""
    return 1


class _C:
    def a(self):
        pass

    def b(self):
        # a comment line
        pass
'''


def test_package_size_counts_a_module_by_hand_and_refuses_a_folder_that_is_no_package(tmp_path):
    """9 code, 2 docstring, 1 comment, 7 blank lines; the floor adds the module's one-line docstring,
    2 blanks and a docstring for public ``f``, 2 blanks for ``_C`` (private: no docstring) and 1
    between its two methods: 9 + 7 = 16."""
    spec = importlib.util.spec_from_file_location("package_size", ROOT / "benchmarks" / "package_size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = {"code": 9, "docstring": 2, "comment": 1, "blank": 7, "lines": 19, "floor": 16}
    assert module.module_size(MODULE) == expected
    package = tmp_path / "pkg"
    (package / "room").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "room" / "m.py").write_text(MODULE)
    size = module.package_size(package)
    assert size["rooms"]["room"] == {"modules": 1, **expected}
    assert size["total"]["lines"] == 19 and size["largest_module"] == {"path": "room/m.py", "lines": 19}
    with pytest.raises(ValueError, match=r"--package .*: expected a package folder"):
        module.package_size(tmp_path)
