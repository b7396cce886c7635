"""The plan of a resume: a resumed run continues what its manifest records (tasks, seeds,
settings, curricula, precision), so whatever the caller asks must agree with that record;
the one change allowed is a larger budget, where the extended run can end bit-identical to an
uninterrupted one (docs/protocol.md, "Extending a run")."""

from __future__ import annotations

import os
import sys

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import algorithm_of
from purehr.engine.user_network import describe
from purehr.envs.curriculum import Curriculum
from purehr.population import PBTSettings
from purehr.protocol_settings import ProtocolSettings
from purehr.run.planning.run_plan import (
    RunPlan,
    RunRequest,
    check_grouping,
    check_log_dir,
    current_precision,
    resolved_settings,
    validate_curricula,
    validate_request,
)
from purehr.run.planning.settings import RECORDED, base_sources
from purehr.run.store.record import TaskRecord, manifest_curricula, recorded_config, recorded_precision, task_record
from purehr.run.store.run_dir import RunDirectory
from purehr.tracking.settings import TrackingSettings


def plan_resume(run_dir: RunDirectory, manifest: dict, request: RunRequest) -> RunPlan:
    """Tasks, seeds, configs, curricula and precision come from the manifest; whatever the
    caller gave must agree with it (refused naming both values), except a larger budget, which
    extends the run where that can be bit-identical (``extension_problem``)."""
    where = f"(manifest.json of {run_dir.root})"
    tasks, seeds = _recorded_tasks_and_seeds(manifest, request, where)
    unknown = request.named_tasks() - set(tasks)
    if unknown:
        raise ValueError(f"--resume: configs given for tasks {sorted(unknown)} that the run does not train ({tasks})")
    records = {task: task_record(manifest, task) for task in tasks}
    _check_algorithm(records, request, where)
    _check_environments(records, request, where)
    _note_changed_versions(manifest, records)
    saved = {task: record.config for task, record in records.items()}
    saved_protocols = {task: record.protocol for task, record in records.items()}
    recorded_sources = manifest.get("setting_sources") or {}
    settings = {
        task: resolved_settings(
            task,
            request,
            saved[task],
            saved_protocols[task],
            recorded_sources.get(task) or base_sources(RECORDED, saved[task], saved_protocols[task]),
        )
        for task in tasks
    }
    wanted = {task: entry.config for task, entry in settings.items()}
    protocols = {task: entry.protocol for task, entry in settings.items()}
    for task in tasks:
        _check_protocol(task, saved_protocols[task], protocols[task], where)
    curricula = validate_curricula(tasks, {task: record.curriculum for task, record in records.items()})
    if request.curricula is not None:
        given = validate_curricula(tasks, request.curricula)
        if given != curricula:
            raise ValueError(
                f"--resume: the run was started with curricula "
                f"{ {k: c.to_dict() for k, c in curricula.items()} }, not "
                f"{ {k: c.to_dict() for k, c in given.items()} }; "
                "resume with the original settings (or omit --curriculum)"
            )
    extended = {}
    for task in tasks:
        budgets = _budget_change(task, saved[task], wanted[task], curricula.get(task), where)
        if budgets is not None:
            extended[task] = budgets
    pbt = _recorded_population(manifest, request, extended)
    tracking = _resumed_tracking(run_dir, manifest, request, tasks, seeds)
    check_grouping(protocols, pbt, tracking)
    return RunPlan(
        run_dir.root,
        tasks,
        seeds,
        wanted,
        curricula,
        manifest,
        extended,
        tracking=tracking,
        pbt=pbt,
        protocols=protocols,
        sources={task: entry.sources for task, entry in settings.items()},
    )


def _check_protocol(task: str, saved: ProtocolSettings, wanted: ProtocolSettings, where: str) -> None:
    """A resume checkpoints and evaluates as the run did: a resumed run ends as an uninterrupted one."""
    old, new = saved.to_dict(), wanted.to_dict()
    differing = [f"{name}: given {new[name]!r}, the run has {old[name]!r}" for name in old if new[name] != old[name]]
    if differing:
        raise ValueError(
            f"--resume: the {task} settings differ from the run's {where}: "
            f"{'; '.join(differing)}. Omit them to continue with the recorded settings"
        )


def _resumed_tracking(
    run_dir: RunDirectory, manifest: dict, request: RunRequest, tasks: list[str], seeds: list[int]
) -> TrackingSettings:
    """The recorded dashboards with the ones asked for now; a --log-dir given now is the
    working directory's, a recorded one absolute (a relative one, of a run from before that,
    is refused: its working directory was not recorded)."""
    recorded = TrackingSettings.from_json(manifest.get("tracking"))
    tracking = recorded.merged_with(request.tracking.absolute()).validated().with_owner()
    relative = recorded.log_dir is not None and not os.path.isabs(recorded.log_dir)
    if relative and request.tracking.log_dir is None and "tensorboard" in tracking.backends:
        raise ValueError(
            f"--resume: the run recorded --log-dir {recorded.log_dir!r} relative to the directory it "
            "was started from, which it did not record; give --log-dir with that folder's absolute path"
        )
    tracking.check_writable(run_dir.root)
    check_log_dir(tracking, run_dir.root, tasks, seeds, recorded)
    return tracking.with_run_ids(tasks, seeds)


def _recorded_population(manifest: dict, request: RunRequest, extended: dict) -> PBTSettings | None:
    """A PBT run resumes with its recorded settings (given ones must equal them) and is never
    extended: a larger budget moves the step's updates, so the extension could not be the run
    an uninterrupted PBT run would have been."""
    recorded = manifest.get("pbt")
    pbt = None if recorded is None else PBTSettings.from_dict(recorded)
    if request.pbt is not None and (pbt is None or request.pbt.to_dict() != pbt.to_dict()):
        raise ValueError(
            f"--resume: the run was started with PBT settings {recorded}, not {request.pbt.to_dict()}; "
            "resume with the original settings (or omit the --pbt flags)"
        )
    if pbt is not None and extended:
        changes = ", ".join(f"{task}: {old:,} -> {new:,} steps" for task, (old, new) in extended.items())
        raise ValueError(
            f"--resume: a PBT run cannot be extended ({changes}); the step's updates depend on the budget. "
            "Start a new run with the larger --steps"
        )
    return pbt


def _check_algorithm(records: dict[str, TaskRecord], request: RunRequest, where: str) -> None:
    """``--algorithm`` given on a resume must be what the run's entries without a suffix trained."""
    if request.algorithm is None:
        return
    for task, record in records.items():
        recorded = algorithm_of(record.config).name
        if record.task.algorithm is None and recorded != request.algorithm:
            raise ValueError(
                f"--resume: task {task!r} was trained by {recorded} {where}, not {request.algorithm}; "
                "omit --algorithm to continue with the recorded one"
            )


def _check_environments(records: dict[str, TaskRecord], request: RunRequest, where: str) -> None:
    """Environment arguments given on a resume must build the environment the run recorded."""
    for task, kwargs in request.env_kwargs.items():
        if task not in records:
            raise ValueError(f"--resume: environment arguments given for {task!r}, which the run does not train")
        record = records[task]
        recorded, given = record.task.env_kwargs(record.env), record.task.env_kwargs(record.task.make_env(**kwargs))
        if given != recorded:
            raise ValueError(
                f"--resume: the {task} environment was recorded with {recorded} {where}, not {given}; "
                "omit --env-arg to continue with the recorded environment"
            )


def _note_changed_versions(manifest: dict, records: dict[str, TaskRecord]) -> None:
    """A suite package of another version than the run's may compute other numbers, and so may
    a user's network whose source changed: said, not refused."""
    for task, record in records.items():
        network_changed = changed_network_source(manifest, task)
        if network_changed:
            print(f"note: --resume: {network_changed}", file=sys.stderr)
        recorded = ((manifest.get("sources") or {}).get(task) or {}).get("versions") or {}
        installed = record.task.source(record.env).get("versions") or {}
        changed = {name: (old, installed.get(name)) for name, old in recorded.items() if installed.get(name) != old}
        if changed:
            shown = ", ".join(f"{name} {old} -> {new}" for name, (old, new) in changed.items())
            print(
                f"note: --resume: {task} was trained with other package versions ({shown}); the resumed run "
                "may not end bit-identical to an uninterrupted one",
                file=sys.stderr,
            )


def changed_network_source(manifest: dict, task: str) -> str | None:
    """What changed in the user's network ``task`` trained with (its file's source digest), or None."""
    recorded = (manifest.get("networks") or {}).get(task)
    if not recorded:
        return None
    now = describe(recorded["spec"])
    if now["source_digest"] == recorded["source_digest"]:
        return None
    return (
        f"{task}'s network {recorded['spec']} ({now['file']}) changed since the run recorded it (source sha256 "
        f"{recorded['source_digest'][:12]} -> {now['source_digest'][:12]}): it may not compute what the run did"
    )


def _recorded_tasks_and_seeds(manifest: dict, request: RunRequest, where: str) -> tuple[list[str], list[int]]:
    """The run's tasks and seeds, which the request's (if given) must equal, in the precision
    this process computes in."""
    if request.tasks is not None and list(request.tasks) != manifest["tasks"]:
        raise ValueError(
            f"--resume: --tasks {' '.join(request.tasks)} does not match the run's tasks "
            f"{' '.join(manifest['tasks'])} {where}; omit --tasks to continue with the recorded ones"
        )
    if request.seeds is not None and list(request.seeds) != manifest["seeds"]:
        raise ValueError(
            f"--resume: --seeds {' '.join(map(str, request.seeds))} does not match the run's seeds "
            f"{' '.join(map(str, manifest['seeds']))} {where}; omit --seeds to continue with the "
            "recorded ones"
        )
    tasks, seeds = validate_request(manifest["tasks"], manifest["seeds"])
    precision = recorded_precision(manifest)
    if precision != current_precision():
        flag = "with --x64" if precision == "float64" else "without --x64"
        raise ValueError(
            f"--resume: the run was trained in {precision} and this process computes in "
            f"{current_precision()}; a resume in another precision cannot continue it bit for "
            f"bit: resume {flag}"
        )
    return tasks, seeds


def _budget_change(
    task: str, saved: AlgorithmConfig, wanted: AlgorithmConfig, curriculum: Curriculum | None, where: str
) -> tuple[int, int] | None:
    """(old, new budget) when ``wanted`` extends the run, None when it continues it as it is;
    any other difference from the recorded settings is refused."""
    old, new = saved.to_dict(), wanted.to_dict()
    differing = [
        f"{name}: given {new[name]!r}, the run has {old[name]!r}"
        for name in old
        if name != "total_timesteps" and new[name] != old[name]
    ]
    if differing:
        raise ValueError(
            f"--resume: the {task} settings differ from the run's {where}: "
            f"{'; '.join(differing)}. Omit them to continue with the recorded settings"
        )
    before, after = old["total_timesteps"], new["total_timesteps"]
    if after < before:
        raise ValueError(
            f"--resume: --steps {after:,} is below the run's {task} budget of {before:,} steps "
            "per seed; a run cannot be shortened (restore an earlier checkpoint with "
            "purehr.run.restore(..., step=N) instead), omit --steps to continue it"
        )
    if after == before:
        return None
    problem = extension_problem(task, saved, curriculum, before, after)
    if problem:
        raise ValueError(problem)
    return before, after


def extension_hint(manifest: dict, form: str = "{}") -> str:
    """ "a larger --steps extends it" where every task of the run can be extended, else "".
    Reads the record leniently (a config that does not read back: no hint): it words messages
    about runs that may be damaged."""
    curricula = manifest_curricula(manifest)

    def extendable(task: str) -> bool:
        try:
            config = recorded_config(manifest, task)
        except (KeyError, TypeError, ValueError):
            return False
        return budget_dependence(config) is None and task not in curricula

    return (
        form.format("a larger --steps extends it, docs/protocol.md") if all(map(extendable, manifest["tasks"])) else ""
    )


def extension_problem(
    task: str, config: AlgorithmConfig, curriculum: Curriculum | None, before: int, after: int
) -> str | None:
    """Why a run of ``before`` steps cannot be extended to ``after`` bit-identically, or None.
    An extended run must end exactly where an uninterrupted run of ``after`` steps ends, so
    nothing the first ``before`` steps computed may depend on the budget (docs/protocol.md)."""
    reason = budget_dependence(config)  # the algorithm's schedules over the budget (an annealed rate, ...)
    if reason is None and curriculum is not None:
        reason = "its curriculum's stages are fractions of the budget"
    if reason is None:
        return None
    return (
        f"--resume --steps {after:,}: cannot extend {task} from {before:,} to {after:,} steps: {reason}, so the "
        f"first {before:,} steps of a {after:,}-step run are not this run's, and no extension could end "
        f"bit-identical to an uninterrupted run. Start a new run with --steps {after:,} (another --run-name or "
        "--run-dir)"
    )


def budget_dependence(config: AlgorithmConfig) -> str | None:
    """Why ``config``'s first updates depend on its budget (its ``budget_dependence``), or None."""
    depends = getattr(config, "budget_dependence", None)
    return depends() if depends is not None else None
