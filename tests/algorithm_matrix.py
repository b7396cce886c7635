"""The protocol tests' algorithm matrix: one row per registered algorithm, and
tests/test_protocol_matrix.py runs every protocol guarantee over every row (checkpoints at every
target with held-out evaluation and baselines, SIGKILL and Ctrl-C resumes bit-identical,
dashboards exactly once, the divergence guard, PBT in the call, restore, evaluate, render,
publish). Adding an algorithm adds one row here:

    "pqn": AlgorithmRow(
        "pqn",
        tasks={"hrv": PQN_SMALL},
        diverging=("learning_rate", 1e30),
        explore=("learning_rate", "gamma"),
    ),
    "sac": AlgorithmRow(
        "sac",
        tasks={"swing": dict(num_envs=4, num_steps=8, batch_size=64, actor_hidden=(16,), ...)},
        diverging=("learning_rate", 1e30),
        explore=("learning_rate",),
    ),

A row's ``tasks`` are the tasks it serves, one per action-space kind it takes (swing: Box; hrv:
MultiDiscrete; gymnax:CartPole-v1: Discrete), each with config fields over that task's defaults
for the algorithm that make a tiny run (a few dozen updates of a few hundred steps; the protocol's
cadence is ``PROTOCOL`` for every row). Its first task is the one the runs are watched on (the
kill after its third checkpoint, the Ctrl-C at its update 7) and the population trains on.

A row's ``covered_by`` names, per matrix check (``CHECKS``), a deeper test of that algorithm that
already gives the same guarantee: the matrix then skips it for that row, saying which test gives
it, and trains nothing for it (PPO's SIGKILL, Ctrl-C and PBT runs are test_run.py's,
test_interrupt.py's and test_pbt_run.py's). A new algorithm's row leaves it empty."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PROTOCOL = dict(checkpoint_interval=3000, eval_episodes=4, full_eval_interval=2, quick_eval_episodes=2)
"""Every row's checkpoint and evaluation cadence (``ProtocolSettings``): targets every 3,000 steps,
every second one and the last with the full evaluation."""
SEEDS = [0, 1]
POPULATION = [0, 1, 2, 3]
CHECKS = ("checkpoints", "sigkill", "ctrl_c", "dashboards", "divergence", "pbt", "restore")
"""The matrix's checks, by the names ``AlgorithmRow.covered_by`` uses (tests/test_protocol_matrix.py)."""

PPO_SMALL = dict(
    total_timesteps=16384,
    num_envs=4,
    num_steps=128,
    minibatch_size=128,
    num_epochs=2,
    actor_hidden=(16,),
    critic_hidden=(16,),
    anneal_lr=False,
)
"""conftest.PROTOCOL_SMALL's algorithm fields: 32 updates of 512 steps (a constant learning rate, so
a resumed or extended run is bit-identical)."""


@dataclass(frozen=True)
class AlgorithmRow:
    """What the matrix needs of one algorithm: its registered ``name``; ``tasks``: task -> config
    fields over the task's defaults for it; ``diverging``: a continuous hyperparameter and a value
    that makes its losses or parameters non-finite within an update (the divergence guard);
    ``explore``: what its population explores; ``shared_reference``: the name of a conftest
    fixture that already trains exactly this row's run (its uninterrupted reference is then
    shared, not trained twice); ``covered_by``: check (``CHECKS``) -> the deeper test
    (``tests/file.py::name``) that gives that guarantee for this algorithm."""

    name: str
    tasks: dict[str, dict[str, Any]]
    diverging: tuple[str, float]
    explore: tuple[str, ...]
    shared_reference: str | None = None
    population_task: str | None = field(default=None)  # default: the first task
    covered_by: dict[str, str] = field(default_factory=dict)

    def runs(self, check: str) -> bool:
        """Whether the matrix runs ``check`` for this row (no deeper test gives it)."""
        return check not in self.covered_by

    @property
    def task_names(self) -> list[str]:
        return list(self.tasks)

    @property
    def watched(self) -> str:
        return self.task_names[0]

    @property
    def pbt_task(self) -> str:
        return self.population_task or self.watched

    def configs(self, tasks: list[str] | None = None) -> dict[str, Any]:
        """Each task's config: its defaults for this algorithm (``Task.default_configs`` where the
        task records them, PPO's ``default_config``, else the algorithm's own) with the row's fields."""
        from purehr.algorithms.registry import DEFAULT_ALGORITHM, default_config
        from purehr.tasks import get_task

        configs = {}
        for task in tasks or self.task_names:
            definition = get_task(task)
            recorded = getattr(definition, "default_configs", None) or {}
            if self.name in recorded:
                base = recorded[self.name]
            elif self.name == DEFAULT_ALGORITHM:
                base = definition.default_config
            else:
                base = default_config(self.name)
            configs[task] = base.replace(**self.tasks[task])
        return configs

    def run_arguments(self, tasks: list[str] | None = None) -> dict[str, Any]:
        """``train_all_seeds``' keywords for this row's run (the tests' and the killed child's)."""
        return dict(tasks=tasks or self.task_names, configs=self.configs(tasks), overrides=dict(PROTOCOL))


SAC_SMALL = dict(
    total_timesteps=16384,
    num_envs=8,
    num_steps=16,
    gradient_steps=2,
    sample_size=32,
    buffer_size=4096,
    learning_starts=512,
    actor_hidden=(16,),
    critic_hidden=(16,),
)
"""128 updates of 128 steps, two gradient steps each from a 4,096-transition buffer."""
PQN_SMALL = dict(
    total_timesteps=16384,
    num_envs=4,
    num_steps=128,
    minibatch_size=128,
    num_epochs=2,
    hidden=(16,),
    anneal_lr=False,
)
"""32 updates of 512 steps, as PPO's (a constant learning rate: a resumed run is bit-identical)."""

MATRIX: dict[str, AlgorithmRow] = {
    "ppo": AlgorithmRow(
        "ppo",
        tasks={"swing": PPO_SMALL, "hrv": PPO_SMALL, "gymnax:CartPole-v1": PPO_SMALL},
        diverging=("learning_rate", 1e30),
        explore=("learning_rate", "ent_coef"),
        shared_reference="protocol_reference",
        population_task="hrv",
        covered_by={  # the same runs (conftest's protocol configs, its reference), deeper assertions
            "sigkill": "tests/test_run.py::test_killed_run_resumes_to_bit_identical_parameters",
            "dashboards": "tests/test_run.py::test_the_killed_run_holds_every_step_once_on_both_dashboards",
            "ctrl_c": "tests/test_interrupt.py::test_the_resume_after_ctrl_c_is_bit_identical_to_an_uninterrupted_run",
            "pbt": "tests/test_pbt_run.py::"
            "test_each_checkpoint_records_the_population_and_a_copy_carries_its_parents_weights",
            # a copy of the same reference, rendered without the replay (every task's figures) as the
            # check does; its evaluate.py, fresh-process restore and the reference's publish
            # (test_run.py::test_a_published_record_keeps_only_the_final_checkpoints_and_restores_them)
            # beside it, and a batch acting as its observations (test_record_restore.py)
            "restore": "tests/test_any_task_reports.py::"
            "test_every_task_has_its_figures_and_cartpole_draws_return_and_its_floor",
        },
    ),
    "pqn": AlgorithmRow(
        "pqn",
        tasks={"hrv": PQN_SMALL},
        diverging=("learning_rate", 1e30),
        explore=("learning_rate", "gamma"),
    ),
    "sac": AlgorithmRow(
        "sac",
        tasks={"swing": SAC_SMALL},
        diverging=("critic_learning_rate", 1e30),
        explore=("actor_learning_rate", "critic_learning_rate"),
    ),
}
"""The rows, by algorithm name; tests/test_protocol_matrix.py checks that every registered
algorithm has one."""
