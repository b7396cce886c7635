"""Hyperparameter sweep: the grid x seeds trained in one compiled call per network shape.

    python scripts/sweep.py --task hrv --learning-rate 1e-4 3e-4 1e-3 --clip-range 0.1 0.2 0.3 \\
        --ent-coef 0.001 0.01 0.1 --seeds 0 1 2 --steps 200000 --out artifacts/sweep_hrv
    python scripts/sweep.py --task hrv@pqn --learning-rate 1e-4 3e-4 --q-lambda 0.5 0.95 --out artifacts/sweep_pqn

The algorithm is PPO unless --algorithm or the task's @ALGORITHM suffix names another; the
axes are its continuous hyperparameters (PPO: --learning-rate, --clip-range, --ent-coef,
--vf-coef, --gae-lambda, --gamma, --max-grad-norm; PQN and SAC: their own, the registry's
hyperparameter_names()), vmapped: every combination x every seed trains in one jax.jit call.
Shape-changing choices (PPO: --minibatch-size, --num-envs, --num-steps, --num-epochs,
--actor-hidden, --critic-hidden, --policy, --recurrent-width; another algorithm: its other
config fields; hidden sizes written 64,64) given several values make separate groups, one
compiled call each, in the same invocation. Every trained policy is then evaluated on the
task's held-out protocol (vmapped, on the device), and so are the task's reference policy and
floors (acting at random, doing nothing), which the ranking shows under its rows.

Writes to --out: ranking.csv (mean and two-sided 95% t interval over seeds of held-out
success and return per setting, best first), runs.csv (every run), heatmap.png/.pdf (two
axes, --heatmap), sweep.json (command, algorithm, profile, machine, configs, the reference
policies' numbers, timing), sensitivity.md/.png/.pdf (the settings ranked by the IQM over seeds of
the held-out return with 95% bootstrap intervals; per hyperparameter how much the tuned result
depends on it; the best setting against the default: purehr/experiments/sensitivity.py). A directory that already
holds a sweep is refused unless --overwrite (which then replaces only the sweep's own files,
once the new results exist); a non-empty directory that holds no sweep is always refused.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command's flags; ``prog`` names it in the usage line (None: the script's file name)."""
    from purehr.algorithms.registry import ALGORITHMS
    from purehr.cli.arguments import HelpFormatter, task_name
    from purehr.cli.cache_flags import add_compile_cache_flags
    from purehr.cli.ppo_flags import add_config_flags
    from purehr.cli.profile_flags import add_profile_flag
    from purehr.cli.tracking_flags import add_tracking_flags
    from purehr.experiments.sweep import sweep_flag_fields

    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--task",
        required=True,
        type=task_name,
        help="task to sweep: swing, hrv, <suite>:<environment> (gymnax:CartPole-v1) or module:factory; "
        "TASK@ALGORITHM (hrv@pqn) sweeps that algorithm",
    )
    parser.add_argument(
        "--algorithm",
        choices=sorted(ALGORITHMS),
        default=None,
        help="the algorithm swept (default: ppo, or the task's @ALGORITHM); the axes are its continuous "
        "hyperparameters, the shape choices its other config fields",
    )
    parser.add_argument(
        "--seeds", nargs="+", type=int, default=[0, 1, 2], help="training seeds of every setting (distinct, >= 0)"
    )
    parser.add_argument("--steps", type=int, default=200_000, help="environment steps per run")
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output directory: new, empty, or holding a sweep to replace with --overwrite",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the sweep already in --out (only its own files; anything else is refused)",
    )
    parser.add_argument("--eval-episodes", type=int, default=None, help="held-out episodes (default: the task's)")
    parser.add_argument(
        "--curriculum",
        default=None,
        metavar="{none,default,STAGES}",
        help="hrv only: difficulty schedule (see train_all_seeds.py); evaluation on its last stage",
    )
    parser.add_argument(
        "--heatmap",
        nargs="+",
        default=None,
        metavar="AXIS",
        help="one or two swept axes for the heat map (default: the two with most values)",
    )
    parser.add_argument(
        "--heatmap-reduce",
        choices=["max", "mean"],
        default="max",
        help="how the heat map reduces the axes it does not show",
    )
    parser.add_argument("--top", type=int, default=20, help="rows of the ranking to print")
    add_tracking_flags(parser, directory_note="--out")
    swept, shapes = sweep_flag_fields()
    for title, fields, what in (
        ("swept hyperparameters (vmapped: one compiled call for the whole grid; the algorithm's own)", swept, "values"),
        ("shape choices (one compiled group per combination; the algorithm's own)", shapes, "choices"),
    ):
        note = f"; the {what} (default: the task's protocol value)"
        group = parser.add_argument_group(title)
        add_config_flags(group, fields, several=True, default_note=lambda name, note=note: note)
    add_compile_cache_flags(parser)
    add_profile_flag(parser, resumable=False)
    return parser


def checked_plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple:
    """Every input checked before any work (exit 2 naming the value): the seeds, the swept axes,
    the groups' shape choices, the base config, the curriculum and the sweep's settings."""
    from purehr.algorithms.registry import DEFAULT_ALGORITHM, get_algorithm, split_entry
    from purehr.cli.ppo_flags import config_values
    from purehr.cli.tracking_flags import tracking_from_args
    from purehr.engine.seeds import validate_seeds
    from purehr.envs.curriculum import Curriculum
    from purehr.experiments import sweep
    from purehr.run.planning.run_plan import entry_settings
    from purehr.tasks.profiles import profile_config, resolve_profile
    from purehr.viz.sweep_heatmap import heatmap_axes

    try:
        algorithm = sweep_algorithm(args.task, args.algorithm)
        if split_entry(args.task)[1] is None and algorithm != DEFAULT_ALGORITHM:  # keyed as a run's: hrv@pqn
            args.task = f"{args.task}@{algorithm}"
        given = config_values(args, several=True)
        hyperparameters = get_algorithm(algorithm).hyperparameter_names()
        shape_names = sweep.algorithm_shape_fields(algorithm)
        for name in given:
            if name not in hyperparameters and name not in shape_names:
                raise ValueError(
                    f"--{name.replace('_', '-')} does not apply to a {algorithm} sweep; expected its hyperparameters "
                    f"({', '.join(hyperparameters)}) or shape choices ({', '.join(shape_names)})"
                )
        axes = {name: values for name, values in given.items() if name in hyperparameters}
        shapes = {name: values for name, values in given.items() if name in shape_names}
        seeds = validate_seeds(args.seeds)
        axes = sweep.validate_axes(axes, algorithm)
        if args.heatmap:
            heatmap_axes(axes, args.heatmap)
        curriculum = None if args.curriculum is None else Curriculum.parse(args.curriculum)
        if curriculum is not None and split_entry(args.task)[0] != "hrv":
            raise ValueError("--curriculum applies to the hrv task only")
        profile = resolve_profile(args.profile or "auto")  # the swept shapes given win over it
        default, protocol = entry_settings(args.task, None)
        base = profile_config(default, profile, args.task).replace(total_timesteps=args.steps)
        if args.eval_episodes is not None:
            protocol.replace(eval_episodes=args.eval_episodes)  # checked as a run's
        single = {k: v[0] for k, v in shapes.items() if len(v) == 1}
        base = base.replace(**single)
        choices = {k: v for k, v in shapes.items() if len(v) > 1}
        for name, values in choices.items():  # validate every group before any work
            for value in values:
                base.replace(**{name: value})
        for setting in sweep.grid_settings(axes, algorithm):
            base.replace(**setting)
        settings = sweep.sweep_settings(args.task, base, axes, choices, seeds, curriculum)
        sweep.prepare_out_dir(args.out, args.overwrite, settings)
        tracking = tracking_from_args(args)
        tracking.check_log_dir_used()
        tracking.check_writable(args.out)
        tracking.check_new_log_dir([args.task])
    except (ValueError, TypeError, FileExistsError) as error:
        parser.exit(2, f"error: {error}\n")
    return seeds, axes, choices, base, curriculum, settings, tracking, algorithm, profile


def sweep_algorithm(task: str, algorithm: str | None) -> str:
    """The algorithm a sweep trains: ``--algorithm``, the task's ``@ALGORITHM`` suffix (which a
    different ``--algorithm`` contradicts), else PPO."""
    from purehr.algorithms.registry import DEFAULT_ALGORITHM, split_entry

    suffix = split_entry(task)[1]
    if suffix is not None and algorithm is not None and suffix != algorithm:
        raise ValueError(f"--task {task} trains {suffix}, --algorithm {algorithm}; give one of them")
    return suffix or algorithm or DEFAULT_ALGORITHM


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """``scripts/sweep.py`` (``prog`` None) or ``purehr sweep`` (``prog`` "purehr sweep")."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    from purehr.cli.cache_flags import start_compile_cache

    start_compile_cache(args, parser)
    from purehr.experiments import sweep
    from purehr.experiments.ranking import divergence_note, format_table, rank_settings
    from purehr.run.planning.messages import budget_notice
    from purehr.run.store.machine import environment_description

    seeds, axes, choices, base, curriculum, settings, tracking, algorithm, profile = checked_plan(parser, args)
    for choice in sweep.shape_combinations(choices):  # the trainer's words: a budget runs whole updates
        notice = budget_notice(args.task, base.replace(**choice))
        if notice is not None:
            print(notice, file=sys.stderr, flush=True)

    started = time.perf_counter()
    groups = sweep.run_task_sweep(
        args.task,
        base,
        axes,
        seeds,
        choices,
        curriculum=curriculum,
        log=lambda text: print(text, file=sys.stderr, flush=True),
        eval_episodes=args.eval_episodes,
    )
    wall = time.perf_counter() - started
    print("[sweep] the task's reference policy and floors on the same held-out protocol ...", file=sys.stderr)
    references = sweep.sweep_references(
        args.task, base, curriculum, args.eval_episodes, log=lambda text: print(f"[sweep] {text}", file=sys.stderr)
    )
    names = list(axes)
    ranking = rank_settings(groups, names)
    description = environment_description()
    description.update(
        command=[
            *(["python", "scripts/sweep.py"] if prog is None else prog.split()),
            *(sys.argv[1:] if argv is None else argv),
        ],
        task=args.task,
        algorithm=algorithm,
        profile=profile,
        references=references,
        axes=axes,
        shape_choices={k: [list(x) if isinstance(x, tuple) else x for x in v] for k, v in choices.items()},
        seeds=seeds,
        steps_per_run=args.steps,
        settings=settings,
        curriculum=None if curriculum is None else curriculum.to_dict(),
        wall_time_s=wall,
        heatmap_reduce=args.heatmap_reduce,
    )
    paths = sweep.write_outputs(args.out, groups, axes, ranking, description, args.heatmap, args.heatmap_reduce)
    if tracking.enabled:
        from purehr.experiments.sweep_dashboards import clear_dashboards, log_group

        print(f"[sweep] logging every run to {', '.join(tracking.backends)} ...", file=sys.stderr, flush=True)
        clear_dashboards(args.out, tracking)
        for group in groups:
            log_group(tracking, args.out, args.task, group)
    print(format_table(ranking, names, args.top, references))
    note = divergence_note(ranking)
    if note:
        print(f"\n{note}")
    print(
        f"\n{sum(g.num_runs for g in groups)} runs in {len(groups)} compiled group(s), wall time {wall:.1f} s; "
        f"wrote {', '.join(str(p) for p in paths)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
