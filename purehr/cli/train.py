"""Train every task for every seed in one compiled call, then evaluate and render.

python scripts/train_all_seeds.py                      # the full protocol (docs/protocol.md)
python scripts/train_all_seeds.py --steps 100000 --seeds 0 1 --run-name quick
python scripts/train_all_seeds.py --run-name quick --resume
python scripts/train_all_seeds.py --config run.toml --learning-rate 1e-3   # docs/how-to/config_files.md
python scripts/train_all_seeds.py --config artifacts/quick/manifest.json --run-name again   # repeat a run
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
"""The source checkout this package lies in (its ``scripts/``, ``artifacts/``), when it lies in one."""
SCRIPT = CHECKOUT / "scripts" / "train_all_seeds.py"
"""``scripts/train_all_seeds.py``, the checkout's wrapper of this command (the resume command names it)."""
ROOT = CHECKOUT if SCRIPT.is_file() else Path.cwd()
"""Where ``artifacts/<run-name>`` lies: the checkout (as ``scripts/train_all_seeds.py`` always had it),
else (an installed package) the working directory."""


def _protocol_defaults(name: str) -> str:
    """Each built-in task's default of ``name``: its algorithm config's, or its protocol settings'."""
    from purehr.protocol_settings import PROTOCOL_FIELDS
    from purehr.tasks import get_task

    def show(value):
        return " ".join(map(str, value)) if isinstance(value, tuple) else str(value)

    def default(task: str):
        task = get_task(task)
        return getattr(task.default_protocol if name in PROTOCOL_FIELDS else task.default_config, name, None)

    if default("swing") is None:  # a field of another algorithm: its defaults
        return "the algorithm's"
    return f"the protocol's, swing {show(default('swing'))}, hrv {show(default('hrv'))}"


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command's flags; ``prog`` names it in the usage line (None: the script's file name)."""
    from purehr.algorithms.registry import ALGORITHMS, DEFAULT_ALGORITHM
    from purehr.cli.arguments import HelpFormatter
    from purehr.cli.cache_flags import add_compile_cache_flags
    from purehr.cli.env_args import add_environment_flags
    from purehr.cli.pbt_flags import add_pbt_flags
    from purehr.cli.ppo_flags import FIELDS, add_config_flags
    from purehr.cli.profile_flags import add_profile_flag
    from purehr.cli.tracking_flags import add_tracking_flags

    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="take the flags from a TOML file (any long flag by name, [task.NAME] sections per task; "
        "flags given beside it override it) or from a run's manifest.json to repeat that run "
        "(docs/how-to/config_files.md)",
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        help="tasks to train: swing, hrv (default: both; on --resume: the run's), <suite>:<environment> "
        "(gymnax:CartPole-v1, brax:inverted_pendulum, xminigrid:MiniGrid-Empty-5x5) or module:factory for "
        "your own environment (docs/environments.md); TASK@ALGORITHM trains the task by that algorithm "
        "(swing@sac beside swing: two entries of one run, keyed so)",
    )
    add_environment_flags(parser)
    add_profile_flag(parser)
    parser.add_argument(
        "--algorithm",
        choices=sorted(ALGORITHMS),
        default=None,
        help=f"the algorithm every task without an @ALGORITHM suffix trains with, by its registry name "
        f"(purehr.algorithms.registry; docs/interfaces.md, 'Algorithms'; default: {DEFAULT_ALGORITHM}; on "
        "--resume: the run's)",
    )
    parser.add_argument(
        "--seeds", nargs="+", type=int, default=None, help="seeds (default: 0 1 2 3 4; on --resume: the run's)"
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="environment steps per task and seed (default: each task's protocol budget; on "
        "--resume: the run's, and a larger one extends it where that can be bit-identical)",
    )
    parser.add_argument("--run-name", default="protocol", help="run directory name under artifacts/")
    parser.add_argument("--run-dir", type=Path, default=None, help="run directory (overrides --run-name)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in the run directory from its last checkpoint, with the tasks, "
        "seeds, settings and precision its manifest records",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run in the run directory (only the files a purehr run writes are removed)",
    )
    parser.add_argument("--no-render", action="store_true", help="skip figures and the replay")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--x64", action="store_true", help="enable float64 (about 2x slower; physics checks)")
    add_compile_cache_flags(parser)
    parser.add_argument(
        "--devices",
        type=int,
        default=None,
        metavar="N",
        help="shard seeds (and environments, when devices outnumber seeds) over the first N "
        "devices (default: all visible; see purehr.devices.distributed)",
    )
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="call jax.distributed.initialize() first (multi-host TPU pods, multi-GPU hosts; "
        "coordinator, process count and id detected on Cloud TPU, SLURM, Open MPI)",
    )
    parser.add_argument(
        "--coordinator-address",
        default=None,
        metavar="HOST:PORT",
        help="with --distributed: process 0's address (elsewhere than Cloud TPU/SLURM/MPI); "
        "see docs/how-to/multi_host.md",
    )
    parser.add_argument("--num-processes", type=int, default=None, metavar="N", help="with --distributed")
    parser.add_argument(
        "--process-id",
        type=int,
        default=None,
        metavar="I",
        help="with --distributed: this process, 0 to N-1 (0 writes the run directory)",
    )
    parser.add_argument(
        "--curriculum",
        default=None,
        metavar="{none,default,STAGES}",
        help="hrv difficulty schedule inside the scan: 'none', 'default' (docs/hrv_task.md: "
        "0.2:0.3:0.1,0.4:0.6:0.05,0.4:0.9:0.02) or fraction:difficulty:precision "
        "stages, comma separated; evaluation uses the last stage. Not given: none "
        "for a new run, the recorded one on --resume",
    )
    add_tracking_flags(parser, directory_note="the run directory")
    add_pbt_flags(parser)
    group = parser.add_argument_group(
        "algorithm fields (applied to every task entry, each refused where its algorithm lacks it; [task.NAME] "
        "sections of --config per entry; protocol defaults per task otherwise)"
    )
    add_config_flags(
        group,
        [name for name in FIELDS if name != "total_timesteps"],
        default_note=lambda name: f" (default: {_protocol_defaults(name)})",
    )
    return parser


def recorded_precision(run_dir: Path) -> str | None:
    """The precision a run directory's manifest records, if it can be read (the trainer
    refuses anything else clearly later)."""
    from purehr.run.store.run_dir import read_manifest

    try:
        return read_manifest(Path(run_dir)).get("precision")
    except (OSError, ValueError):
        return None


def recorded_no_render(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` was started with ``--no-render`` (its manifest's
    ``run_config``): a resume keeps that choice (False when there is no readable run)."""
    from purehr.run.store.run_dir import read_manifest

    try:
        values = (read_manifest(Path(run_dir)).get("run_config") or {}).get("values") or {}
    except (OSError, ValueError, AttributeError):
        return False
    return values.get("no_render") is True


def _keep_recorded_no_render(args, run_dir: Path) -> None:
    """A resume of a run started with ``--no-render`` renders nothing either, and says how to render."""
    if args.resume and not args.no_render and recorded_no_render(run_dir):
        print(
            f"--resume: {run_dir} was started with --no-render: rendering nothing (as with --no-render); "
            f"{_render_command(args)} --run-dir {run_dir} renders its figures",
            file=sys.stderr,
        )
        args.no_render = True


def main(argv: list[str] | None = None, *, prog: str | None = None, command: list[str] | None = None) -> int:
    """``scripts/train_all_seeds.py`` (``prog`` None) or ``purehr train`` (``prog`` "purehr train": the
    resume command and the hints then name the ``purehr`` command); ``command``: the command line the
    manifest records (default: ``sys.argv``, or ``argv`` when given)."""
    from purehr.cli.config_file import parse_with_config

    parser = build_parser(prog)
    resolved = parse_with_config(parser, argv)
    args = resolved.args
    args.purehr_command = prog is not None  # run as `purehr train`, not the script
    args.recorded_command = command
    args.task_overrides, args.run_config = resolved.task_overrides, resolved.record
    if resolved.source_line is not None:
        print(resolved.source_line, file=sys.stderr)
    run_dir = args.run_dir or ROOT / "artifacts" / args.run_name
    directory_option = "--run-dir" if args.run_dir is not None else "--run-name"
    _keep_recorded_no_render(args, run_dir)
    _start_jax(args, parser, run_dir)
    _choose_profile(args, parser, run_dir)
    import jax

    from purehr.run.outcome import RunInterrupted

    if jax.process_index() != 0:  # under jax.distributed: process 0 writes and reports
        return _follow(args, run_dir, parser)
    try:
        return _train_and_report(args, parser, run_dir, directory_option, argv)
    except RunInterrupted as interrupted:  # Ctrl-C or SIGTERM: the manifest says "interrupted"
        return _stopped_by_ctrl_c(f"{interrupted}", args, run_dir, directory_option, interrupted.at_once)
    except KeyboardInterrupt:  # Ctrl-C (SIGTERM) before training, or while rendering or reporting
        from purehr.run.compiled.program import abandoned_program_running
        from purehr.run.outcome import stop_signal_name

        # a computation Ctrl-C stopped waiting for (the baselines, the first states) would hold the exit
        at_once = abandoned_program_running()
        message = f"interrupted ({stop_signal_name()})"
        return _stopped_by_ctrl_c(message, args, run_dir, directory_option, at_once=at_once)


def _train_and_report(args, parser, run_dir: Path, directory_option: str, argv: list[str] | None) -> int:
    """Trains (or resumes), renders and prints the summary; the exit status."""
    from purehr.reports.dashboards import publish_to_dashboards
    from purehr.reports.run_statistics import draw_statistics
    from purehr.run.outcome import RunDiverged, RunFailed
    from purehr.run.planning.preparation import RunAlreadyFinished
    from purehr.run.protocol import train_all_seeds
    from purehr.viz.render import render_trained_run

    try:
        # a resume continues with the run's tasks, seeds and settings; given ones must match them
        summary = train_all_seeds(
            run_dir,
            **_run_request(args),
            overwrite=args.overwrite,
            progress=not args.no_progress,
            command=args.recorded_command or (sys.argv if argv is None else argv),
            curricula=_curricula_from_args(args),
            directory_option=directory_option,
            keep_dashboards_open=True,  # the figures rendered next go to the same runs
            run_config=getattr(args, "run_config", None),
            resume_words=_resume_words(args, directory_option),
        )
        try:
            if not args.no_render:
                render_trained_run(summary.run_dir)
                draw_statistics(summary.run_dir)  # IQM curves and profiles (reports: above viz)
        finally:
            if summary.tracking is not None:
                publish_to_dashboards(summary.run_dir, summary.tracking)
    except RunAlreadyFinished:
        return _finish_finished_run(args, run_dir)
    except (ValueError, TypeError, OSError) as error:  # a bad task or environment, FileExistsError, ...
        parser.exit(2, f"error: {error}{_where_written(error, args, run_dir, directory_option)}\n")
    except RunFailed as error:  # the manifest says "failed"; one line, not the callback's traceback
        parser.exit(1, f"error: {error}\n")
    except RunDiverged as error:  # the manifest says "diverged": not a finished result
        if not args.no_render:
            render_trained_run(run_dir, diverged=True)
        parser.exit(1, f"error: {error}\n")
    report(summary.run_dir, console=getattr(args, "purehr_command", False))
    return 0


def _render_command(args) -> str:
    """How the hints spell the render command: as the user ran this one."""
    return "purehr render" if getattr(args, "purehr_command", False) else "scripts/render.py"


def _resume_words(args, directory_option: str) -> list[str]:
    """The command that continues this run: this interpreter and script, absolute, and the run
    directory as the user named it (``--run-dir`` as an absolute path), then ``--resume``."""
    from purehr.run.planning.resume_command import absolute, script_words

    named = ["--run-dir", absolute(args.run_dir)] if directory_option == "--run-dir" else ["--run-name", args.run_name]
    if not getattr(args, "purehr_command", False) and SCRIPT.is_file():
        return script_words(SCRIPT, named)
    if directory_option == "--run-name" and ROOT != CHECKOUT:  # artifacts/ of this working directory
        named = ["--run-dir", absolute(ROOT / "artifacts" / args.run_name)]
    return [absolute(sys.executable), "-m", "purehr", "train", *named, "--resume"]


def _where_written(error: BaseException, args, run_dir: Path, directory_option: str) -> str:
    """For an OSError on a file in the run directory (a full disk, a folder removed under the
    run): the option that chose the directory and the way out; "" otherwise."""
    filename = getattr(error, "filename", None)
    if not isinstance(error, OSError) or not filename or isinstance(error, FileExistsError):
        return ""
    root = os.path.abspath(run_dir)
    if os.path.commonpath([root, os.path.abspath(filename)]) != root:
        return ""
    given = args.run_dir if directory_option == "--run-dir" else args.run_name
    way = "free space there" if error.errno == errno.ENOSPC else "check it"
    return f" (the run directory, chosen by {directory_option} {given}: {way}, or choose another {directory_option})"


def _stopped_by_ctrl_c(message: str, args, run_dir: Path, directory_option: str, at_once: bool) -> int:
    """Exit status 130 (as a shell reports Ctrl-C; 143 for SIGTERM), no traceback: what stopped
    and the command that continues the run, as the run directory's RESUME.txt holds it (with
    the interpreter that ran this one and a PYTHONPATH its tasks' modules need). ``at_once``:
    the program may still be running in this process, so the process ends now."""
    import signal

    from purehr.run.host.progress import tell
    from purehr.run.outcome import stop_signal_name
    from purehr.run.planning.resume_command import read_resume_command, resume_command

    # One more Ctrl-C would only cut this message short; the caller's handler comes back once it
    # is out (main() called from Python, a notebook, a test: its next Ctrl-C must work again).
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    status = 128 + (signal.SIGTERM if stop_signal_name() == "SIGTERM" else signal.SIGINT)
    command = read_resume_command(run_dir) or resume_command(_resume_words(args, directory_option), [])
    # `| tee log`: the Ctrl-C ended tee too; a closed pipe here still exits as an interruption
    tell(f"\n{message}\n", sys.stderr)
    if Path(run_dir).is_dir():
        tell(f"continue it with:\n  {command}\n", sys.stderr)
    tell("", sys.stdout)
    if at_once:
        os._exit(status)
    signal.signal(signal.SIGINT, previous)
    return status


def _start_jax(args, parser, run_dir: Path) -> None:
    """``jax.distributed``, the precision and the compilation cache, set before anything starts
    JAX's backend; a resume continues in the precision its run was trained in."""
    explicit = {
        "coordinator_address": args.coordinator_address,
        "num_processes": args.num_processes,
        "process_id": args.process_id,
    }
    if any(value is not None for value in explicit.values()) and not args.distributed:
        parser.exit(2, "error: --coordinator-address, --num-processes and --process-id go with --distributed\n")
    if args.distributed:
        from purehr.devices.distributed import initialize_distributed

        try:
            initialize_distributed(**explicit)
        except ValueError as error:
            parser.exit(2, f"error: {error}\n")
    if args.resume and not args.x64 and recorded_precision(run_dir) == "float64":
        print(f"--resume: {run_dir} was trained in float64: continuing in float64 (as with --x64)", file=sys.stderr)
        args.x64 = True
    if args.x64:
        import jax

        jax.config.update("jax_enable_x64", True)
    from purehr.cli.cache_flags import start_compile_cache

    start_compile_cache(args, parser)


def _choose_profile(args, parser, run_dir: Path) -> None:
    """The run's profile (``--profile``; a resume keeps its run's), recorded in ``run_config``;
    a new run's settings take its values under the config file's and the flags'
    (``purehr.cli.config_file.settings_layers``)."""
    from purehr.cli.config_file import settings_layers
    from purehr.cli.profile_flags import profile_line, run_profile
    from purehr.run.planning.run_plan import DEFAULT_TASKS

    try:
        profile, why = run_profile(args.profile, args.resume, run_dir)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    args.profile = profile
    if getattr(args, "run_config", None) is not None:
        args.run_config["values"]["profile"] = profile
    if args.resume:  # the recorded configs hold the profile's values
        print(f"profile {profile} ({why})", file=sys.stderr)
        return
    entries = list(args.tasks or DEFAULT_TASKS)
    layers = settings_layers(args)
    others = {entry: {name for layer in layers[1:] for name in layer.for_entry(entry)} for entry in entries}
    print(profile_line(profile, why, entries, args.algorithm, others), file=sys.stderr)


def _run_request(args) -> dict:
    """What every process passes to ``train_all_seeds`` (process 0 alone writes and reports)."""
    from purehr.cli.config_file import settings_layers
    from purehr.cli.env_args import env_kwargs_from_args
    from purehr.cli.pbt_flags import pbt_from_args
    from purehr.cli.tracking_flags import tracking_from_args

    pbt, seeds = pbt_from_args(args)
    return dict(
        tasks=args.tasks,
        seeds=seeds,
        pbt=pbt,
        env_kwargs=env_kwargs_from_args(args.env_arg, args.tasks, args.brax_backend),
        settings=settings_layers(args),
        algorithm=args.algorithm,
        resume=args.resume,
        devices=args.devices,
        log=tracking_from_args(args),
    )


def _finish_finished_run(args, run_dir: Path) -> int:
    """A run killed after training (before or while rendering) is finished: finish its files."""
    from purehr.reports.dashboards import publish_to_dashboards
    from purehr.run.planning.resume import extension_hint
    from purehr.run.store.run_dir import RunDirectory
    from purehr.viz.render import render_run

    hint = extension_hint(RunDirectory(Path(run_dir)).read_manifest(), " ({})")
    print(f"--resume: {run_dir} holds a finished run: nothing left to train{hint}", file=sys.stderr)
    if missing_figures(run_dir):
        if args.no_render:
            print(f"its figures are missing: {_render_command(args)} --run-dir {run_dir} renders them", file=sys.stderr)
        else:
            print("rendering the figures it is missing", file=sys.stderr)
            render_run(run_dir)
            publish_to_dashboards(run_dir)  # killed before its dashboards had them
    else:
        print("it has all its figures", file=sys.stderr)
    report(run_dir, console=getattr(args, "purehr_command", False))
    return 0


def _follow(args, run_dir: Path, parser) -> int:
    """A process other than 0: its share of the training; process 0 prints the results."""
    import jax

    from purehr.run.outcome import RunFailed
    from purehr.run.planning.preparation import RunAlreadyFinished
    from purehr.run.protocol import train_all_seeds

    try:
        train_all_seeds(run_dir, **_run_request(args), progress=False)
    except RunAlreadyFinished:
        return 0
    except (ValueError, OSError) as error:
        parser.exit(2, f"error: {error}\n")
    except RunFailed as error:
        parser.exit(1, f"error: {error}\n")
    print(f"process {jax.process_index()}: finished its part of {run_dir} (process 0 reports)")
    return 0


def report(run_dir: Path, console: bool = False) -> None:
    """The run's summary: wall time with rendering, the held-out table of the reported checkpoints
    against the baselines, the goals, the figures and the commands to go on with (``console``:
    the ``purehr`` command's, for a run started as ``purehr train``)."""
    from purehr.reports.summary import final_summary

    print("\n" + final_summary(run_dir, scripts_dir=ROOT / "scripts", console=console), end="")


def missing_figures(run_dir: Path) -> bool:
    """Whether ``figures/`` lacks a file the renderer writes for the run's tasks (any task name,
    ``gymnax:CartPole-v1`` included: ``purehr.viz.render.expected_figures``)."""
    from purehr.viz.render import missing_figures as missing

    return bool(missing(run_dir))


def _curricula_from_args(args) -> dict | None:
    """None when --curriculum is not given (a resume then uses the recorded one)."""
    if args.curriculum is None:
        return None
    from purehr.algorithms.registry import split_entry
    from purehr.envs.curriculum import Curriculum

    entries = ["hrv"] if args.tasks is None else [task for task in args.tasks if split_entry(task)[0] == "hrv"]
    if not entries:
        raise ValueError(f"--curriculum applies to the hrv task, which is not in --tasks {args.tasks}")
    curriculum = Curriculum.parse(args.curriculum)
    return dict.fromkeys(entries, curriculum)  # every entry of hrv (hrv, hrv@pqn)


if __name__ == "__main__":
    sys.exit(main())
