"""pgx games as tasks: ``pgx:<name>`` (``pgx.available_envs()``), through the adapter of
``purehr.envs.pgx_adapter``: one agent against a uniformly random legal opponent, pgx's legal
moves passed through as the observation's ``"action_mask"`` entry, so PPO and the
random-among-legal floor choose legal moves only."""

from __future__ import annotations

from purehr.algorithms.registry import default_config
from purehr.envs.pgx_adapter import PgxEnv, registered_names
from purehr.protocol_settings import ProtocolSettings
from purehr.tasks.environment_task import adapter_task, package_versions
from purehr.tasks.task import Task

PACKAGE = "pgx"
PACKAGES = ("pgx",)
"""What the manifest's ``sources`` records the versions of."""
EXTRA = "pgx"
EXAMPLE = "tic_tac_toe"

TIC_TAC_TOE_PPO = default_config(
    "ppo",
    total_timesteps=100_000,
    num_envs=32,
    num_steps=16,
    num_epochs=4,
    minibatch_size=128,
    learning_rate=1e-3,
    anneal_lr=False,
    gamma=0.99,
    gae_lambda=0.95,
    ent_coef=0.01,
    actor_hidden=(64, 64),
    critic_hidden=(64, 64),
    activation="tanh",
)
"""PPO for tic-tac-toe against the random legal opponent: PureJaxRL's discrete settings (clip
0.2, 4 epochs, entropy 0.01, tanh MLP) with a larger constant learning rate and a batch of
32 games x 16 moves (a game is at most 5 of the agent's moves)."""
PGX_PROTOCOL = ProtocolSettings(checkpoint_interval=10_000, eval_episodes=200, quick_eval_episodes=200)
"""A game is short: 200 held-out games per checkpoint cost little and resolve a win rate to
about 0.03."""
DEFAULT_CONFIGS = {EXAMPLE: TIC_TAC_TOE_PPO}
"""Per game where measured; the others take the same (larger boards want larger budgets)."""


def environment_names() -> list[str]:
    """pgx's games (``ImportError`` without pgx: the registry names the pip command)."""
    return registered_names()


def suite_task(environment: str) -> Task:
    return adapter_task(
        "pgx", environment, PgxEnv, PACKAGES, DEFAULT_CONFIGS.get(environment, TIC_TAC_TOE_PPO), PGX_PROTOCOL
    )


def versions() -> dict[str, str]:
    return package_versions(PACKAGES)
