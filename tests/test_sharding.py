"""Past one device: training sharded over 4 forced host devices equals one device.

The sharded runs happen in a subprocess, because ``--xla_force_host_platform_device_count``
must be set before jax is imported."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from purehr.distributed import make_mesh, mesh_shape, select_devices

SCRIPT = textwrap.dedent("""
    import json, os, sys, tempfile
    import jax, numpy as np
    from purehr.envs import HRWritingEnv
    from purehr.ppo.config import PPOConfig
    from purehr.ppo.train import keys_for_seeds, make_train
    from purehr.distributed import make_sharded_train
    from purehr.run.protocol import train_all_seeds

    assert len(jax.devices()) == 4, jax.devices()
    out = {}
    config = PPOConfig(total_timesteps=4 * 16 * 4, num_envs=4, num_steps=16, minibatch_size=32, num_epochs=2,
                       actor_hidden=(16,), critic_hidden=(16,), gamma=0.99, activation="relu",
                       checkpoint_interval=4 * 16 * 2, eval_episodes=4)
    env = HRWritingEnv(hrv_dim=8)                          # the protocol's hrv task
    keys = keys_for_seeds([0, 1])                          # 2 seeds x 4 envs on 4 devices: mesh 2 x 2
    seen = []
    one = make_train(config, env)(keys)
    sharded = make_sharded_train(config, env, callback=lambda m: seen.append(m["loss"].shape))(keys)
    out["make_train"] = {
        "max_abs_diff": max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                            for a, b in zip(jax.tree.leaves(one.runner.params), jax.tree.leaves(sharded.runner.params))),
        "params_close": all(np.allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
                            for a, b in zip(jax.tree.leaves(one.runner.params), jax.tree.leaves(sharded.runner.params))),
        "metrics_close": bool(np.allclose(np.asarray(one.metrics["loss"]), np.asarray(sharded.metrics["loss"]),
                                          rtol=1e-4, atol=1e-5)),
        "param_devices": len(jax.tree.leaves(sharded.runner.params)[0].sharding.device_set),
        "env_spec": str(jax.tree.leaves(sharded.runner.env_state)[0].sharding.spec),
        "callback_shapes": [list(s) for s in seen],
    }
    import time
    started = time.perf_counter()
    root = os.path.join(tempfile.mkdtemp(), "run")
    summary = train_all_seeds(root, tasks=["hrv"], seeds=[0, 1], configs={"hrv": config}, progress=False,
                              render=False, devices=4)
    rows = [open(os.path.join(root, "hrv", f"seed_{s}", "checkpoints.csv")).read().count(chr(10)) - 1
            for s in (0, 1)]
    final = summary.final_runners["hrv"]
    out["protocol"] = {
        "checkpoint_rows": rows, "mesh": json.load(open(os.path.join(root, "manifest.json")))["mesh"],
        "params_close": all(np.allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
                            for a, b in zip(jax.tree.leaves(one.runner.params), jax.tree.leaves(final.params))),
        "seconds": time.perf_counter() - started}
    print("RESULT " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def sharded_results():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    completed = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]
    line = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def test_make_train_sharded_over_4_devices_equals_one_device(sharded_results):
    result = sharded_results["make_train"]
    assert result["param_devices"] == 4                 # really spread over the mesh
    assert result["env_spec"] in ("P('seeds', 'envs')", "PartitionSpec('seeds', 'envs')")
    assert result["params_close"], result["max_abs_diff"]
    assert result["metrics_close"]
    assert result["callback_shapes"] == [[2]] * 4       # host callbacks get the whole seed axis


def test_protocol_runner_sharded_equals_one_device(sharded_results):
    """The multi-task runner over 4 devices: its io_callbacks still get every seed (checkpoint
    targets 0, 128, 256 written for both seeds) and its final parameters equal make_train's
    on one device for the same seeds."""
    protocol = sharded_results["protocol"]
    assert protocol["mesh"]["shape"] == {"seeds": 2, "envs": 2}
    assert protocol["checkpoint_rows"] == [3, 3]
    assert protocol["params_close"]


@pytest.mark.parametrize("seeds, envs, devices, expected", [
    (8, 8, 4, (4, 1)), (2, 8, 8, (2, 4)), (5, 8, 4, (1, 4)), (5, 8, 8, (1, 8)), (1, 1, 4, (1, 1)),
    (3, 4, 8, (3, 2)), (4, 16, 16, (4, 4))])
def test_mesh_shape_uses_most_devices_seed_axis_first(seeds, envs, devices, expected):
    assert mesh_shape(seeds, envs, devices) == expected


def test_device_selection_refuses_more_than_visible():
    with pytest.raises(ValueError, match="expected 1 to"):
        select_devices(len(select_devices()) + 1)
    mesh = make_mesh(3, 8, 1)
    assert dict(mesh.shape) == {"seeds": 1, "envs": 1}
    assert np.asarray(mesh.devices).size == 1
