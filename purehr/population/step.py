"""One task's PBT step as the checkpoint hook calls it inside the scan: fitness and record at
every checkpoint, the exploit/explore step where it is due. Its randomness is a key of its own,
made from the run's first seed and the task's name and folded with the update counter, so the
step at update u draws the same numbers in an uninterrupted run and in a resumed one."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from purehr.population.exploit_explore import (
    choose_parents,
    exploit_and_explore,
    fitness,
    pbt_record,
    rank_worst_first,
)
from purehr.population.settings import PBTSettings

PBT_STREAM = 0x504254  # "PBT": the PBT key is this fold of the first seed's key


def population_key(first_seed: int, task: str) -> jax.Array:
    """The raw key [2] uint32 of ``task``'s PBT draws in a run whose first seed is ``first_seed``."""
    key = jax.random.fold_in(jax.random.PRNGKey(first_seed), PBT_STREAM)
    return jax.random.fold_in(key, zlib.crc32(task.encode()) & 0x7FFFFFFF)


@dataclass(frozen=True)
class PopulationStep:
    """``step(runner, evaluation, diverged_at) -> (runner, record)`` for one task's population.

    ``fire_at``: the updates after which the exploit/explore step runs (the checkpoint updates
    of every ``interval``-th target, never the first or the last); ``rule``: the fitness rule."""

    settings: PBTSettings
    rule: str
    fire_at: tuple[int, ...]
    first_seed: int
    task: str

    def identity(self) -> str:
        """What the compiled program depends on (programs are kept per identity)."""
        return json.dumps([self.settings.to_dict(), self.rule, self.fire_at, self.first_seed, self.task])

    def __call__(
        self,
        runner,
        evaluation: dict[str, jax.Array],
        diverged_at: jax.Array,
        fields: tuple[str, ...] = ("params", "opt_state"),
    ):
        """Traced. ``runner``: the population's state [N, ...] after this checkpoint's update;
        ``evaluation``: its held-out metrics [N]; ``diverged_at``: int32 [N], each member's first
        diverged update (0: healthy), which the record keeps; ``fields``: what a member copies
        from its parent, the algorithm's ``population_fields``."""
        update = runner.update_index[0]
        primary, tie_break = fitness(evaluation, diverged_at > 0, self.rule)
        population = primary.shape[0]
        selected = self.settings.selected(population)

        def exploit(runner):
            key = jax.random.fold_in(population_key(self.first_seed, self.task), update)
            parent_key, explore_key = jax.random.split(key)
            parent = choose_parents(rank_worst_first(primary, tie_break), parent_key, selected)
            return exploit_and_explore(runner, parent, explore_key, self.settings, fields), parent

        def keep(runner):
            return runner, jnp.arange(population, dtype=jnp.int32)

        due = jnp.isin(update, jnp.asarray(self.fire_at, jnp.int32))
        runner, parent = jax.lax.cond(due, exploit, keep, runner)
        return runner, pbt_record(runner, primary, parent, diverged_at, self.settings)
