"""A user's own environment through the whole protocol (issue 22): the example a user copies
(examples/my_env.py), renamed, trains through the command line, and its checkpoint restores
in a fresh process with the same held-out numbers; the Python API (``register_task``) trains
it in-process; and bad input (a module that does not import, a factory that returns something
else, a space PPO cannot take, a ``PPO_CONFIG`` that is not one) is named before anything is
written. docs/environments.md is the user's side of this."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.ppo.config import PPOConfig
from purehr.envs.base import check_environment
from purehr.envs.rollout import heldout_evaluation, random_policy, zero_policy
from purehr.run.protocol import train_all_seeds
from purehr.run.restoring import restore
from purehr.run.store.run_dir import read_checkpoint_rows
from purehr.tasks import environment_task, get_task, register_task, registry
from purehr.tasks.environment_task import check_spaces

REPO = Path(__file__).resolve().parents[1]
TUTORIAL = REPO / "docs" / "tutorial.md"
EXAMPLE = REPO / "examples" / "my_env.py"
TRAIN = REPO / "scripts" / "train_all_seeds.py"
TASK = "cliff_walker:make_env"  # the example, copied and renamed as a user would
STEPS, INTERVAL = 20_480, 5_120  # 20 updates of the example's 16 x 64 batch; a checkpoint every 5
TARGETS = [0, 5_120, 10_240, 15_360, 20_480]
MARGIN = 0.5
"""Held-out success must beat each floor by this much (measured: 1.00 at 10,240 steps and after,
for both seeds, against 0.115 acting at random and 0.025 doing nothing; 200 episodes)."""
CHILD_ENV = {**os.environ, "PJRT_NPROC": "1"}
RESTORE_AND_EVALUATE = """
import json, sys
import jax
from purehr.run.restoring import restore
from purehr.tasks import get_task
r = restore(sys.argv[1], sys.argv[2], 0)
evaluation = get_task(sys.argv[2]).heldout_evaluation
metrics = jax.jit(lambda: evaluation(r.env, r.env_params, r.pure_policy, num_episodes=r.protocol.eval_episodes))()
metrics = {name: float(value) for name, value in metrics.items()}
print(json.dumps({"steps": r.steps, "goal_radius": r.env.default_params.goal_radius, "metrics": metrics}))
"""


def copy_example(folder: Path, module: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(EXAMPLE, folder / f"{module}.py"))


def test_the_example_is_an_environment_purehr_takes(tmp_path, monkeypatch):
    """The example passes the checks every task's environment passes, and its floors are far
    from what reaching the goal gives (the margin the learning test relies on)."""
    copy_example(tmp_path, "example_checked")
    monkeypatch.syspath_prepend(str(tmp_path))
    import example_checked

    env = example_checked.make_env()
    check_environment(env)
    check_spaces(env, "example")
    assert env.defines_success and env.max_episode_steps() == 50
    assert example_checked.make_env(goal_radius=0.2).default_params.goal_radius == 0.2
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['radius'\]"):
        example_checked.make_env(radius=0.2)
    with pytest.raises(ValueError, match=r"goal_radius=-1; expected a positive finite number"):
        example_checked.make_env(goal_radius=-1)
    params = env.default_params
    floors = jax.jit(
        lambda: {
            "random": heldout_evaluation(env, params, random_policy(env.action_space(params)), 200),
            "zero": heldout_evaluation(env, params, zero_policy(env.action_space(params)), 200),
        }
    )()
    assert float(floors["random"]["success_rate"]) < 0.25 and float(floors["zero"]["success_rate"]) < 0.1


VERSIONED_MODULE = """
import json

import numpy as np

from example_versioned_base import make_env

PACKAGES = ("flax",)  # used through example_versioned_base, which this file's imports do not show


def make_lazy_env(**kwargs):
    import gymnax  # an import inside the factory counts too

    return make_env(**kwargs)
"""


def test_a_factory_records_its_packages_versions_and_the_baselines_are_kept_by_them(tmp_path, monkeypatch):
    """Issue 52, friction 9: a ``module:factory`` task records the versions of the installed
    packages its module imports (numpy; gymnax imported lazily) and declares (``PACKAGES``),
    not the standard library's or the user's own modules; the baselines' key changes with
    them. The version lookup is replaced for the second half: nothing is installed."""
    from importlib import metadata

    from purehr.run.baselines import baseline_definition, baseline_key
    from purehr.run.compiled.task_setup import build_task_setup

    copy_example(tmp_path, "example_versioned_base")
    (tmp_path / "example_versioned.py").write_text(VERSIONED_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    task = get_task("example_versioned:make_lazy_env")
    setup = build_task_setup(task)
    installed = {name: metadata.version(name) for name in ("flax", "gymnax", "numpy")}
    assert task.source(setup.env)["versions"] == installed
    key = baseline_key(baseline_definition(setup))
    real_version = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "0.0.1" if name == "numpy" else real_version(name))
    assert task.source(setup.env)["versions"] == dict(installed, numpy="0.0.1")
    assert baseline_key(baseline_definition(setup)) != key


USER_BASELINES = """
REFERENCE_BASELINE = "straight"
BASELINES["stay_left"] = lambda env, params: lambda observation, t, key: jnp.array([-1.0, 0.0])
"""


def test_a_modules_baselines_are_evaluated_recorded_tabled_and_evaluable(tmp_path, monkeypatch, capsys):
    """Issue 52, friction 3: the example's ``BASELINES`` (uncommented) and one more entry train
    through the script in-process: the reference (``REFERENCE_BASELINE``) and the other
    entry (a floor) are in the manifest, with numbers equal to evaluating the policies
    directly with the task's held-out evaluation, in the results table, and
    ``scripts/evaluate.py --policy`` takes them. About 15 s (one tiny training program)."""
    from purehr.reports.results_table import results_table

    source = EXAMPLE.read_text().replace("# BASELINES = ", "BASELINES = ") + USER_BASELINES
    (tmp_path / "example_baselines.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    task_name = "example_baselines:make_env"
    flags = ["--tasks", task_name, "--seeds", "0", "--steps", "1024", "--checkpoint-interval", "1024"]
    assert load_train_script().main([*flags, "--run-dir", "run", "--no-render", "--no-progress"]) == 0
    entry = json.loads((tmp_path / "run" / "manifest.json").read_text())["baselines"][task_name]
    assert entry["name"] == "straight" and set(entry["floors"]) == {"zero action", "random", "stay_left"}
    import example_baselines

    task = get_task(task_name)
    env = task.make_env()
    episodes = task.settings_for(None)[1].eval_episodes
    for name, metrics in [("straight", entry["metrics"]), ("stay_left", entry["floors"]["stay_left"])]:
        policy = example_baselines.BASELINES[name](env, env.default_params)
        direct = jax.jit(lambda policy=policy: task.heldout_evaluation(env, env.default_params, policy, episodes))()
        assert metrics == {key: float(value) for key, value in direct.items()}, name
    assert entry["metrics"]["success_rate"] == 1.0 and entry["floors"]["stay_left"]["success_rate"] < 0.2
    rows = results_table(tmp_path / "run")
    assert f"| {task_name} | straight | 1.00 |" in rows and f"| {task_name} | stay_left |" in rows, rows
    assert "no reference policy" not in rows, rows
    evaluate = load_script(REPO / "scripts" / "evaluate.py")
    capsys.readouterr()
    argv = ["--task", task_name, "--run-dir", "run", "--policy", "stay_left", "--num-episodes", str(episodes)]
    assert evaluate.main([*argv, "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert evaluated.pop("environment_of") == "run" and evaluated == entry["floors"]["stay_left"]


BASELINES_MODULE = """
from example_keyed_base import make_env


def make_still_policy(env, env_params):
    return lambda observation, t, key: 0.0 * observation[:2]


BASELINES = {"still": make_still_policy}
"""


def test_editing_a_modules_baselines_changes_the_cache_key(tmp_path, monkeypatch):
    """The policies live in a module of their own (the environment's file unchanged): an edit
    of it is a new baseline definition, so the kept numbers of the old one are not reused."""
    from purehr.run.baselines import baseline_definition, baseline_key
    from purehr.run.compiled.task_setup import build_task_setup

    copy_example(tmp_path, "example_keyed_base")
    module = tmp_path / "example_keyed.py"
    module.write_text(BASELINES_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    task = get_task("example_keyed:make_env")
    assert [baseline.flag for baseline in task.baselines] == ["zero", "random", "still"] and not task.has_reference
    key = baseline_key(baseline_definition(build_task_setup(task)))
    module.write_text(BASELINES_MODULE.replace("0.0 * observation", "0.5 * observation"))
    monkeypatch.delitem(sys.modules, "example_keyed")
    monkeypatch.delitem(registry._RESOLVED, "example_keyed:make_env")
    edited = get_task("example_keyed:make_env")
    assert baseline_key(baseline_definition(build_task_setup(edited))) != key


def load_script(path: Path):
    import importlib.util

    name = f"_purehr_script_{path.stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_the_spaces_build_as_docs_environments_writes_them():
    """Issue 52, friction 10: the constructors of ``purehr.envs.spaces`` are documented in
    docs/environments.md; its snippet runs as written and each space holds what the table
    says: its values' shape, and the dtype the policy hands ``step``."""
    from purehr.engine.distributions import make_distribution, policy_output_size
    from purehr.envs import spaces

    text = (REPO / "docs" / "environments.md").read_text()
    snippet = [block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "spaces.Discrete(" in block]
    assert len(snippet) == 1
    built: dict = {}
    exec(compile(snippet[0], "docs/environments.md", "exec"), built)
    kinds = {type(value) for value in built.values()}
    assert {spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.Dict} <= kinds
    key = jax.random.PRNGKey(0)
    assert built["move"].shape == () and built["move"].contains(3) and not built["move"].contains(4)
    assert built["keys"].shape == (2,) and built["keys"].contains(np.array([2, 4]))
    assert not built["keys"].contains(np.array([3, 0]))
    assert built["observation"].flat_dim == 4 and built["unbounded"].flat_dim == 3
    assert bool(built["velocity"].contains(np.array([0.5, -1.5])))
    assert not bool(built["velocity"].contains(np.array([1.5, 0.0])))
    for name, dtype in {"move": np.int32, "keys": np.int32, "velocity": np.float32}.items():
        space = built[name]
        action = make_distribution(space, jnp.zeros(policy_output_size(space)), jnp.float32(0.0)).mode()
        assert action.dtype == dtype and action.shape == space.shape and bool(space.contains(action)), name
        assert bool(space.contains(space.sample(key))), name


def test_the_seed_api_takes_the_defaults_of_the_module_or_factory_that_built_the_environment(tmp_path, monkeypatch):
    """``train_hr_ppo(my_env.make_env())``: the environment was built directly, not through a
    task, yet its module's ``PPO_CONFIG`` (or a resolved ``module:factory`` task's) is its
    default; where nothing tells, the defaults for its action space, said in one line."""
    from purehr.algorithms.ppo.config import CONTINUOUS_DEFAULTS
    from purehr.model.facade import default_config_of

    copy_example(tmp_path, "example_defaults")
    plain = EXAMPLE.read_text().split("PPO_CONFIG = ")[0]  # the example without its PPO_CONFIG
    (tmp_path / "example_plain.py").write_text(plain)
    (tmp_path / "example_factory.py").write_text(
        "from example_plain import make_env\n"
        "from purehr.algorithms.ppo.config import PPOConfig\n"
        "PPO_CONFIG = PPOConfig(num_envs=8, num_steps=32, minibatch_size=64)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import example_defaults
    import example_factory
    import example_plain

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the module's own defaults: nothing to say
        assert default_config_of(example_defaults.make_env()) is example_defaults.PPO_CONFIG
    with pytest.warns(UserWarning, match=r"belongs to no task.*defaults for a continuous action") as said:
        assert default_config_of(example_plain.make_env()) is CONTINUOUS_DEFAULTS
    assert "\n" not in str(said[0].message)
    try:
        get_task("example_factory:make_env")  # resolved (--tasks, restore): its PPO_CONFIG is the default
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert default_config_of(example_factory.make_env()) is example_factory.PPO_CONFIG
    finally:
        registry._RESOLVED.pop("example_factory:make_env", None)


# --- (a) the command line, then restore in a fresh process ----------------------------------


@pytest.mark.slow
def test_a_copied_example_trains_through_the_cli_and_restores_in_a_fresh_process(tmp_path):
    """About 25 s on 2 cores: two subprocesses (training, 7 s of it compiling; restore and
    evaluate). The environment argument goes into the manifest, and the restore rebuilds it."""
    copy_example(tmp_path, "cliff_walker")
    run = tmp_path / "run"
    command = [sys.executable, str(TRAIN), "--tasks", TASK, "--seeds", "0", "1", "--steps", str(STEPS)]
    command += ["--checkpoint-interval", str(INTERVAL), "--env-arg", TASK, "goal_radius=0.12"]
    command += ["--run-dir", str(run), "--no-render", "--no-progress"]
    trained = subprocess.run(command, cwd=tmp_path, env=CHILD_ENV, capture_output=True, text=True, timeout=300)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "finished", trained.stderr[-3000:]
    assert manifest["environments"] == {TASK: {"goal_radius": 0.12}}
    source = manifest["sources"][TASK]
    assert source["suite"] == "factory" and source["factory"] == TASK
    assert source["environment"] == "cliff_walker.PointReach" and source["file"].endswith("cliff_walker.py")
    floors = manifest["baselines"][TASK]["floors"]
    assert set(floors) == {"random", "zero action"}
    last_rows = {}
    for seed in (0, 1):
        seed_dir = run / TASK / f"seed_{seed}"
        rows = read_checkpoint_rows(seed_dir / "checkpoints.csv")
        assert [row["target_steps"] for row in rows] == TARGETS
        for row in rows:
            assert (seed_dir / "checkpoints" / str(row["actual_steps"])).is_dir()
        last_rows[seed] = rows[-1]
        for floor in floors.values():
            assert rows[-1]["eval_success_rate"] >= floor["success_rate"] + MARGIN, (seed, rows[-1], floors)

    restored = subprocess.run(
        [sys.executable, "-c", RESTORE_AND_EVALUATE, str(run), TASK],
        cwd=tmp_path,
        env=CHILD_ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert restored.returncode == 0, restored.stderr[-3000:]
    again = json.loads(restored.stdout.splitlines()[-1])
    assert again["steps"] == STEPS and again["goal_radius"] == 0.12
    assert set(again["metrics"]) == {"success_rate", "episode_length", "return_mean", "return_std", "return_min"}
    for name in ("success_rate", "episode_length"):  # counts over the 200 episodes: exact
        assert again["metrics"][name] == last_rows[0][f"eval_{name}"], name
    for name in ("return_mean", "return_std", "return_min"):  # measured equal; a sum's order may differ
        np.testing.assert_allclose(again["metrics"][name], last_rows[0][f"eval_{name}"], rtol=1e-6, err_msg=name)
    # docs/tutorial.md's analysis script, as written but for its run and task names: it runs an
    # episode of the restored policy from a fresh process (about 7 s)
    (tutorial,) = [
        block for block in re.findall(r"```python\n(.*?)```", TUTORIAL.read_text(), re.S) if "restore(" in block
    ]
    assert '"runs/point"' in tutorial and '"point:make_env"' in tutorial
    script = tutorial.replace('"runs/point"', repr(str(run))).replace('"point:make_env"', repr(TASK))
    analysed = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=CHILD_ENV, capture_output=True, text=True, timeout=300
    )
    assert analysed.returncode == 0, analysed.stderr[-3000:]
    first, last = analysed.stdout.splitlines()[-2:]
    assert first.split()[0] == str(last_rows[0]["actual_steps"])
    assert re.fullmatch(r"episode of \d+ steps, return -?[\d.]+, success (True|False)", last), last
    # last: the end-of-run report (the table of a task without a reference baseline)
    assert trained.returncode == 0, trained.stderr[-3000:]


# --- (b) the Python API ---------------------------------------------------------------------


@pytest.fixture
def registered(tmp_path, monkeypatch):
    """The example registered as task "mine" (removed from the registry afterwards)."""
    copy_example(tmp_path, "example_registered")
    monkeypatch.syspath_prepend(str(tmp_path))
    import example_registered

    config = example_registered.PPO_CONFIG.replace(total_timesteps=10_240)
    protocol = example_registered.PROTOCOL.replace(checkpoint_interval=5_120)
    task = register_task(
        environment_task("mine", example_registered.make_env, default_config=config, default_protocol=protocol)
    )
    yield task
    registry.TASKS.pop("mine", None)


@pytest.mark.slow
def test_a_registered_environment_trains_through_the_python_api(registered, tmp_path):
    """About 10 s (one compile): the task is a name every entry point knows (get_task,
    restore); its default config is the one given; it learns well past its floors."""
    assert get_task("mine") is registered
    with pytest.raises(ValueError, match="already registered"):
        register_task(environment_task("mine", registered.make_env))
    run = tmp_path / "api_run"
    train_all_seeds(run, tasks=["mine"], seeds=[3], progress=False)
    manifest = json.loads((run / "manifest.json").read_text())
    assert PPOConfig.from_dict(manifest["configs"]["mine"]) == registered.default_config
    assert manifest["sources"]["mine"] == {"suite": "python", "environment": "example_registered.PointReach"}
    rows = read_checkpoint_rows(run / "mine" / "seed_3" / "checkpoints.csv")
    assert [row["target_steps"] for row in rows] == [0, 5_120, 10_240]
    random_floor = manifest["baselines"]["mine"]["floors"]["random"]["success_rate"]
    assert rows[-1]["eval_success_rate"] >= random_floor + MARGIN, (rows[-1], random_floor)
    restored = restore(run, "mine", 3)
    assert restored.steps == 10_240 and restored.checkpoint_row["state_digest"] == rows[-1]["state_digest"]


def test_a_registered_environment_records_the_keywords_it_was_built_with(registered):
    env = registered.make_env(goal_radius=0.12)
    assert registered.env_kwargs(env) == {"goal_radius": 0.12}
    assert registered.env_kwargs(registered.make_env()) == {}


# --- (d) an environment whose reward is NaN at some steps (issue 48) ------------------------

NAN_REWARD_ENV = """
import jax.numpy as jnp
from example_base import PointReach

class NanReward(PointReach):
    def step(self, key, state, action, params=None):
        obs, next_state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs, next_state, jnp.where(next_state.time == 3, jnp.nan, reward), terminated, truncated, info

def make_env(**kwargs):
    return NanReward(**kwargs)
"""
TINY_TRAINING = dict(batch_size=64, num_envs=4, num_steps=32, num_epochs=1, actor_hidden=(8,), critic_hidden=(8,))


@pytest.fixture
def nan_reward_env(tmp_path, monkeypatch):
    """A copy of the example whose step returns reward NaN on each episode's third step."""
    copy_example(tmp_path, "example_base")
    (tmp_path / "nan_reward_env.py").write_text(NAN_REWARD_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    import nan_reward_env

    return nan_reward_env.make_env(goal_radius=0.01)


def test_the_training_wrappers_end_a_step_whose_reward_is_not_finite(nan_reward_env):
    """As swing and hrv do themselves (docs/interfaces.md): counted in ``nonfinite_state``,
    terminated with reward 0, the episode restarts; a finite step passes unchanged."""
    from purehr.envs.wrappers import training_wrappers

    wrapped = training_wrappers(nan_reward_env)
    key = jax.random.PRNGKey(0)
    _, state = wrapped.reset(key)
    step = jax.jit(wrapped.step)
    action = jax.numpy.zeros(2)
    for time in (1, 2):  # finite steps: as the environment returned them
        _, state, reward, terminated, _, info = step(key, state, action)
        assert np.isfinite(float(reward)) and not bool(info["nonfinite_state"]) and not bool(terminated)
        assert int(state.env_state.time) == time
    observation, state, reward, terminated, truncated, info = step(key, state, action)
    assert bool(info["nonfinite_state"]) and bool(terminated) and not bool(truncated)
    assert float(reward) == 0.0 and bool(info["episode_done"]) and float(info["episode_return"]) == 0.0
    assert int(state.env_state.time) == 0 and np.all(np.isfinite(observation))


def test_nan_rewards_are_counted_and_training_goes_on(nan_reward_env):
    """Every episode ends at its third step: 10 of each environment's first 32 steps count
    (steps 3 to 30), 11 of the next 32 (33 to 63); 4 environments. The run does not diverge."""
    from purehr import train_hr_ppo

    model = train_hr_ppo(nan_reward_env, timesteps=256, **TINY_TRAINING)
    assert model.metrics["nonfinite_states"].tolist() == [40, 44]
    assert model.metrics["diverged_at_update"].tolist() == [0, 0]
    assert np.all(np.isfinite(model.metrics["loss"]))


def test_a_divergence_after_non_finite_rewards_names_the_environment(nan_reward_env):
    """A seed that diverges (here by a huge learning rate) after the environment produced
    non-finite rewards: the message names their count (update 1's 40) and that the environment
    produced them, not only the learning rate."""
    from purehr import TrainingDiverged, train_hr_ppo

    with pytest.raises(TrainingDiverged) as raised:
        train_hr_ppo(nan_reward_env, timesteps=256, learning_rate=1e30, **TINY_TRAINING)
    message = str(raised.value)
    assert "training diverged at update 1 (128 env steps)" in message
    assert "the environment produced 40 non-finite rewards or observations" in message, message


PROTOCOL_MODULE = """
from purehr import PQNConfig, ProtocolSettings, SACConfig
from {base} import make_env

PROTOCOL = ProtocolSettings(checkpoint_interval=2_048, eval_episodes=40, quick_eval_episodes=40)
{config}
"""


@pytest.mark.parametrize(
    "base, algorithm, config",
    [
        ("example_base", "sac", "SAC_CONFIG = SACConfig(total_timesteps=8_192, learning_starts=256)"),
        ("example_base", "ppo", ""),
        ("masked_base", "pqn", "PQN_CONFIG = PQNConfig(total_timesteps=8_192, num_envs=16)"),
    ],
)
def test_a_modules_protocol_sets_the_tasks_protocol_settings_under_every_algorithm(
    base, algorithm, config, tmp_path, monkeypatch
):
    """Issue 63: a ``module:factory`` module's ``PROTOCOL`` is the task's checkpoint and evaluation
    settings whichever algorithm trains it (``@sac``, ``@pqn``: their configs have no protocol
    fields; ``@ppo``), its ``<NAME>_CONFIG`` still that algorithm's."""
    from purehr.protocol_settings import ProtocolSettings
    from purehr.run.planning.run_plan import entry_settings

    copy_example(tmp_path, "example_base")
    shutil.copy(REPO / "examples" / "masked_game.py", tmp_path / "masked_base.py")
    module = f"with_protocol_{algorithm}"
    (tmp_path / f"{module}.py").write_text(PROTOCOL_MODULE.format(base=base, config=config))
    monkeypatch.syspath_prepend(str(tmp_path))
    config, protocol = entry_settings(f"{module}:make_env@{algorithm}", None)
    assert protocol == ProtocolSettings(checkpoint_interval=2_048, eval_episodes=40, quick_eval_episodes=40)
    if algorithm != "ppo":  # the module's own config of that algorithm, which has no protocol fields
        assert config == getattr(sys.modules[module], f"{algorithm.upper()}_CONFIG")


def test_a_protocol_that_is_not_protocol_settings_is_refused_naming_it(tmp_path, monkeypatch):
    """So is a protocol setting given to a config that never held one, naming PROTOCOL."""
    from purehr.algorithms.sac.config import SACConfig

    with pytest.raises(
        ValueError, match=r"SACConfig\(eval_episodes=40\): .*PROTOCOL = ProtocolSettings\(eval_episodes"
    ):
        SACConfig(eval_episodes=40)
    copy_example(tmp_path, "example_base")
    (tmp_path / "protocol_as_dict.py").write_text(
        "from example_base import make_env\n\nPROTOCOL = {'checkpoint_interval': 2048}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TypeError, match=r"protocol_as_dict.PROTOCOL is a dict; expected a .*ProtocolSettings, e.g."):
        get_task("protocol_as_dict:make_env")


# --- (c) bad input, named before anything is written ----------------------------------------

BAD_MODULES = {
    "needs_missing_package": (
        "import purehr_no_such_package\n\ndef make_env():\n    pass\n",
        ValueError,
        r"task 'needs_missing_package:make_env': module 'needs_missing_package' does not import "
        r"\(No module named 'purehr_no_such_package'\)",
    ),
    "returns_a_dict": (
        "def make_env(**kwargs):\n    return {'obs': 0}\n",
        TypeError,
        r"make_env\(\) returned a dict; expected a purehr.envs.base.Environment",
    ),
    "grid_observations": (
        """
        from purehr.envs import spaces
        from example_base import PointReach

        class GridPoint(PointReach):
            def observation_space(self, params=None):
                return spaces.Dict({"cell": spaces.Discrete(16), "goal": spaces.Discrete(16)})

        def make_env(**kwargs):
            return GridPoint(**kwargs)
        """,
        TypeError,
        r"observation space Dict\(spaces=\{'cell': Discrete\(n=16\).* is not supported; expected Box, or a "
        r"Dict of Boxes",
    ),
    "config_as_dict": (
        "from example_base import make_env\n\nPPO_CONFIG = {'learning_rate': 3e-4}\n",
        TypeError,
        r"config_as_dict.PPO_CONFIG is a dict; expected a PPOConfig",
    ),
    "no_such_factory": (
        "from example_base import make_env\n",
        ValueError,
        r"no_such_factory has no function 'build'; its callables: \['make_env'\]",
    ),
}


@pytest.mark.parametrize("module", sorted(BAD_MODULES))
def test_bad_own_environments_are_named_before_the_run_directory_exists(module, tmp_path, monkeypatch):
    source, error, message = BAD_MODULES[module]
    copy_example(tmp_path, "example_base")
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    factory = "build" if module == "no_such_factory" else "make_env"
    run = tmp_path / "run"
    with pytest.raises(error, match=message):
        train_all_seeds(run, tasks=[f"{module}:{factory}"], seeds=[0], progress=False)
    assert not run.exists()


CLI_ROWS = {
    "a module that does not import": (
        ["--tasks", "broken_env:make_env"],
        "error: task 'broken_env:make_env': module 'broken_env' does not import (No module named "
        "'purehr_no_such_package')",
    ),
    "an argument the environment refuses": (
        ["--tasks", "walker:make_env", "--env-arg", "walker:make_env", "goal_radius=wide"],
        "error: task 'walker:make_env' with environment arguments {'goal_radius': 'wide'}: PointReach: "
        "goal_radius='wide'; expected a positive finite number",
    ),
}


@pytest.mark.parametrize("row", sorted(CLI_ROWS))
def test_the_cli_names_bad_input_in_one_line(row, tmp_path, monkeypatch, capsys):
    """The script's side of the rows above: exit status 2, one "error:" line, no run directory."""
    flags, message = CLI_ROWS[row]
    (tmp_path / "broken_env.py").write_text("import purehr_no_such_package\n")
    copy_example(tmp_path, "walker")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exited:
        load_train_script().main([*flags, "--run-dir", str(run), "--no-render"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not run.exists()


def load_train_script():
    import importlib.util

    name = "_purehr_script_train_all_seeds"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TRAIN)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
