"""Run a pgx game (``pgx.make``: board games and puzzles in JAX) through purehr's interface:
the suite ``pgx:<name>``, the first of purehr's suites with a legal-action mask.

What pgx 2.6.0 does and the adapter keeps or changes:
- ``env.init(key)`` and ``env.step(state, action, key)`` return a ``State`` holding the
  ``observation`` (of the player to move), ``current_player``, ``rewards`` (one per player),
  ``terminated`` and ``legal_action_mask``. An illegal move ends the game with -1 for the
  mover (pgx's penalty); here it is also flagged ``info["invalid_action"]``.
- **The mask** is passed through as the observation's ``"action_mask"`` entry (float32 0/1,
  docs/environments.md "Legal actions"), beside the board under ``"board"``: PPO's policy and
  the random floor then only choose legal moves.
- **One agent**: a two-player game is played against a uniformly random legal opponent (an
  opponent inside ``step``: the agent moves, then the opponent moves until it is the agent's
  turn again or the game is over; pgx's player ids are redrawn at every ``init``, so the agent
  moves first in about half the games). The reward is the agent's own (``rewards[agent]``),
  summed over its move and the opponent's replies: in tic-tac-toe +1 a win, -1 a loss, 0 a
  draw. ``info["success"]`` is a win (a terminated game with a positive reward). A one-player
  game (``2048``) is the agent's alone; it defines no success.
- **A time limit** of ``max_steps`` agent moves (``DEFAULT_MAX_STEPS`` per game, else 1,000)
  truncates (PPO bootstraps it); it sizes every evaluation's scan, so a short game keeps it
  short.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from purehr.envs import spaces
from purehr.envs.base import Environment
from purehr.types import StepResult

MASK_KEY = "action_mask"
BOARD_KEY = "board"
DEFAULT_MAX_STEPS = {"tic_tac_toe": 5, "connect_four": 21}
"""The most moves the agent can make in a game (9 and 42 cells, shared with the opponent)."""
OTHER_MAX_STEPS = 1000
ALTERNATING = frozenset(
    ("tic_tac_toe", "connect_four", "othello", "hex", "go_9x9", "go_19x19", "chess", "gardner_chess", "shogi")
)
"""Games whose players strictly take turns (a pass is a move): the opponent replies once, a
select rather than a loop (tic-tac-toe's step compiles in 1.6 s instead of 2.3 s, XLA level 1,
2-core CPU under load); the others (backgammon's several moves in a turn, the poker games)
loop until it is the agent's turn."""
NOT_OFFERED = ("minatar-", "sparrow_mahjong")
"""pgx's MinAtar games (they import the ``pgx-minatar`` package) and its three-player game."""


@struct.dataclass
class PgxParams:
    max_steps: int = struct.field(pytree_node=False, default=OTHER_MAX_STEPS)


@struct.dataclass
class PgxState:
    game: Any  # pgx.State
    agent: jax.Array  # int32 []: the agent's player id in this game
    steps: jax.Array  # int32 []: the agent's moves so far


def _pgx():
    try:
        import pgx
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError("the pgx suite needs pgx: pip install 'purehr[pgx]'") from error
    return pgx


def registered_names() -> list[str]:
    """pgx's games but those of ``NOT_OFFERED``."""
    return sorted(name for name in _pgx().available_envs() if not name.startswith(NOT_OFFERED))


def random_legal_action(key: jax.Array, legal: jax.Array) -> jax.Array:
    """A move drawn uniformly among ``legal`` (bool [actions]); int32 []."""
    return jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf)).astype(jnp.int32)


class PgxEnv(Environment):
    """``pgx.make(name)`` for one agent: against a random legal opponent where it has two players."""

    def __init__(self, name: str, *, max_steps: int | None = None):
        pgx = _pgx()
        names = registered_names()
        if name not in names:
            raise ValueError(f"unknown pgx environment {name!r}; expected one of {names}")
        max_steps = DEFAULT_MAX_STEPS.get(name, OTHER_MAX_STEPS) if max_steps is None else max_steps
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps <= 0:
            raise ValueError(f"pgx environment {name!r}: max_steps={max_steps!r}; expected a positive integer")
        self._env = pgx.make(name)
        if self._env.num_players not in (1, 2):
            raise ValueError(f"pgx environment {name!r} has {self._env.num_players} players; expected 1 or 2")
        self.name = name
        self.task_name = f"pgx:{name}"  # the task it belongs to (purehr.tasks.task_of_env)
        self.defines_success = self._env.num_players == 2
        self.make_kwargs = {"max_steps": int(max_steps)}
        """What rebuilds this environment: ``PgxEnv(name, **make_kwargs)`` (the manifest's record)."""
        self._params = PgxParams(max_steps=int(max_steps))
        self._board_shape = tuple(int(n) for n in self._env.observation_shape)

    @property
    def default_params(self) -> PgxParams:
        return self._params

    @property
    def pgx_env(self):
        return self._env

    def _observation(self, game) -> dict[str, jax.Array]:
        return {
            MASK_KEY: jnp.asarray(game.legal_action_mask, jnp.float32),
            BOARD_KEY: jnp.asarray(game.observation, jnp.float32),
        }

    def _opponent_moves(self, key, game, agent):
        """The random legal opponent, until it is the agent's turn or the game is over: the
        game and the agent's reward over those moves (float32 [])."""
        if self._env.num_players == 1:
            return game, jnp.float32(0.0)

        def opponent_to_move(game):
            return jnp.logical_and(jnp.logical_not(game.terminated), game.current_player != agent)

        def move(game, key):
            choice_key, step_key = jax.random.split(key)
            return self._env.step(game, random_legal_action(choice_key, game.legal_action_mask), step_key)

        if self.name in ALTERNATING:  # one reply at most: a select, not a loop (compiles faster)
            replies, replied = opponent_to_move(game), move(game, key)
            game = jax.tree.map(lambda new, old: jnp.where(replies, new, old), replied, game)
            return game, jnp.where(replies, replied.rewards[agent], 0.0).astype(jnp.float32)

        def body(carry):
            game, reward, key = carry
            key, move_key = jax.random.split(key)
            game = move(game, move_key)
            return game, reward + game.rewards[agent], key

        start = (game, jnp.float32(0.0), key)
        game, reward, _ = jax.lax.while_loop(lambda carry: opponent_to_move(carry[0]), body, start)
        return game, reward

    def reset(self, key, params: PgxParams | None = None):
        init_key, opponent_key = jax.random.split(key)
        game = self._env.init(init_key)
        agent = jnp.int32(0)  # pgx draws which player id moves first at init
        game, _ = self._opponent_moves(opponent_key, game, agent)  # rewards 0 before the agent's first move
        return self._observation(game), PgxState(game, agent, jnp.int32(0))

    def step(self, key, state: PgxState, action, params: PgxParams | None = None) -> StepResult:
        params = self._params if params is None else params
        move_key, opponent_key = jax.random.split(key)
        action = jnp.asarray(action, jnp.int32)
        illegal = jnp.logical_not(state.game.legal_action_mask[action])
        game = self._env.step(state.game, action, move_key)
        own = game.rewards[state.agent]  # the agent's move (a win, or pgx's -1 for an illegal one)
        game, replies = self._opponent_moves(opponent_key, game, state.agent)
        reward = jnp.asarray(own + replies, jnp.float32)
        steps = state.steps + 1
        terminated = jnp.asarray(game.terminated, bool)
        truncated = jnp.logical_and(steps >= params.max_steps, jnp.logical_not(terminated))
        info = {
            "success": jnp.logical_and(terminated, reward > 0.0) if self.defines_success else jnp.bool_(False),
            "invalid_action": illegal,
        }
        return self._observation(game), PgxState(game, state.agent, steps), reward, terminated, truncated, info

    def observation_space(self, params=None) -> spaces.Dict:
        return spaces.Dict(
            {
                MASK_KEY: spaces.Box(0.0, 1.0, (int(self._env.num_actions),)),
                BOARD_KEY: spaces.Box(-jnp.inf, jnp.inf, self._board_shape),
            }
        )

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(int(self._env.num_actions))

    def max_episode_steps(self, params: PgxParams | None = None) -> int:
        return int((self._params if params is None else params).max_steps)
