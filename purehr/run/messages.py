"""What a protocol run tells its user before it starts and after it ends: the plan (tasks,
seeds, budgets, run directory, budgets rounded to whole updates) and the summary (wall
time with rendering, held-out results against the baselines, figures, next commands).

Pure text builders: they read configs or a run directory's files and return strings, so
the command line and the tests use the same words.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from purehr.ppo.config import PPOConfig


def budget_notice(task: str, config: PPOConfig) -> str | None:
    """Training runs whole updates of ``num_envs x num_steps`` steps per seed, so a budget
    that is not a multiple of that is rounded up; None when nothing is rounded."""
    trained = config.num_updates * config.batch_size
    if trained == config.total_timesteps:
        return None
    return (f"note: {task}: a budget of {config.total_timesteps:,} steps per seed is rounded up to {trained:,} "
            f"= {_count(config.num_updates, 'whole update')} of {config.batch_size:,} steps "
            f"({config.num_envs} envs x {config.num_steps})")


def start_banner(run_dir: str | Path, tasks: list[str], seeds: list[int], configs: dict[str, PPOConfig],
                 resume: bool = False) -> str:
    """Printed before anything slow (baselines, compilation): what is about to happen."""
    lines = [f"{'continuing the run' if resume else 'new run'} in {run_dir}: {', '.join(tasks)} x seeds "
             f"{', '.join(map(str, seeds))} ({_count(len(tasks) * len(seeds), 'training')} in one compiled program)"]
    width = max(len(task) for task in tasks)
    for task in tasks:
        config = configs[task]
        steps = config.num_updates * config.batch_size
        lines.append(f"  {task:<{width}} {steps:>11,} steps per seed: {_count(config.num_updates, 'update')} of "
                     f"{config.num_envs} envs x {config.num_steps} steps, held-out checkpoints every "
                     f"{config.checkpoint_interval:,}")
    notices = [notice for task in tasks if (notice := budget_notice(task, configs[task])) is not None]
    return "\n".join(lines + notices)


def final_summary(run_dir: str | Path, scripts_dir: str | Path | None = None, cwd: str | Path | None = None) -> str:
    """The end of a run, from its files: wall time (training, compilation, rendering), the
    held-out table of the last checkpoints against the baselines and floors, the goals, the
    figures and ``replay.html``, and the commands to go on with this run's directory."""
    from purehr.results_table import goals_met, results_table
    from purehr.run.run_dir import FIGURES, RunDirectory

    run_dir = Path(run_dir)
    manifest = RunDirectory(run_dir).read_manifest()
    lines = [_timing_line(run_dir, manifest), "",
             "held-out metrics of the last checkpoint (mean [95% t interval] over seeds), against the "
             "baseline and the floor policies:", "", results_table(run_dir).rstrip("\n"), ""]
    for task, verdict in goals_met(run_dir).items():
        lines.append(f"{task} goal {'met' if verdict['met'] else 'NOT met'}: "
                     + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                 for k, v in verdict.items() if k != "met"))
    figures = run_dir / FIGURES
    drawn = sorted(figures.glob("*.png")) if figures.is_dir() else []
    replay = figures / "replay.html"
    lines.append("")
    if drawn:
        lines.append("figures:")
        lines += [f"  {_shown(path, cwd)}" for path in drawn if path.name != "replay_poster.png"]
        if replay.exists():
            lines.append(f"  {_shown(replay, cwd)}   (the replay: open it in a browser)")
    else:
        lines.append(f"figures: not drawn yet; {_script(scripts_dir, 'render.py', cwd)} "
                     f"--run-dir {_quoted(run_dir, cwd)} draws them")
    task, seed = manifest["tasks"][0], manifest["seeds"][0]
    shown = _quoted(run_dir, cwd)
    lines += ["", "next:",
              f"  {_script(scripts_dir, 'analyze_run.py', cwd)} --run-dir {shown}",
              "      training performance of every task and seed",
              f"  {_script(scripts_dir, 'evaluate.py', cwd)} --checkpoint {shown} --task {task} --seed {seed} "
              "--step latest",
              "      held-out evaluation of one checkpoint (any --task, --seed, --step)",
              f"  from purehr.run import restore; r = restore({str(_shown(run_dir, cwd))!r}, task={task!r}, "
              f"seed={seed}, step='latest')",
              "      in Python: r.params, r.policy(observation), r.checkpoint_row"]
    return "\n".join(lines) + "\n"


def _timing_line(run_dir: Path, manifest: dict) -> str:
    training = manifest.get("wall_time_s")
    total = manifest.get("wall_time_with_render_s") or training
    parts = []
    for label, key in (("compilation", "compile_s"), ("rendering", "render_s")):
        value = manifest.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value):
            parts.append(f"{label} {spelled_duration(value)}")
    if not isinstance(total, (int, float)):
        return f"{run_dir}: {manifest.get('status', 'unknown')} run"
    detail = f" (of which {', '.join(parts)})" if parts else ""
    what = "including rendering" if manifest.get("wall_time_with_render_s") else "training only"
    return f"finished {run_dir} in {spelled_duration(total)} wall time, {what}{detail}"


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def spelled_duration(seconds: float) -> str:
    """32 s / 3 min 50 s / 1 h 02 min."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _shown(path: Path, cwd: str | Path | None) -> Path:
    """``path`` relative to the working directory when it lies inside it, else as given."""
    base = Path.cwd() if cwd is None else Path(cwd)
    try:
        return Path(path).resolve().relative_to(base.resolve())
    except ValueError:
        return Path(path)


def _quoted(path: Path, cwd) -> str:
    return shlex.quote(str(_shown(path, cwd)))


def _script(scripts_dir, name: str, cwd) -> str:
    scripts = Path(scripts_dir) if scripts_dir is not None else Path(__file__).resolve().parents[2] / "scripts"
    return f"python {_quoted(scripts / name, cwd)}"
