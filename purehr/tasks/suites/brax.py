"""Brax environments as tasks: ``brax:<name>`` (``brax.envs``), through the adapter of
``purehr.envs.brax_adapter``; the physics backend is the ``backend`` keyword
(``--brax-backend``, or ``--env-arg brax:<name> backend=...``; recorded in the manifest).

The default backend (``purehr.envs.brax_adapter.DEFAULT_BACKEND``), positional: measured on the
2-core x86_64 CPU (64 environments x 1,000 random-action steps of inverted_pendulum, one
process, the backends interleaved, 5 rounds, the CPU shared with other jobs, load 5-9):
positional 41k steps/s (best; compile 32 s), generalized 43k (18 s), mjx 29k (31 s), spring 148k
(19 s). Positional and generalized are as fast within the noise; positional is the backend of
Brax's training notebook and of PureJaxRL's ``BraxGymnaxWrapper``, so the published figures are
for it. Spring is 3.5x faster but Brax's least realistic pipeline (joints and contacts as
springs); MJX works on a CPU but is the slowest here (it is MuJoCo's, and wants an accelerator),
though it is the one Brax still maintains (brax 0.14.2 warns that its own pipelines are no
longer actively maintained). Any of them is one keyword away.
"""

from __future__ import annotations

import math

from purehr.algorithms.registry import default_config
from purehr.envs.brax_adapter import BraxEnv, registered_names
from purehr.protocol_settings import ProtocolSettings
from purehr.tasks.environment_task import adapter_task, package_versions
from purehr.tasks.task import Task

PACKAGE = "brax"
PACKAGES = ("brax", "mujoco", "mujoco-mjx")
"""What the manifest's ``sources`` records the versions of."""
EXTRA = "brax"
EXAMPLE_ENVIRONMENT = "inverted_pendulum"

BRAX_INITIAL_LOG_STD = math.log(math.log1p(math.e) + 0.001)
"""Brax PPO's initial policy noise in purehr's terms: ``make_ppo_networks``' scalar std
parameter starts at 1.0 and ``NormalTanhDistribution`` reads it as softplus(1) + 0.001 = 1.314,
log 0.273."""

INVERTED_PENDULUM_DEFAULTS = default_config(
    "ppo",
    total_timesteps=200_000,
    num_envs=128,
    num_steps=80,
    minibatch_size=320,
    num_epochs=4,
    learning_rate=3e-4,
    anneal_lr=False,
    gamma=0.97,
    gae_lambda=0.95,
    clip_range=0.3,
    vf_coef=0.5,
    ent_coef=0.01,
    max_grad_norm=0.5,
    actor_hidden=(32, 32, 32, 32),
    critic_hidden=(256, 256, 256, 256, 256),
    activation="swish",
    log_std_init=BRAX_INITIAL_LOG_STD,
    normalize_observations=True,
)
"""Brax's published PPO settings for inverted_pendulum (the ``train_fn`` table of Brax's
``notebooks/training.ipynb``: num_envs 2048, unroll_length 5, batch_size 1024, num_minibatches
32, num_updates_per_batch 4, discounting 0.97, learning_rate 3e-4 constant, entropy_cost 1e-2,
normalize_observations, reward_scaling 10, 2M steps; with ``ppo.train``'s defaults clipping
epsilon 0.3, GAE lambda 0.95, value coefficient 0.5, and ``make_ppo_networks``' policy 4 x 32,
value 5 x 256, swish, tanh-squashed Gaussian with a state-independent std), mapped onto
purehr's fields and scaled to the 2-core CPU: each Brax update rolls every environment
batch_size * num_minibatches / num_envs = 16 unrolls of 5 = 80 steps and cuts the batch into 32
minibatches, so here num_steps 80, minibatch_size = 128 * 80 / 32; 128 environments instead of
2048 (16x smaller batches, 16x more updates per step), 200k steps instead of 2M
(both seeds of the measured run held 1,000, the most an episode pays, from 100k steps on). Not mapped:
``reward_scaling`` (``PPOConfig.reward_scaling`` exists, kept at 1 here so this task's runs
stay as measured; with separate actor and critic networks under Adam it mostly rescales the
value targets), Brax's GAE over each 5-step unroll (purehr's runs over the
80-step rollout) and its per-minibatch advantage normalisation; Brax clips no gradient, purehr
keeps its global-norm clip at 0.5."""

DEFAULT_CONFIGS = {EXAMPLE_ENVIRONMENT: INVERTED_PENDULUM_DEFAULTS}
"""Per environment where this module maps Brax's published settings; the others take PPO's
default for a continuous action (every Brax action is continuous: ``CONTINUOUS_DEFAULTS``)."""
BRAX_PROTOCOL = ProtocolSettings(eval_episodes=20, quick_eval_episodes=20)
"""Every Brax task's evaluation, kept cheap: a Brax episode is 1,000 steps."""


def environment_names() -> list[str]:
    """Brax's registered environments (``ImportError`` without brax: the registry names the pip command)."""
    return registered_names()


def suite_task(environment: str) -> Task:
    return adapter_task("brax", environment, BraxEnv, PACKAGES, DEFAULT_CONFIGS.get(environment), BRAX_PROTOCOL)


def versions() -> dict[str, str]:
    return package_versions(PACKAGES)
