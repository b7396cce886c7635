"""n-step soft targets from the replay buffer's rows: the critics' target sums the next n
rewards before it bootstraps, so credit for a slow build-up (the swing's energy, pumped over
hundreds of steps) travels n steps per backup instead of one.

    y = sum_{k<m} gamma^k r_{t+k} + gamma^m (1 - terminated_{t+m-1}) V(s'_{t+m-1}),
    V(s') = min_i Q'_i(s', a') - alpha log pi(a'|s'),  a' ~ pi(s')

with m <= n the window cut at the first episode end. As in most n-step SAC and DQN variants,
the intermediate actions are the behaviour policy's (no off-policy correction) and carry no
entropy bonus: a bias that shrinks as the buffer's policies approach the current one.

Where the windows come from: an update writes its [T, E] transitions time-major, so every
environment's transitions sit ``num_envs`` rows apart, across updates and the buffer's wrap
(``buffer.add``): the row after row r of the same environment is (r + E) mod capacity. The
window continues from one row to the next exactly where the episode did: the transition did
not terminate and the next row starts from the observation this one ended in (its
``next_observation``, stored before any auto-reset). After an episode end (a termination or a
truncation) the next row starts from a reset observation, so the window stops there and
bootstraps from the episode's own final observation (after a truncation) or not at all (after a
termination); a row whose successor is not written yet (the newest rows) holds an older
transition, which does not start where this one ended, so its window stops too. No field is
added to the buffer for it: its layout, and checkpoints written before, are unchanged.
(Exact float equality of two whole observations where the episode did not continue, a reset
landing bit for bit on the previous episode's final observation, would join two episodes'
windows; for a Markov observation without a time feature after a truncation that join is the
same bootstrap in expectation.)

Shapes: S sampled rows, n = ``n_step``, O observation size, A action dimensions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from purehr.algorithms.sac.loss import Transition


def window_rows(rows: jax.Array, n_step: int, num_envs: int, capacity: int) -> jax.Array:
    """The buffer rows [..., n] of each sampled row's window: row, row + E, ..., modulo the capacity."""
    offsets = jnp.arange(n_step, dtype=jnp.int32) * num_envs
    return (rows[..., None] + offsets) % capacity


def n_step_transitions(window: Transition, gamma: jax.Array) -> tuple[Transition, jax.Array]:
    """(Transitions [S] whose reward is the window's discounted sum, whose ``terminated`` and
    ``next_observation`` are the window's last transition's; the bootstrap's discount
    gamma^m [S]) from windows [S, n, ...] of consecutive rows of one environment each. A
    window stops after its first transition that terminated or whose next row does not start
    where it ended (an episode end, or a row not written yet)."""
    n_step = window.reward.shape[1]
    continues = jnp.logical_and(
        jnp.all(window.observation[:, 1:] == window.next_observation[:, :-1], axis=-1),
        jnp.logical_not(window.terminated[:, :-1]),
    )  # [S, n - 1]: the transition after k belongs to the window when k's episode went on
    links = jnp.concatenate([jnp.ones_like(continues[:, :1]), continues], axis=1).astype(jnp.int32)
    alive = jnp.cumprod(links, axis=1) > 0  # [S, n]: the first m transitions
    length = jnp.sum(alive, axis=1, dtype=jnp.int32)  # [S] m >= 1
    powers = gamma ** jnp.arange(n_step, dtype=jnp.float32)  # [n]
    reward = jnp.sum(jnp.where(alive, window.reward * powers, 0.0), axis=1)
    last = (length - 1)[:, None]
    next_observation = jnp.take_along_axis(window.next_observation, last[..., None], axis=1)[:, 0]
    terminated = jnp.take_along_axis(window.terminated, last, axis=1)[:, 0]
    first = Transition(window.observation[:, 0], window.action[:, 0], reward, terminated, next_observation)
    return first, gamma ** length.astype(jnp.float32)
