"""The one builder of a task's training setup: environment, PPO pieces (under a curriculum's
schedule, if any) and the held-out environment params the task is judged on."""

from __future__ import annotations

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import make_algorithm
from purehr.envs.base import Environment
from purehr.envs.curriculum import Curriculum
from purehr.protocol_settings import ProtocolSettings
from purehr.run.compiled.train_all import TaskSetup
from purehr.run.store.record import recorded_env, task_record
from purehr.tasks import Task, curriculum_schedule, get_task, heldout_env_params


def build_task_setup(
    task: Task | str,
    config: AlgorithmConfig | None = None,
    curriculum: Curriculum | None = None,
    *,
    protocol: ProtocolSettings | None = None,
    manifest: dict | None = None,
    env: Environment | None = None,
    env_kwargs: dict | None = None,
) -> TaskSetup:
    """``task``'s setup for ``config`` (default: the task's). The environment is ``env``, or
    the one ``manifest`` recorded (a resumed or restored run), or the task's built with
    ``env_kwargs`` (default: none). A task
    with a curriculum trains under its schedule (in the scan) and is evaluated (checkpoints
    and baselines) on its final stage."""
    task = get_task(task) if isinstance(task, str) else task
    config, task_protocol = task.settings_for(config)
    protocol = task_protocol if protocol is None else protocol
    if env is None:
        env = task.make_env(**(env_kwargs or {})) if manifest is None else recorded_env(manifest, task)
    algorithm = make_algorithm(config, env, env.default_params, curriculum_schedule(curriculum, config))
    eval_params = heldout_env_params(algorithm, config.hyperparams(), curriculum)
    return TaskSetup(task, env, env.default_params, eval_params, config, algorithm, protocol, schedule=curriculum)


def build_setups(
    tasks: list[str],
    configs: dict[str, AlgorithmConfig],
    curricula: dict[str, Curriculum | None] | None = None,
    manifest: dict | None = None,
    env_kwargs: dict[str, dict] | None = None,
    protocols: dict[str, ProtocolSettings] | None = None,
) -> list[TaskSetup]:
    """One setup per task, in order (a task without a config: the task's default). The
    curricula were checked when the run was planned (``purehr.run.planning.run_plan``); a resumed run
    (``manifest``) rebuilds the environments it recorded, a new one builds them with
    ``env_kwargs`` (task -> ``make_env`` keywords)."""
    curricula, env_kwargs, protocols = curricula or {}, env_kwargs or {}, protocols or {}
    return [
        build_task_setup(
            name,
            configs.get(name),
            curricula.get(name),
            protocol=protocols.get(name),
            manifest=manifest,
            env_kwargs=env_kwargs.get(name),
        )
        for name in tasks
    ]


def recorded_setup(manifest: dict, task: Task | str) -> TaskSetup:
    """``task``'s setup exactly as the run of ``manifest`` trained it: its recorded config,
    curriculum and environment (a restored checkpoint, baselines evaluated again)."""
    record = task_record(manifest, task)
    return build_task_setup(record.task, record.config, record.curriculum, protocol=record.protocol, env=record.env)
