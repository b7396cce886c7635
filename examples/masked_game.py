"""A small game with a legal-action mask: how an environment tells purehr which actions are legal.

The game: ``cells`` cells each hold a prize in [0, 1); at reset ``legal`` of them are open.
Each step the agent picks a cell (a ``Discrete(cells)`` action): an open cell pays its prize
and closes; a closed one is an illegal move (reward -1, reported as ``invalid_action``). The
episode ends after ``picks`` picks. Picking the best open cells is what a good player does;
the floor picks uniformly among the open ones ("random-among-legal").

The mask: the observation is a ``spaces.Dict`` with an ``"action_mask"`` entry, a Box of 0/1
of the action space's width (docs/environments.md, "Legal actions"). PPO's policy sets the
logits of closed cells to -1e9 (sampling, log-prob, entropy and the deterministic mode; in
training and in every evaluation), and the random floor draws among the open cells, so
neither ever makes an illegal move here. Train it from the folder that holds this file::

    /path/to/purehr/.venv/bin/python /path/to/purehr/scripts/train_all_seeds.py --tasks masked_game:make_env \
        --steps 16384 --seeds 0 1 --no-render
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from purehr import PPOConfig, ProtocolSettings
from purehr.envs import spaces
from purehr.envs.base import Environment
from purehr.types import StepResult


@struct.dataclass
class GameState:
    prizes: jax.Array  # float32 [cells]
    open: jax.Array  # bool [cells]: the legal moves
    time: jax.Array  # int32 []: picks made


@struct.dataclass
class GameParams:
    cells: int = struct.field(pytree_node=False, default=9)
    legal: int = struct.field(pytree_node=False, default=5)  # cells open at reset
    picks: int = struct.field(pytree_node=False, default=3)  # the episode's length


class PickBestPrizes(Environment[GameState, GameParams]):
    """Pick the best open cells; a closed cell is illegal."""

    name = "pick_best_prizes"
    defines_success = False

    def __init__(self, **param_values: Any):
        params = GameParams(**param_values)
        if not 0 < params.picks <= params.legal <= params.cells:
            raise ValueError(f"PickBestPrizes: {params}; expected 0 < picks <= legal <= cells")
        self._params = params

    @property
    def default_params(self) -> GameParams:
        return self._params

    def reset(self, key: jax.Array, params: GameParams | None = None):
        params = self._params if params is None else params
        prize_key, open_key = jax.random.split(key)
        prizes = jax.random.uniform(prize_key, (params.cells,), jnp.float32)
        order = jax.random.permutation(open_key, params.cells)
        open_cells = jnp.zeros((params.cells,), bool).at[order[: params.legal]].set(True)
        state = GameState(prizes, open_cells, jnp.int32(0))
        return self._observation(state), state

    def step(self, key: jax.Array, state: GameState, action: jax.Array, params: GameParams | None = None) -> StepResult:
        params = self._params if params is None else params
        cell = jnp.clip(jnp.asarray(action, jnp.int32), 0, params.cells - 1)
        legal = state.open[cell]
        reward = jnp.where(legal, state.prizes[cell], -1.0).astype(jnp.float32)
        next_state = GameState(state.prizes, state.open.at[cell].set(False), state.time + 1)
        terminated = next_state.time >= params.picks
        info = {"success": jnp.bool_(False), "invalid_action": jnp.logical_not(legal)}
        return self._observation(next_state), next_state, reward, terminated, jnp.bool_(False), info

    def _observation(self, state: GameState) -> dict[str, jax.Array]:
        """The prizes and, under ``"action_mask"``, which cells are open (1.0) or closed (0.0)."""
        return {"action_mask": state.open.astype(jnp.float32), "prizes": state.prizes}

    def observation_space(self, params: GameParams | None = None) -> spaces.Dict:
        cells = (self._params if params is None else params).cells
        return spaces.Dict({"action_mask": spaces.Box(0.0, 1.0, (cells,)), "prizes": spaces.Box(0.0, 1.0, (cells,))})

    def action_space(self, params: GameParams | None = None) -> spaces.Discrete:
        return spaces.Discrete((self._params if params is None else params).cells)

    def max_episode_steps(self, params: GameParams | None = None) -> int:
        return int((self._params if params is None else params).picks)


def make_env(**kwargs: Any) -> PickBestPrizes:
    """The factory ``--tasks masked_game:make_env`` names."""
    return PickBestPrizes(**kwargs)


PPO_CONFIG = PPOConfig(
    total_timesteps=16_384,  # 32 updates of 16 environments x 32 steps
    num_envs=16,
    num_steps=32,
    num_epochs=4,
    minibatch_size=128,
    learning_rate=3e-3,
    gamma=0.9,
    ent_coef=0.01,
    actor_hidden=(32, 32),
    critic_hidden=(32, 32),
)
"""A small budget: the game is small."""

PROTOCOL = ProtocolSettings(checkpoint_interval=4_096, eval_episodes=200, quick_eval_episodes=200)
"""How often a run checkpoints and how many held-out episodes judge it, whichever algorithm
trains the game (``--tasks masked_game:make_env@pqn`` too); a flag overrides each."""
