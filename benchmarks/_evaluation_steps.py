"""How many sequential loop iterations a run's checkpoints cost (issue 49).

On an accelerator a loop costs its length, not its width: a held-out evaluation of 20 or of
100 episodes takes about the same time, one step after another over the whole horizon. So
what decides a checkpoint's price on a GPU is the number of sequential iterations of its
loops, read here from the traced program itself (``sequential_iterations``: a ``scan`` of
length n whose body runs m sequential iterations counts n x m; a ``cond`` its longest branch)
and added up over a run's checkpoint schedule (``evaluation_steps``). On the default protocol
the swing's 41 checkpoints run 41 evaluation scans of 1,600 control steps (x 8 RK4 sub-steps)
and 5 showcase scans of as many (``benchmarks/evaluation_steps.py`` prints the table).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from purehr.run.compiled.train_all import TaskSetup, checkpoint_schedule

_UNKNOWN_TRIPS = 1  # a while loop's trip count is not in the program: counted as one pass


def sequential_iterations(jaxpr: Any) -> int:
    """Loop-body iterations that must run one after another in ``jaxpr`` (a ClosedJaxpr or
    Jaxpr): loops nested in a scan multiply by its length, loops in sequence add up, a
    ``cond`` counts its longest branch, a ``while`` one pass of its body (its trip count is
    data), and straight-line code 0. The width of each iteration (vmapped episodes) is free."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    total = 0
    for equation in jaxpr.eqns:
        inner = [sequential_iterations(sub) for sub in _sub_jaxprs(equation.params)]
        name = equation.primitive.name
        if name == "scan":
            total += int(equation.params["length"]) * max(1, sum(inner))
        elif name == "while":
            total += _UNKNOWN_TRIPS * max(1, sum(inner))
        elif name == "cond":
            total += max(inner, default=0)
        else:  # jit, custom_jvp/vjp and other calls: their body as it is
            total += sum(inner)
    return total


def _sub_jaxprs(params: dict) -> list:
    found = []
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(item, "eqns") or hasattr(getattr(item, "jaxpr", None), "eqns"):
                found.append(item)
    return found


def evaluation_steps(setup: TaskSetup, num_seeds: int = 1) -> dict[str, int]:
    """The sequential loop iterations of ``setup``'s checkpoints over a whole run: the
    checkpoints of its schedule (full and quick), the iterations of one full evaluation, one
    quick one and one showcase (traced, vmapped over ``num_seeds`` as the run does), and the
    run's total; and, for scale, the iterations of one training update."""
    runner = jax.eval_shape(jax.vmap(setup.algorithm.init), jax.random.split(jax.random.PRNGKey(0), num_seeds))
    params = jax.eval_shape(setup.algorithm.network_params, runner)
    full = sequential_iterations(jax.make_jaxpr(jax.vmap(setup.evaluate))(params))
    quick_episodes = setup.protocol.quick_eval_episodes
    quick = sequential_iterations(jax.make_jaxpr(jax.vmap(lambda p: setup.evaluate(p, quick_episodes)))(params))
    showcase = sequential_iterations(jax.make_jaxpr(jax.vmap(setup.showcase))(params))
    update = sequential_iterations(jax.make_jaxpr(jax.vmap(setup.algorithm.update))(runner))
    updates, is_full = checkpoint_schedule(setup.config, setup.protocol)
    if setup.protocol.full_eval_interval == 1:
        is_full = np.ones_like(is_full)
    num_full = int(np.sum(is_full))
    num_quick = len(updates) - num_full
    # grouped: one quick evaluation's length at each full checkpoint with quick ones before it
    quick_runs = num_quick if not setup.groups_quick_evaluations else groups_of_quick(is_full)
    return {
        "checkpoints": len(updates),
        "full_checkpoints": num_full,
        "quick_checkpoints": num_quick,
        "full_evaluation": full,
        "quick_evaluation": quick,
        "showcase": showcase,
        "grouped": setup.groups_quick_evaluations,
        "run_total": num_full * (full + showcase) + quick_runs * quick,
        "update": update,
        "updates": setup.algorithm.num_updates,
        "training_total": update * setup.algorithm.num_updates,
    }


def groups_of_quick(is_full: np.ndarray) -> int:
    """The full checkpoints that follow at least one quick one: the grouped evaluations a run
    makes (a group left at the end, which a run's last checkpoint, always full, closes)."""
    groups, waiting = 0, False
    for full in is_full:
        groups += bool(full and waiting)
        waiting = not full
    return groups
