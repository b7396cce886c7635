"""The greedy heuristic on examples/masked_game.py's held-out episodes (the user baseline of the
set-structured example): pick the open cell with the largest prize. Prints the protocol's
held-out metrics for it, on the same episodes a run's checkpoints are evaluated on.

    PYTHONPATH=.:examples python results/own_network/greedy.py [cells=32 legal=16 picks=8]
"""

import json
import sys

import jax
import jax.numpy as jnp

from purehr.tasks import get_task

TASK = "masked_game:make_env"


def greedy(observation, t, key):
    return jnp.argmax(jnp.where(observation["action_mask"] > 0, observation["prizes"], -jnp.inf)).astype(jnp.int32)


task = get_task(TASK)
env = task.make_env(**{k: int(v) for k, v in (word.split("=") for word in sys.argv[1:])})
episodes = task.default_protocol.eval_episodes
metrics = jax.jit(lambda: task.heldout_evaluation(env, env.default_params, greedy, num_episodes=episodes))()
print(
    json.dumps({"env_args": sys.argv[1:], "episodes": episodes, **{k: round(float(v), 4) for k, v in metrics.items()}})
)
