"""A user's own network (issue 65; ``purehr.engine.user_network``): a DeepSets torso from a file
outside the package trains a set-structured masked game (examples/masked_game.py) through the
command line, is interrupted by Ctrl-C and resumes bit-identically, and its checkpoint restores
in a fresh process and evaluates to the logged numbers; a recurrent torso's carry is reset where
an episode starts (a hand-computed case); a network that does not fit the spaces is refused
before anything compiles, naming the shapes, under PPO, PQN and SAC. The rest of the protocol
with it: TensorBoard, the seed API's save and load, the sweep, a resume and a restore from another
directory than the run's, a network file edited between two builds, an orthogonal init refused."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ctrl_c_from_a_callback
from dashboard_checks import assert_tensorboard_exact

from purehr.algorithms.ppo.config import PPOConfig
from purehr.algorithms.ppo.recurrent import RecurrentCore, Sequences
from purehr.algorithms.pqn.config import PQNConfig
from purehr.algorithms.registry import make_algorithm
from purehr.algorithms.sac.config import SACConfig
from purehr.engine.networks import RecurrentActorCritic
from purehr.engine.user_network import StructuredInput, unflatten
from purehr.envs import spaces
from purehr.envs.spaces import flatten_observation
from purehr.run.host.recorder import RunRecorder
from purehr.run.store.run_dir import read_checkpoint_rows
from purehr.tasks import get_task

REPO = Path(__file__).resolve().parents[1]
TASK = "masked_game:make_env"
NETWORKS = '''
import flax.linen as nn
import jax
import jax.numpy as jnp


class DeepSets(nn.Module):
    """Each cell's (prize, open) embedded alone, beside the mean over cells: [N, cells * 16]."""

    @nn.compact
    def __call__(self, observation):
        cells = jnp.stack([observation["prizes"], observation["action_mask"]], axis=-1)  # [N, C, 2]
        embedded = nn.relu(nn.Dense(16)(cells))
        pooled = jnp.broadcast_to(embedded.mean(axis=-2, keepdims=True), embedded.shape)
        joined = nn.relu(nn.Dense(16)(jnp.concatenate([embedded, pooled], axis=-1)))
        return joined.reshape((joined.shape[0], -1))


def deepsets(observation_space, action_space):
    return DeepSets()


class Picture(nn.Module):
    """A convolution: fits an image, not a vector."""

    @nn.compact
    def __call__(self, observation):
        return nn.Conv(4, (3, 3))(observation).reshape((observation.shape[0], -1))


def picture(observation_space, action_space):
    return Picture()


class Flat(nn.Module):
    """Every leaf flattened and joined, one dense layer: fits any observation (a dict, a vector)."""

    @nn.compact
    def __call__(self, observation):
        leaves = [leaf.reshape((leaf.shape[0], -1)).astype(jnp.float32) for leaf in jax.tree.leaves(observation)]
        return nn.tanh(nn.Dense(16)(jnp.concatenate(leaves, axis=-1)))


def flat(observation_space, action_space):
    return Flat()
'''
FLAGS = ["--tasks", TASK, "--network", "my_networks.py:deepsets", "--seeds", "0", "--steps", "4096"]
FLAGS += ["--num-envs", "16", "--num-steps", "32", "--minibatch-size", "256", "--num-epochs", "2"]
FLAGS += ["--checkpoint-interval", "1024", "--eval-episodes", "64", "--quick-eval-episodes", "64"]
FLAGS += ["--no-render", "--no-progress"]
RESTORE_AND_EVALUATE = """
import json, sys
import jax
from purehr.run.restoring import restore
from purehr.tasks import get_task
r = restore(sys.argv[1], sys.argv[2], 0)
evaluation = get_task(sys.argv[2]).heldout_evaluation
metrics = jax.jit(lambda: evaluation(r.env, r.env_params, r.pure_policy, num_episodes=r.protocol.eval_episodes))()
print(json.dumps({"steps": r.steps, "metrics": {name: float(value) for name, value in metrics.items()}}))
import numpy as np
from purehr import Model
observations = {name: np.asarray(leaf) for name, leaf in np.load(sys.argv[4]).items()}
print(json.dumps(np.asarray(Model.load(sys.argv[3]).predict(observations)).tolist()))
"""


def _script():
    spec = importlib.util.spec_from_file_location("train_all_seeds_script", REPO / "scripts" / "train_all_seeds.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def _config_file(folder: Path) -> Path:
    """``FLAGS`` as a TOML file."""
    words, lines = FLAGS[:], []
    while words:
        key = words.pop(0)[2:].replace("-", "_")
        values = []
        while words and not words[0].startswith("--"):
            values.append(words.pop(0))
        if key in ("tasks", "seeds"):
            lines.append(f"{key} = [{', '.join(json.dumps(v) if key == 'tasks' else v for v in values)}]")
        elif key in ("no_render", "no_progress"):
            continue
        else:
            value = values[0]
            lines.append(f"{key} = {value if value.isdigit() else json.dumps(value)}")
    path = folder / "run.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _rows(run: Path) -> list[dict]:
    return read_checkpoint_rows(run / TASK / "seed_0" / "checkpoints.csv")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A user's folder: the game and a file of networks, neither in the package."""
    folder = tmp_path_factory.mktemp("own_network")
    shutil.copy(REPO / "examples" / "masked_game.py", folder / "masked_game.py")
    (folder / "my_networks.py").write_text(NETWORKS)
    return folder


@pytest.fixture(scope="module")
def runs(folder):
    """The run uninterrupted (logged to TensorBoard), then again with Ctrl-C at its third update
    and ``--resume`` from another directory (in this process: the second and third reuse the
    first's compiled program)."""
    script = _script()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.syspath_prepend(str(folder))
        assert script.main([*FLAGS, "--run-dir", "whole", "--log", "tensorboard"]) == 0
        logged, signalled = RunRecorder.on_update, {}

        def interrupting(self, task, metrics):
            if int(np.asarray(metrics["update"])[0]) == 3 and not signalled:
                signalled["yes"] = True
                ctrl_c_from_a_callback(self)
            return logged(self, task, metrics)

        patch.setattr(RunRecorder, "on_update", interrupting)
        # the same run from a config file: its network key is the flag's
        assert script.main(["--config", str(_config_file(folder)), "--run-dir", "cut"]) == 130
        patch.setattr(RunRecorder, "on_update", logged)
        elsewhere = folder / "elsewhere"  # the run's relative network file is found from another directory
        elsewhere.mkdir()
        patch.chdir(elsewhere)
        assert script.main(["--resume", "--run-dir", str(folder / "cut"), "--no-progress", "--no-render"]) == 0
    assert "no_render" not in (folder / "run.toml").read_text()
    return folder / "whole", folder / "cut"


def test_a_user_network_trains_resumes_bit_identically_and_is_recorded(runs, folder):
    whole, cut = runs
    rows = _rows(whole)
    assert [row["target_steps"] for row in rows] == [0, 1024, 2048, 3072, 4096]
    assert [row["state_digest"] for row in _rows(cut)] == [row["state_digest"] for row in rows]
    manifest = json.loads((whole / "manifest.json").read_text())
    assert manifest["configs"][TASK]["network"] == "my_networks.py:deepsets"
    record = manifest["networks"][TASK]
    assert record["file"] == str((folder / "my_networks.py").resolve()) and record["factory"] == "deepsets"
    assert len(record["source_digest"]) == 64
    shapes = record["parameter_shapes"]  # two torsos (actor, critic), PPO's heads over 9 cells x 16
    assert shapes["['params']['actor']['torso']['Dense_0']['kernel']"] == [2, 16]
    assert shapes["['params']['policy_head']['kernel']"] == [9 * 16, 9]
    assert shapes["['params']['value_head']['kernel']"] == [9 * 16, 1]


def test_tensorboard_holds_every_update_of_a_user_networks_run_once(runs):
    whole, _ = runs
    assert_tensorboard_exact(whole, whole, TASK, 0, pieces=1)


@pytest.fixture(scope="module")
def seed_api_model(folder):
    """``purehr.train(..., network=...)`` (the file relative to the user's folder), saved, and
    its actions on eight observations."""
    import purehr

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.syspath_prepend(str(folder))
        env = get_task(TASK).make_env()
        settings = dict(num_envs=16, num_steps=32, minibatch_size=256, num_epochs=1, progress=False)
        model = purehr.train(env, "ppo", 1024, network="my_networks.py:deepsets", **settings)
        observations, _ = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(7), 8))
        np.savez(folder / "observations.npz", **{name: np.asarray(leaf) for name, leaf in observations.items()})
        model.save(folder / "model")
    return np.asarray(model.predict(observations)).tolist()


def test_the_checkpoint_and_a_saved_model_restore_in_a_fresh_process_elsewhere(runs, folder, seed_api_model):
    """From another directory than the run's (its network file named relative to the run's):
    the checkpoint evaluates to the logged numbers, the seed API's saved model acts as trained."""
    whole, _ = runs
    last = _rows(whole)[-1]
    elsewhere = folder / "elsewhere"
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(REPO)]))  # the task's module
    restored = subprocess.run(
        [sys.executable, "-c", RESTORE_AND_EVALUATE, str(whole), TASK, str(folder / "model"), "../observations.npz"],
        cwd=elsewhere,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert restored.returncode == 0, restored.stderr[-3000:]
    assert json.loads(restored.stdout.splitlines()[-1]) == seed_api_model
    assert len(set(seed_api_model)) > 1, seed_api_model  # the observations tell actions apart
    saved = json.loads((folder / "model" / "model.json").read_text())["network"]
    assert saved["file"] == str((folder / "my_networks.py").resolve())
    assert saved["parameter_shapes"]["['params']['policy_head']['kernel']"] == [9 * 16, 9]
    again = json.loads(restored.stdout.splitlines()[-2])
    assert again["steps"] == 4096
    assert again["metrics"]["episode_length"] == last["eval_episode_length"]
    np.testing.assert_allclose(again["metrics"]["return_mean"], last["eval_return_mean"], rtol=1e-6)


def test_a_user_network_exports_and_acts_as_in_jax(runs, folder, monkeypatch):
    """Issue 66 item 4 with issue 65's network: the user's DeepSets (``jnp.stack`` inside, a
    primitive the pinned converter has no rule for) exports as ONNX and as a jax.export program,
    its observation's fields as inputs, and both act as the JAX policy did."""
    from purehr import export

    whole, _ = runs
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    result = export(whole, TASK, 0, "latest", out=folder / "exported", formats=("onnx", "jax"))
    assert [spec["name"] for spec in result.contract["inputs"]] == ["action_mask", "prizes"]
    for name in ("onnx", "jax"):
        assert result.parity[name]["action_agreement"] == 1.0 and result.parity[name]["max_abs_error"] <= 1e-4
    assert result.contract["checkpoint"]["steps"] == 4096


def _counter_torso():
    """A recurrent torso without parameters: the carry counts the steps since the episode began,
    and the features are the count (so a policy head of ones reads it back)."""
    import flax.linen as nn

    class CountingTorso(nn.Module):
        def initial_carry(self):
            return jnp.zeros((1,), jnp.float32)

        def __call__(self, carry, observation):
            carry = carry + 1.0
            return carry, carry

    return CountingTorso()


def test_a_recurrent_torso_resets_its_carry_where_an_episode_starts():
    space = spaces.Box(0.0, 1.0, (2,))
    network = RecurrentActorCritic(None, None, 1, False, heads=True, torso=StructuredInput(_counter_torso(), space))
    core = RecurrentCore(network, num_envs=2, num_steps=5, num_minibatches=1)
    params = core.init_params(jax.random.PRNGKey(0), 2)
    params = jax.tree.map(jnp.ones_like, params)  # policy head: output = count + 1
    start = jnp.asarray([[False, False, True, False, False], [True, False, False, True, True]])
    sequences = Sequences(jnp.asarray([[5.0], [7.0]]), jnp.zeros((2, 5, 2)), start)
    actor_output, _, _ = core.apply(params, sequences)
    # env 0 continues from 5: 6, 7, then a new episode: 1, 2, 3; env 1 starts over at 0, 3 and 4
    np.testing.assert_array_equal(actor_output[..., 0] - 1.0, [[6, 7, 1, 2, 3], [1, 2, 3, 1, 1]])
    # the rollout's step: the carry is reset where ``start`` is set, kept elsewhere
    outputs = core.step(
        params, (jnp.asarray([[5.0], [7.0]]), jnp.asarray([True, False])), jnp.zeros((2, 2)), jnp.zeros((2, 2))
    )
    np.testing.assert_array_equal(outputs.hidden[:, 0], [1.0, 8.0])
    assert core.initial_carry()[0].shape == (2, 1) and bool(core.initial_carry()[1].all())


def test_unflatten_gives_each_leaf_its_shape_and_dtype():
    space = spaces.Dict({"board": spaces.Box(0.0, 1.0, (2, 3)), "action_mask": spaces.Box(0, 1, (4,), jnp.bool_)})
    observation = {"board": jnp.arange(6.0).reshape(2, 3), "action_mask": jnp.asarray([True, False, True, True])}
    back = unflatten(flatten_observation(observation)[None], space)
    np.testing.assert_array_equal(back["board"][0], observation["board"])
    assert back["action_mask"].dtype == jnp.bool_ and back["action_mask"][0].tolist() == [True, False, True, True]


@pytest.mark.parametrize(
    "config, task",
    [
        (PPOConfig(network="my_networks.py:picture"), TASK),
        (PQNConfig(network="my_networks.py:picture"), TASK),
        (SACConfig(network="my_networks.py:picture"), "gymnax:Pendulum-v1"),
    ],
    ids=["ppo", "pqn", "sac"],
)
def test_a_network_that_does_not_fit_is_refused_before_compiling_naming_the_shapes(config, task, folder, monkeypatch):
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    env = get_task(task).make_env()
    compiled = []
    monkeypatch.setattr(jax.stages.Lowered, "compile", lambda *a, **k: compiled.append(a))
    with pytest.raises(ValueError) as refused:
        make_algorithm(config, env)
    message = str(refused.value)
    shapes = "{'action_mask': (9,), 'prizes': (9,)}" if task == TASK else "observation (3,)"
    assert "my_networks.py:picture" in message and "does not fit" in message and shapes in message, message
    assert "features [N, F]" in message and not compiled


def test_a_network_spec_of_another_form_is_refused_by_the_config():
    for bad in ("deepsets", "my networks:deepsets", 3):
        with pytest.raises(ValueError, match="network="):
            PPOConfig(network=bad)
    with pytest.raises(ValueError, match="policy='mlp'"):
        PPOConfig(network="a.b:c", policy="gru")


def _examples():
    """examples/my_networks.py, imported as the engine imports a network file (flax's dataclasses
    need the module in ``sys.modules``)."""
    from purehr.engine.user_network import load_network

    return sys.modules[load_network(f"{REPO}/examples/my_networks.py:deepsets").factory.__module__]


def test_the_examples_deepsets_is_permutation_equivariant(folder, monkeypatch):
    """examples/my_networks.py's DeepSets: permuting the cells permutes the logits, keeps the value."""
    monkeypatch.syspath_prepend(str(folder))
    env = get_task(TASK).make_env()
    network = _examples().deepsets(env.observation_space(env.default_params), env.action_space(env.default_params))
    observation, _ = env.reset(jax.random.PRNGKey(3))
    batch = jax.tree.map(lambda x: x[None], observation)
    params = network.init(jax.random.PRNGKey(0), batch)
    order = jnp.asarray([4, 0, 8, 2, 6, 1, 7, 3, 5])
    logits, value = network.apply(params, batch)
    permuted_logits, permuted_value = network.apply(params, jax.tree.map(lambda x: x[:, order], batch))
    np.testing.assert_allclose(permuted_logits, logits[:, order], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(permuted_value, value, rtol=1e-5, atol=1e-6)
    assert logits.shape == (1, 9) and value.shape == (1,)


@pytest.mark.parametrize(
    "task, config, recurrent",
    [
        ("gymnax:Breakout-MinAtar", PPOConfig(network=f"{REPO}/examples/my_networks.py:cnn"), False),
        ("gymnax:Breakout-MinAtar", PQNConfig(network=f"{REPO}/examples/my_networks.py:cnn_wide"), False),
        (
            "gymnax:MemoryChain-bsuite",
            PPOConfig(network=f"{REPO}/examples/my_networks.py:lstm", num_envs=8, minibatch_size=512),
            True,
        ),
        ("hrv", PPOConfig(network=f"{REPO}/examples/my_networks.py:hrv_attention"), False),
    ],
    ids=["cnn-ppo", "cnn_wide-pqn", "lstm-ppo", "hrv_attention-ppo"],
)
def test_the_examples_networks_fit_their_tasks(task, config, recurrent):
    """Each example network builds against its task (traced with the task's shapes; a misfit raises)."""
    algorithm = make_algorithm(config, get_task(task).make_env())
    assert algorithm.recurrent == recurrent


def test_a_sweep_trains_a_user_network_and_records_it(folder, monkeypatch):
    """``purehr sweep --network`` is a shape choice (one compiled group per network); the group
    records the network it trained (file, digest, one run's parameter shapes)."""
    from purehr.cli import sweep as sweep_cli
    from purehr.experiments.sweep import train_group

    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    parser = sweep_cli.build_parser()
    argv = ["--task", TASK, "--network", "my_networks.py:deepsets", "--learning-rate", "1e-3", "3e-3"]
    args = parser.parse_args([*argv, "--out", str(folder / "sweep"), "--steps", "512", "--num-envs", "16"])
    _, axes, _, base, *_ = sweep_cli.checked_plan(parser, args)
    assert base.network == "my_networks.py:deepsets" and axes == {"learning_rate": (1e-3, 3e-3)}
    config = base.replace(num_steps=32, minibatch_size=256, num_epochs=1)
    group = train_group(config, get_task(TASK).make_env(), axes, [0])
    assert group.network["file"] == str((folder / "my_networks.py").resolve())
    assert group.network["parameter_shapes"]["['params']['policy_head']['kernel']"] == [9 * 16, 9]
    assert group.training_metrics["loss"].shape == (2, 1)  # two settings x one seed, one update each


EDITABLE = """
import flax.linen as nn


class Torso(nn.Module):
    @nn.compact
    def __call__(self, observation):
        return nn.relu(nn.Dense({width}{init})(observation["prizes"]))


def torso(observation_space, action_space):
    return Torso()
"""


def test_a_network_file_edited_between_two_builds_is_built_from_its_new_source(tmp_path, monkeypatch):
    """The same spec in one process, the file edited between: the second build has the new
    source's parameters (not the first's module, nor its compiled program) and its digest."""
    from purehr.engine.user_network import describe

    monkeypatch.syspath_prepend(str(REPO / "examples"))
    file = tmp_path / "editable.py"
    env, spec, shapes = get_task(TASK).make_env(), f"{file}:torso", []
    for width in (16, 8):
        file.write_text(EDITABLE.format(width=width, init=""))
        algorithm = make_algorithm(PPOConfig(network=spec), env)
        params = algorithm.network_params(jax.eval_shape(algorithm.init, jax.random.PRNGKey(0)))
        shapes.append((params["params"]["actor"]["torso"]["Dense_0"]["kernel"].shape, describe(spec)["source_digest"]))
    assert [shape for shape, _ in shapes] == [(9, 16), (9, 8)]
    assert shapes[0][1] != shapes[1][1]


def test_an_orthogonal_init_is_refused_before_anything_runs(tmp_path, monkeypatch):
    """Its QR under the seed vmap deadlocks on a CPU: found in the traced init, refused naming the fix."""
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    file = tmp_path / "orthogonal.py"
    file.write_text(EDITABLE.format(width=16, init=", kernel_init=nn.initializers.orthogonal()"))
    compiled = []
    monkeypatch.setattr(jax.stages.Lowered, "compile", lambda *a, **k: compiled.append(a))
    with pytest.raises(ValueError, match="orthogonal") as refused:
        make_algorithm(PPOConfig(network=f"{file}:torso"), get_task(TASK).make_env())
    assert "qr" in str(refused.value) and "lecun_normal" in str(refused.value) and not compiled


def test_a_dotted_module_spec_builds_and_records_what_its_file_spec_does(tmp_path, monkeypatch):
    """``module:factory`` imported from the Python path: the same parameters as the module's file
    named as a path, its file and source digest recorded; a module that does not import is
    refused naming it and the file form."""
    from purehr.engine.user_network import describe

    monkeypatch.syspath_prepend(str(REPO / "examples"))
    (tmp_path / "dotted_torso.py").write_text(EDITABLE.format(width=12, init=""))
    env, built = get_task(TASK).make_env(), {}
    for spec in ("dotted_torso:torso", f"{tmp_path / 'dotted_torso.py'}:torso"):
        with monkeypatch.context() as patch:
            patch.syspath_prepend(str(tmp_path))
            algorithm = make_algorithm(PPOConfig(network=spec), env)
            params = algorithm.network_params(algorithm.init(jax.random.PRNGKey(3)))
            built[spec] = (jax.tree.map(np.asarray, params), describe(spec))
    (dotted_params, dotted), (file_params, by_file) = built.values()
    assert jax.tree.structure(dotted_params) == jax.tree.structure(file_params)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(dotted_params), jax.tree.leaves(file_params)))
    assert dotted_params["params"]["actor"]["torso"]["Dense_0"]["kernel"].shape == (9, 12)
    assert dotted["module"] == "dotted_torso" and dotted["file"] == by_file["file"]
    assert dotted["source_digest"] == by_file["source_digest"]
    with pytest.raises(ValueError, match="network module 'absent_torso' does not import.*path/to/file.py:factory"):
        make_algorithm(PPOConfig(network="absent_torso:torso"), env)


OFF_POLICY = [f"{TASK}@pqn", "gymnax:Pendulum-v1@sac"]
OFF_POLICY_FILE = f"""
seeds = [0]
steps = 2048
checkpoint_interval = 1024
eval_episodes = 8
quick_eval_episodes = 8
[task."{TASK}@pqn"]
num_envs = 8
num_steps = 16
minibatch_size = 64
[task."gymnax:Pendulum-v1@sac"]
num_envs = 4
num_steps = 8
learning_starts = 512
gradient_steps = 4
sample_size = 64
buffer_size = 4096
"""


def _torso(params) -> tuple[list, list]:
    """The leaves under a ``torso`` scope, and the kernels of the user's ``Flat`` among them."""
    leaves = [
        (jax.tree_util.keystr(path), np.asarray(leaf)) for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]
    ]
    under = [leaf for path, leaf in leaves if "['torso']" in path]
    return under, [leaf for path, leaf in leaves if path.endswith("['torso']['Dense_0']['kernel']")]


def test_pqn_and_sac_train_a_user_torso_through_the_flags_a_config_file_and_the_seed_api(folder, tmp_path):
    """PQN on the masked game beside SAC on Pendulum, one user torso: named by ``--network``, then
    by the config file's ``network`` key (the same run: equal checkpoints); the manifest records
    it, each trained parameter tree holds it (its 16-wide kernel over the observation's 18 or 3
    values), moved from its initial value; ``purehr.train`` trains both algorithms with it, and
    each saved model loads and acts as the trained one."""
    import purehr
    from purehr.run import restore

    script = _script()
    config = tmp_path / "off_policy.toml"
    config.write_text(OFF_POLICY_FILE)
    with_network = tmp_path / "with_network.toml"
    with_network.write_text('network = "my_networks.py:flat"\n' + OFF_POLICY_FILE)
    flags = ["--tasks", *OFF_POLICY, "--no-render", "--no-progress"]
    observation_sizes = {OFF_POLICY[0]: 18, OFF_POLICY[1]: 3}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.syspath_prepend(str(folder))
        runs = tmp_path / "by_flag", tmp_path / "by_file"
        network_flag = ["--network", "my_networks.py:flat"]
        assert script.main([*flags, "--config", str(config), *network_flag, "--run-dir", str(runs[0])]) == 0
        assert script.main([*flags, "--config", str(with_network), "--run-dir", str(runs[1])]) == 0
        manifest = json.loads((runs[0] / "manifest.json").read_text())
        for entry in OFF_POLICY:
            digests = [
                [row["state_digest"] for row in read_checkpoint_rows(run / entry / "seed_0" / "checkpoints.csv")]
                for run in runs
            ]
            assert len(digests[0]) == 3 and digests[0] == digests[1], entry
            assert manifest["configs"][entry]["network"] == "my_networks.py:flat"
            assert manifest["networks"][entry]["factory"] == "flat"
            first, last = restore(runs[0], entry, 0, 0), restore(runs[0], entry, 0, "latest")
            (before, kernels), (after, _) = _torso(first.params), _torso(last.params)
            assert last.steps == 2048 and kernels and all(k.shape == (observation_sizes[entry], 16) for k in kernels)
            assert any(not np.array_equal(a, b) for a, b in zip(before, after)), entry  # trained
        sections = tomllib.loads(OFF_POLICY_FILE)["task"]  # the same sizes, by name
        for entry in OFF_POLICY:
            task, algorithm = entry.rsplit("@", 1)
            env = get_task(task).make_env()
            model = purehr.train(env, algorithm, 2048, network="my_networks.py:flat", progress=False, **sections[entry])
            kernels = _torso(model.params)[1]
            assert kernels and all(k.shape == (observation_sizes[entry], 16) for k in kernels), algorithm
            observations, _ = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(5), 6))
            model.save(tmp_path / algorithm)
            loaded = purehr.Model.load(tmp_path / algorithm)  # a task-built environment: rebuilt from model.json
            np.testing.assert_array_equal(
                np.asarray(loaded.predict(observations)), np.asarray(model.predict(observations))
            )
