"""What a protocol run tells its user before it starts: the plan (tasks, seeds, budgets, run
directory, budgets rounded to whole updates). The summary after it ends is
``purehr.reports.summary`` (it reads the results table and the figures, which live above ``run``).

Pure text builders: they read configs and return strings, so the command line and the tests use
the same words.
"""

from __future__ import annotations

from pathlib import Path

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import DEFAULT_ALGORITHM, algorithm_of
from purehr.population.settings import PBTSettings
from purehr.protocol_settings import ProtocolSettings
from purehr.run.planning.settings import sources_line


def budget_notice(task: str, config: AlgorithmConfig) -> str | None:
    """Training runs whole updates of ``num_envs x num_steps`` steps per seed, so a budget
    that is not a multiple of that is rounded up; None when nothing is rounded."""
    trained = config.num_updates * config.batch_size
    if trained == config.total_timesteps:
        return None
    return (
        f"note: {task}: a budget of {config.total_timesteps:,} steps per seed is rounded up to {trained:,} "
        f"= {_count(config.num_updates, 'whole update')} of {config.batch_size:,} steps "
        f"({config.num_envs} envs x {config.num_steps})"
    )


def start_banner(
    run_dir: str | Path,
    tasks: list[str],
    seeds: list[int],
    configs: dict[str, AlgorithmConfig],
    protocols: dict[str, ProtocolSettings],
    resume: bool = False,
    pbt: PBTSettings | None = None,
    sources: dict[str, dict[str, str]] | None = None,
) -> str:
    """Printed before anything slow (baselines, compilation): what is about to happen; a PBT
    run says its seeds are one population (they copy each other's weights); ``sources`` (task ->
    field -> source): every value that is not the default, by where it came from."""
    lines = [
        f"{'continuing the run' if resume else 'new run'} in {run_dir}: {', '.join(tasks)} x seeds "
        f"{', '.join(map(str, seeds))} ({_count(len(tasks) * len(seeds), 'training')} in one compiled program)"
    ]
    if pbt is not None:
        lines.append(
            f"  population-based training (PBT): the {len(seeds)} seeds of each task are one population of "
            f"{_count(len(seeds), 'member')}, not independent seeds; {pbt.schedule_text()}"
        )
    labels = {task: entry_label(task, configs[task]) for task in tasks}
    width = max(len(label) for label in labels.values())
    for task in tasks:
        config = configs[task]
        steps = config.num_updates * config.batch_size
        lines.append(
            f"  {labels[task]:<{width}} {steps:>11,} steps per seed: {_count(config.num_updates, 'update')} of "
            f"{config.num_envs} envs x {config.num_steps} steps, held-out checkpoints every "
            f"{protocols[task].checkpoint_interval:,}"
        )
    settings = [
        line
        for task in tasks
        if (line := sources_line(task, configs[task], protocols[task], (sources or {}).get(task, {}))) is not None
    ]
    if settings:
        lines += ["  settings that are not the defaults, by source:", *settings]
    notices = [notice for task in tasks if (notice := budget_notice(task, configs[task])) is not None]
    return "\n".join(lines + notices)


def entry_label(task: str, config: AlgorithmConfig) -> str:
    """A plan line's name of a task entry: ``swing@sac`` as it is; ``swing`` trained by another
    algorithm than PPO (``--algorithm sac``) as ``swing (sac)``; any config (every one has
    ``num_envs``, ``num_steps``, ``batch_size`` and ``num_updates``)."""
    algorithm = algorithm_of(config).name
    return task if "@" in task or algorithm == DEFAULT_ALGORITHM else f"{task} ({algorithm})"


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def stop_hint(sigterm_handled: bool, sigint_ignored: bool, pid: int) -> str:
    """How to stop the run at its next update, as this process hears signals: Ctrl-C (SIGINT)
    unless it is ignored (a job started with ``&`` by a non-interactive shell), and ``kill PID``
    (SIGTERM) where the run handles it (``purehr.run.outcome.sigterm_stops_the_run``)."""
    kill = f"kill {pid} (SIGTERM)"
    if not sigint_ignored:
        return f"{'Ctrl-C or ' + kill if sigterm_handled else 'Ctrl-C'} stops it at the next update"
    ignored = (
        "Ctrl-C cannot stop it (SIGINT is ignored in this process, as in a job a non-interactive shell started with &)"
    )
    if sigterm_handled:
        return f"{ignored}; {kill} stops it at the next update"
    return f"{ignored}; {kill} ends it at once, and --resume continues from its last checkpoint"
