"""The reference points of every task: its baseline (structured controller, oracle) and its
floor policies (doing nothing, acting at random), evaluated on the held-out protocol PPO is
judged on, so a run's manifest says what its PPO policies must beat."""

from __future__ import annotations

from typing import Any

import jax

from purehr.run.runner import TaskSetup


def evaluate_baselines(setups: list[TaskSetup]) -> dict[str, Any]:
    """task -> {"name", "definition", "metrics", "floors": {floor name: metrics}}, every metric
    a float (the manifest's ``baselines``)."""
    baselines = {}
    for setup in setups:

        def heldout(policy):
            metrics = jax.jit(
                lambda: setup.task.heldout_evaluation(
                    setup.env, setup.eval_env_params, policy, num_episodes=setup.config.eval_episodes
                )
            )()
            return {k: float(v) for k, v in metrics.items()}

        baseline = setup.task.baseline
        baselines[setup.name] = {
            "name": baseline.name,
            "definition": baseline.definition,
            "metrics": heldout(baseline.make_policy(setup.env, setup.eval_env_params)),
            "floors": {
                floor.name: heldout(floor.make_policy(setup.env, setup.eval_env_params)) for floor in setup.task.floors
            },
        }
    return baselines
