"""Every task and every seed in one compiled program.

    train_all(runners)                             one jax.jit
      per task: cond(update_index == 0) -> checkpoint the initial state (target 0)
      lax.scan over the longest task's updates     <- scan outside
        per task: cond(still has updates) -> vmap(update) over seeds   <- vmap inside
                  io_callback(log this update's metrics)
                  cond(update crossed a checkpoint target, or was the last)
                    -> held-out evaluation (full, with a showcase episode, at every
                       full_eval_interval-th target; quick between), vmapped over seeds, on device
                    -> io_callback(save every seed's full state)

Predicates come from the update counter alone, which is the same for every seed of a task,
so each ``cond`` stays a real branch rather than a ``select`` running both sides. A task
whose budget is spent stops updating while the others go on. Resuming is the same program
started from restored runners: a task restored at update k simply runs out of updates k
iterations early.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import jax
import jax.numpy as jnp
from jax.experimental import io_callback

from purehr.envs.base import Environment
from purehr.ppo.config import PPOConfig
from purehr.ppo.train import PPO, RunnerState
from purehr.run.tasks import Task


@dataclass(frozen=True)
class TaskSetup:
    task: Task
    env: Environment
    env_params: Any
    eval_env_params: Any
    config: PPOConfig
    ppo: PPO

    @property
    def name(self) -> str:
        return self.task.name

    def evaluate(self, network_params, num_episodes: int | None = None) -> dict[str, jax.Array]:
        policy = self.ppo.policy(network_params)
        episodes = self.config.eval_episodes if num_episodes is None else num_episodes
        metrics = self.task.heldout_evaluation(self.env, self.eval_env_params, policy, num_episodes=episodes)
        return dict(metrics, episodes=jnp.asarray(episodes, jnp.int32))

    def full_evaluation_due(self, update_index: jax.Array) -> jax.Array:
        """The initial state, every ``full_eval_interval``-th target and the last update get the
        full evaluation and a showcase; the targets between a quick one."""
        target_index = update_index * self.config.batch_size // self.config.checkpoint_interval
        return ((update_index == 0) | (update_index == self.ppo.num_updates)
                | (target_index % self.config.full_eval_interval == 0))

    def showcase(self, network_params) -> dict[str, jax.Array]:
        return self.task.record_showcase(self.env, self.eval_env_params, self.ppo.policy(network_params))

    def crossed_target(self, update_index: jax.Array) -> jax.Array:
        """True when the update that brought the count to ``update_index`` crossed a target
        (or was the last one): the first update at or beyond each target saves."""
        steps_after = update_index * self.config.batch_size
        steps_before = (update_index - 1) * self.config.batch_size
        interval = self.config.checkpoint_interval
        return (steps_after // interval > steps_before // interval) | (update_index == self.ppo.num_updates)


class HostHandlers(Protocol):
    def on_update(self, task: str, metrics: dict) -> None: ...
    def on_checkpoint(self, task: str, runner: RunnerState, evaluation: dict, showcase: dict | None) -> None: ...


def make_train_all(setups: list[TaskSetup], handlers: HostHandlers) -> Callable[[dict], dict]:
    """Returns ``train_all(runners) -> runners`` (runners: task name -> RunnerState with a
    leading seed axis), ready for ``jax.jit``."""
    longest = max(setup.ppo.num_updates for setup in setups)

    def checkpoint(setup: TaskSetup):
        def full(params):
            return jax.vmap(setup.evaluate)(params), jax.vmap(setup.showcase)(params), jnp.bool_(True)

        def quick(params):
            episodes = setup.config.quick_eval_episodes
            no_showcase = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                                       jax.eval_shape(jax.vmap(setup.showcase), params))
            return jax.vmap(lambda p: setup.evaluate(p, episodes))(params), no_showcase, jnp.bool_(False)

        def save(runner: RunnerState) -> None:
            if setup.config.full_eval_interval == 1:
                evaluation, showcase, recorded = full(runner.params)
            else:   # a real branch: the predicate comes from the update counter, the same for all seeds
                evaluation, showcase, recorded = jax.lax.cond(
                    setup.full_evaluation_due(runner.update_index[0]), full, quick, runner.params)
            io_callback(lambda r, e, s, has_showcase: handlers.on_checkpoint(
                setup.name, r, e, s if bool(has_showcase) else None), None,
                runner, evaluation, showcase, recorded, ordered=True)
        return save

    def skip(_):
        return None

    def update_task(setup: TaskSetup, runner: RunnerState) -> RunnerState:
        update_index = runner.update_index[0]
        has_updates = update_index < setup.ppo.num_updates

        def update_and_log(runner):
            runner, metrics = jax.vmap(setup.ppo.update)(runner)
            io_callback(lambda m: handlers.on_update(setup.name, m), None, metrics, ordered=True)
            return runner

        runner = jax.lax.cond(has_updates, update_and_log, lambda r: r, runner)
        due = has_updates & setup.crossed_target(runner.update_index[0])
        jax.lax.cond(due, checkpoint(setup), skip, runner)
        return runner

    def train_all(runners: dict[str, RunnerState]) -> dict[str, RunnerState]:
        for setup in setups:
            jax.lax.cond(runners[setup.name].update_index[0] == 0, checkpoint(setup), skip, runners[setup.name])

        def body(runners, _):
            return {setup.name: update_task(setup, runners[setup.name]) for setup in setups}, None

        runners, _ = jax.lax.scan(body, runners, None, length=longest)
        return runners

    return train_all
