"""Bad inputs at the edges (scripts, the seed API, saved models, checkpoints): each refused
with a message naming the value and what was expected, before any work, writing nothing.

One table, ``CASES``: a row prepares its inputs under a fresh directory, makes one call, and
states the exception (or exit code) and a fragment of the message; every row also checks that
the call wrote, changed and removed nothing under that directory. No row compiles a program.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.ppo.algorithm import make_ppo
from purehr.algorithms.trainer import make_train
from purehr.cli.arguments import HelpFormatter, parse_bool
from purehr.envs.base import Environment
from purehr.envs.hrv import HRWritingEnv
from purehr.model.facade import PPOModel, train_hr_ppo
from purehr.model.saved import DamagedModelError, description_digest
from purehr.tasks import HRV_DEFAULTS

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.py")) + sorted((ROOT / "studies" / "scripts").glob("*.py"))
SCRIPTS += sorted((ROOT / "benchmarks").glob("[!_]*.py"))  # not _common.py
TINY = HRV_DEFAULTS.replace(
    num_envs=8, num_steps=16, minibatch_size=64, actor_hidden=(16,), critic_hidden=(16,), total_timesteps=128
)


def load_script(path: Path):
    """A script as a module (registered: dataclasses need it), its main() not run."""
    name = f"edges_{path.parent.name}_{path.stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))  # as `python path` runs it: benchmarks/_common importable
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
    return sys.modules[name]


def cli(script: str, *argv: str) -> Callable[[Path], Any]:
    """A call of ``<script>.main(argv)``; ``{tmp}`` in an argument is the row's directory."""

    def call(tmp: Path):
        module = load_script(ROOT / script)
        return module.main([arg.replace("{tmp}", str(tmp)) for arg in argv])

    return call


# --- saved models ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model() -> PPOModel:
    """A small untrained model (initial parameters): what load checks does not depend on training."""
    env = HRWritingEnv(hrv_dim=8)
    params = make_ppo(TINY, env, env.default_params).init(jax.random.PRNGKey(0)).params
    return PPOModel(env, env.default_params, TINY, params, {"loss": np.arange(3, dtype=np.float32)}, seed=0)


def saved(model: PPOModel, tmp: Path, **env_param_changes) -> Path:
    copy = PPOModel(
        model.env, model.env_params.replace(**env_param_changes), model.config, model.params, model.metrics, model.seed
    )
    return copy.save(tmp / "model")


def edit_description(path: Path, change: Callable[[dict], None], reseal: bool = True) -> None:
    """``change`` model.json; ``reseal`` records the edited content's SHA-256 in it (a forged or
    hand-fixed description), so the row reaches the checks behind that digest."""
    description = json.loads((path / "model.json").read_text())
    change(description)
    if reseal and "model_json_sha256" in description:
        description["model_json_sha256"] = description_digest(description)
    (path / "model.json").write_text(json.dumps(description))


class DuckEnv:
    """An environment by duck typing that forgot ``name`` (the docs say it needs one)."""

    def __init__(self):
        self.env = HRWritingEnv(hrv_dim=2)
        self.default_params = self.env.default_params
        for method in ("reset", "step", "observation_space", "action_space", "diagnostics"):
            setattr(self, method, getattr(self.env, method))


class HalfEnv(Environment):
    """An ``Environment`` subclass that implements only its params."""

    name = "half"
    default_params = None


def flip_byte(path: Path, offset: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if offset is None else offset] ^= 0xFF
    path.write_bytes(bytes(data))


# --- the table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    call: Callable[[Path, PPOModel], Any]
    raises: type[BaseException]
    message: str
    exit_code: int | None = None  # SystemExit's code, for scripts
    setup: Callable[[Path, PPOModel], None] = lambda tmp, model: None


def script_case(name, script, argv, message, setup=lambda tmp, model: None, exit_code=2):
    call = cli(script, *argv)
    return Case(name, lambda tmp, model: call(tmp), SystemExit, message, exit_code, setup)


def with_cache_dir(relative: str, call: Callable[[Path], Any]) -> Callable[[Path, PPOModel], Any]:
    """``call`` with PUREHR_CACHE_DIR set to ``{tmp}/<relative>`` (restored after)."""

    def run(tmp: Path, model: PPOModel) -> Any:
        before = os.environ.get("PUREHR_CACHE_DIR")
        os.environ["PUREHR_CACHE_DIR"] = str(tmp / relative)
        try:
            return call(tmp)
        finally:
            if before is None:
                os.environ.pop("PUREHR_CACHE_DIR", None)
            else:
                os.environ["PUREHR_CACHE_DIR"] = before

    return run


def full_disk_save(tmp: Path, model: PPOModel) -> None:
    """A checkpoint saved on a disk that reports 1 kB free (``shutil.disk_usage`` as the
    checkpoints see it): a real full disk made Orbax's save fail mid-write into about 100
    "Event loop is closed" tracebacks (issue 48)."""
    import shutil

    from purehr.run.store import checkpoints

    free = shutil.disk_usage(tmp)._replace(free=1000)
    original, checkpoints.shutil.disk_usage = checkpoints.shutil.disk_usage, lambda path: free
    try:
        checkpoints.SeedCheckpoints(tmp / "checkpoints").save(0, {"weights": np.ones(4096, np.float32)}, pending=5)
    finally:
        checkpoints.shutil.disk_usage = original


def save_case(name, message, setup=lambda tmp, model: None, raises=FileExistsError, **save_options):
    """``model.save(<row dir>/model, **save_options)`` refused."""
    return Case(name, lambda tmp, model: model.save(tmp / "model", **save_options), raises, message, setup=setup)


def write(relative: str, text: str):
    def setup(tmp: Path, model: PPOModel) -> None:
        (tmp / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp / relative).write_text(text)

    return setup


def a_sweep(settings_of: Callable[[], dict] | None):
    """An existing sweep.json whose recorded settings are ``settings_of()`` (None: other ones)."""

    def setup(tmp: Path, model: PPOModel) -> None:
        from purehr.experiments import sweep

        settings = settings_of() if settings_of else {"task": "swing"}
        (tmp / "out").mkdir()
        (tmp / "out" / "sweep.json").write_text(json.dumps({"command": ["x"], "groups": [], "settings": settings}))
        (tmp / "out" / "ranking.csv").write_text("rank\n1\n")
        assert sweep.read_sweep(tmp / "out") is not None

    return setup


def settings_of_the_sweep_below() -> dict:
    from purehr.experiments import sweep

    base = HRV_DEFAULTS.replace(total_timesteps=2048)
    return sweep.sweep_settings("hrv", base, {"learning_rate": (1e-4,)}, {}, [0, 1, 2])


def a_finished_run(last_row: str = "64,64,hrv/seed_0/checkpoints/64,,", folders: tuple[str, ...] = ()):
    """A finished hrv run of seed 0 in ``{tmp}/run``, built by hand: checkpoints.csv's last row is
    ``last_row`` (target, actual, checkpoint_path, showcase_path, state_digest) and only the
    checkpoint ``folders`` exist, empty (what publish checks before reading any checkpoint)."""

    def setup(tmp: Path, model: PPOModel) -> None:
        from purehr.run.status import PROTOCOL_TEXT

        run = tmp / "run"
        seed = run / "hrv" / "seed_0"
        seed.mkdir(parents=True)
        configs = {"hrv": TINY.to_dict()}
        manifest = dict(status="finished", tasks=["hrv"], seeds=[0], configs=configs, protocol=PROTOCOL_TEXT)
        (run / "manifest.json").write_text(json.dumps(manifest))
        (seed / "updates.csv").write_text("update,env_steps\n1,64\n")
        header = "target_steps,actual_steps,checkpoint_path,showcase_path,state_digest"
        (seed / "checkpoints.csv").write_text(f"{header}\n0,0,hrv/seed_0/checkpoints/0,,\n{last_row}\n")
        for folder in folders:
            (seed / "checkpoints" / folder).mkdir(parents=True)
        (tmp / "victim_src").mkdir()
        (tmp / "victim_src" / "data.txt").write_text("not the run's\n")

    return setup


def own_env_case(name, changes, argv, message, exit_code=2, example="my_env.py"):
    """``scripts/train_all_seeds.py --tasks <module>:make_env argv`` on a copy of
    examples/my_env.py (or another ``example``) with ``changes`` (old line -> new line) made, as
    a user's own module in ``{tmp}/mods`` (no bytecode written: the row checks nothing was)."""
    module = "own_" + "".join(c if c.isalnum() else "_" for c in name)
    task = f"{module}:make_env"
    argv = [arg.replace("{task}", task) for arg in argv]
    train = cli(
        "scripts/train_all_seeds.py",
        "--tasks",
        task,
        "--seeds",
        "0",
        "--steps",
        "1024",
        "--run-dir",
        "{tmp}/run",
        "--no-render",
        *argv,
    )

    def setup(tmp: Path, model: PPOModel) -> None:
        source = (ROOT / "examples" / example).read_text()
        for old, new in changes.items():
            assert old in source, old
            source = source.replace(old, new)
        (tmp / "mods").mkdir()
        (tmp / "mods" / f"{module}.py").write_text(source)

    def call(tmp: Path, model: PPOModel):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sys, "dont_write_bytecode", True)
            patch.syspath_prepend(str(tmp / "mods"))
            return train(tmp)

    return Case(name, call, SystemExit, message.replace("{task}", task), exit_code, setup)


GRU_FLAGS = (
    "--tasks",
    "hrv",
    "--steps",
    "1024",
    "--num-envs",
    "8",
    "--num-steps",
    "64",
    "--run-dir",
    "{tmp}/run",
    "--no-render",
)


PUBLISH = ("scripts/publish_run.py", "{tmp}/run", "{tmp}/record")
SWEEP = ("scripts/sweep.py", "--task", "hrv", "--learning-rate", "1e-4", "--steps", "2048", "--out", "{tmp}/out")
EVALUATE = "scripts/evaluate.py"
THROUGHPUT = "benchmarks/throughput.py"
LIMITS = "studies/scripts/limits.py"
TRAIN_TINY = ("--tasks", "hrv", "--seeds", "0", "--steps", "512", "--num-envs", "8", "--num-steps", "64")
TRAIN_TINY += ("--minibatch-size", "128", "--no-render", "--run-dir", "{tmp}/run")
LIMITS_RECORD = ("--protocol", str(ROOT / "results" / "protocol"), "--out", "{tmp}/out")

CASES = [
    # scripts/sweep.py: seeds and --out, refused before any compile, no empty --out left behind
    script_case("sweep seeds -1", SWEEP[0], [*SWEEP[1:], "--seeds", "-1"], "seeds=[-1]"),
    script_case("sweep seeds 0 0", SWEEP[0], [*SWEEP[1:], "--seeds", "0", "0"], "seeds=[0, 0]"),
    script_case(
        "sweep seeds 2**32",
        SWEEP[0],
        [*SWEEP[1:], "--seeds", "4294967296"],
        "4294967296 is above 4,294,967,295; expected seeds from 0 to 2**32 - 1",
    ),
    script_case(
        "sweep out holds no sweep",
        SWEEP[0],
        SWEEP[1:],
        "holds no purehr sweep (it has runs.csv)",
        write("out/runs.csv", "mine\n"),
    ),
    script_case(
        "sweep out holds no sweep, --overwrite",
        SWEEP[0],
        [*SWEEP[1:], "--overwrite"],
        "holds no purehr sweep",
        write("out/runs.csv", "mine\n"),
    ),
    script_case("sweep out is a file", SWEEP[0], SWEEP[1:], "is a file", write("out", "mine\n")),
    script_case(
        "sweep out holds another sweep", SWEEP[0], SWEEP[1:], "already holds a sweep of other settings", a_sweep(None)
    ),
    script_case(
        "sweep out holds this sweep",
        SWEEP[0],
        SWEEP[1:],
        "already holds a sweep of the same settings",
        a_sweep(settings_of_the_sweep_below),
    ),
    # scripts/publish_run.py: every path of the run's CSVs checked before anything is read or copied
    script_case(
        "publish checkpoint_path out of the run",
        PUBLISH[0],
        PUBLISH[1:],
        "checkpoints.csv: checkpoint_path of the row at actual_steps 64 leads outside the run directory",
        a_finished_run("64,64,../victim_src,,", folders=("0", "64")),
    ),
    script_case(
        "publish checkpoint_path of another seed",
        PUBLISH[0],
        PUBLISH[1:],
        "is 'hrv/seed_0/checkpoints/0'; expected this seed's checkpoint folder hrv/seed_0/checkpoints/64",
        a_finished_run("64,64,hrv/seed_0/checkpoints/0,,", folders=("0", "64")),
    ),
    script_case(
        "publish last checkpoint deleted",
        PUBLISH[0],
        PUBLISH[1:],
        "the last checkpoint {tmp}/run/hrv/seed_0/checkpoints/64 is missing",
        a_finished_run(folders=("0",)),
    ),
    script_case(
        "publish showcase_path out of the run",
        PUBLISH[0],
        PUBLISH[1:],
        "showcase_path of the row at actual_steps 64 leads outside the run directory",
        a_finished_run("64,64,hrv/seed_0/checkpoints/64,/etc/hostname,", folders=("0", "64")),
    ),
    script_case(
        "publish checkpoints.csv cut mid-row",
        PUBLISH[0],
        PUBLISH[1:],
        "checkpoints.csv: line 3 ends after 1 of 5 fields (cut short?)",
        a_finished_run("64"),
    ),
    # issue 48: a record inside its own run directory
    script_case(
        "publish into the run itself",
        PUBLISH[0],
        [PUBLISH[1], "{tmp}/run/record"],
        "{tmp}/run/record lies inside the run {tmp}/run it would copy; publish into a directory outside it",
        a_finished_run(folders=("0", "64")),
    ),
    # issue 48: a full disk (simulated): one line naming the folder and the space, before Orbax writes
    Case(
        "checkpoint save on a full disk",
        full_disk_save,
        OSError,
        "[Errno 28] No space left on device for a checkpoint: {tmp}/checkpoints has 0.0 MB free, "
        "5 checkpoints of this event need about 0.2 MB",
        setup=lambda tmp, model: (tmp / "checkpoints").mkdir(),
    ),
    # issue 48: PUREHR_CACHE_DIR naming a file (JAX warned about every entry and the run went on)
    Case(
        "PUREHR_CACHE_DIR is a file",
        with_cache_dir("cache", cli("scripts/train_all_seeds.py", *TRAIN_TINY)),
        SystemExit,
        "PUREHR_CACHE_DIR={tmp}/cache is a file, not a folder",
        2,
        write("cache", "mine\n"),
    ),
    Case(
        "PUREHR_CACHE_DIR below a file",
        with_cache_dir("cache/purehr", cli("scripts/evaluate.py", "--task", "hrv", "--policy", "oracle")),
        SystemExit,
        "PUREHR_CACHE_DIR={tmp}/cache/purehr: {tmp}/cache is a file, not a folder",
        2,
        write("cache", "mine\n"),
    ),
    # benchmarks/throughput.py: outputs and counts checked before the benchmark runs
    script_case("throughput json is a directory", THROUGHPUT, ["--quick", "--json", "{tmp}"], "is a directory"),
    script_case(
        "throughput json under a file",
        THROUGHPUT,
        ["--quick", "--json", "{tmp}/file/out.json"],
        "is a file, not a directory",
        write("file", "x"),
    ),
    script_case("throughput envs 0", THROUGHPUT, ["--envs", "0"], "0: expected a positive integer"),
    script_case("throughput report missing", THROUGHPUT, ["--report", "{tmp}/missing.json"], "no such file"),
    # studies/scripts/limits.py: the protocol record, its seeds, the budget and --out, refused before any import of JAX
    script_case(
        "limits protocol missing", LIMITS, ["--protocol", "{tmp}/none"], "--protocol {tmp}/none: no such directory"
    ),
    script_case(
        "limits protocol without swing",
        LIMITS,
        ["--protocol", "{tmp}/rec", "--out", "{tmp}/out"],
        "the run has no swing",
        write("rec/manifest.json", '{"tasks": ["hrv"], "seeds": [0]}'),
    ),
    script_case("limits unknown seed", LIMITS, [*LIMITS_RECORD, "--seeds", "7"], "--seeds 7: not in --protocol"),
    script_case("limits starts 0", LIMITS, [*LIMITS_RECORD, "--starts", "0"], "--starts 0: expected 1 to 100"),
    script_case(
        "limits rounds -1", LIMITS, [*LIMITS_RECORD, "--rounds", "-1"], "--rounds -1: expected an integer >= 0"
    ),
    script_case("limits out not empty", LIMITS, LIMITS_RECORD, "is not empty", write("out/mine.txt", "mine\n")),
    # issue 48 defect 8: --overwrite replaced a user's README.md and swing.csv (no limits run there)
    script_case(
        "limits out holds no limits run, --overwrite",
        LIMITS,
        [*LIMITS_RECORD, "--overwrite"],
        "holds no limits run (it has README.md, swing.csv); choose a new or empty --out (--overwrite replaces "
        "only an earlier limits run's files)",
        lambda tmp, model: (
            write("out/README.md", "my notes\n")(tmp, model),
            write("out/swing.csv", "mine\n")(tmp, model),
        ),
    ),
    script_case(
        "limits out holds another script's summary.json, --overwrite",
        LIMITS,
        [*LIMITS_RECORD, "--overwrite"],
        "holds no limits run (it has summary.json)",
        write("out/summary.json", '{"record": {"command": ["python", "scripts/other.py"]}}'),
    ),
    script_case(
        "throughput report not JSON",
        THROUGHPUT,
        ["--report", "{tmp}/r.json"],
        "is not JSON",
        write("r.json", "not json"),
    ),
    script_case(
        "throughput report other JSON",
        THROUGHPUT,
        ["--report", "{tmp}/r.json"],
        "lacks ['records'",
        write("r.json", "{}"),
    ),
    # scripts/evaluate.py
    script_case(
        "evaluate checkpoint is a file",
        EVALUATE,
        ["--task", "hrv", "--checkpoint", "{tmp}/run"],
        "--checkpoint " + "{tmp}/run is a file; expected a run directory",
        write("run", "x"),
    ),
    script_case(
        "evaluate 10^8 episodes",
        EVALUATE,
        ["--task", "hrv", "--policy", "oracle", "--num-episodes", "100000000"],
        "expected 1 to 100,000",
    ),
    script_case(
        "evaluate 0 episodes",
        EVALUATE,
        ["--task", "hrv", "--policy", "oracle", "--num-episodes", "0"],
        "--num-episodes 0: expected 1 to 100,000",
    ),
    # scripts/train_all_seeds.py: boolean spellings
    script_case(
        "train anneal-lr maybe",
        "scripts/train_all_seeds.py",
        ["--anneal-lr", "maybe", "--run-dir", "{tmp}/r"],
        "'maybe' is not a boolean; expected one of true/yes/1/on or false/no/0/off",
    ),
    # the seed API
    Case(
        "train_hr_ppo of a string",
        lambda tmp, model: train_hr_ppo("hrv", timesteps=128),
        TypeError,
        "env is the str 'hrv'; expected an Environment instance",
    ),
    Case(
        "train_hr_ppo of the class",
        lambda tmp, model: train_hr_ppo(HRWritingEnv, timesteps=128),
        TypeError,
        "env is the class HRWritingEnv; expected an instance: HRWritingEnv()",
    ),
    Case(
        "predict a 7-long vector",
        lambda tmp, model: model.predict(dict(_observation(model), current_hrv=np.zeros(7, np.float32))),
        ValueError,
        "observation['current_hrv'] has shape (7,); expected (8,) (one observation) or (N, 8)",
    ),
    Case(
        "predict without a key",
        lambda tmp, model: model.predict({k: v for k, v in _observation(model).items() if k != "gap"}),
        ValueError,
        "missing ['gap']",
    ),
    Case(
        "predict batches that disagree",
        lambda tmp, model: model.predict(
            {k: np.stack([v] * (3 if k == "gap" else 2)) for k, v in _observation(model).items()}
        ),
        ValueError,
        "disagree on the batch",
    ),
    Case(
        "evaluate 0 episodes (API)",
        lambda tmp, model: model.evaluate(num_episodes=0),
        ValueError,
        "num_episodes=0: expected an integer from 1 to 100,000",
    ),
    Case(
        "evaluate -5 episodes (API)", lambda tmp, model: model.evaluate(num_episodes=-5), ValueError, "num_episodes=-5"
    ),
    Case(
        "evaluate 10^8 episodes (API)",
        lambda tmp, model: model.evaluate(num_episodes=10**8),
        ValueError,
        "num_episodes=100000000",
    ),
    # saved models: PPOModel.load
    Case(
        "load a flipped byte in params.msgpack",
        lambda tmp, model: PPOModel.load(tmp / "model"),
        DamagedModelError,
        "params.msgpack does not match the SHA-256 recorded",
        setup=lambda tmp, model: flip_byte(saved(model, tmp) / "params.msgpack"),
    ),
    Case(
        "load a flipped byte in metrics.npz",
        lambda tmp, model: PPOModel.load(tmp / "model"),
        DamagedModelError,
        "metrics.npz does not match the SHA-256 recorded",
        setup=lambda tmp, model: flip_byte(saved(model, tmp) / "metrics.npz"),
    ),
    Case(
        "load target_precision=nan",
        lambda tmp, model: PPOModel.load(tmp / "model"),
        ValueError,
        "HRVParams.target_precision=nan, expected > 0",
        setup=lambda tmp, model: saved(model, tmp, target_precision=jnp.float32(jnp.nan)),
    ),
    Case(
        "load step_size=-1",
        lambda tmp, model: PPOModel.load(tmp / "model"),
        ValueError,
        "HRVParams.step_size=-1.0, expected > 0",
        setup=lambda tmp, model: saved(model, tmp, step_size=jnp.float32(-1.0)),
    ),
    Case(
        "load model.json with another hrv_dim",
        lambda tmp, model: PPOModel.load(tmp / "model"),
        ValueError,
        "env_params.msgpack: style_vectors has shape (5, 8), but the HRWritingEnv parameters",
        setup=lambda tmp, model: edit_description(saved(model, tmp), lambda d: d["env"]["kwargs"].update(hrv_dim=9)),
    ),
    Case(
        "load model.json with another width",
        lambda tmp, model: PPOModel.load(tmp / "model"),
        ValueError,
        "params/actor/Dense_0/kernel has shape (53, 16), but the network of",
        setup=lambda tmp, model: edit_description(saved(model, tmp), lambda d: d["config"].update(actor_hidden=[32])),
    ),
    Case(
        "load seed 'zero'",
        lambda tmp, model: PPOModel.load(tmp / "model"),
        ValueError,
        "seed is 'zero'; expected a non-negative integer",
        setup=lambda tmp, model: edit_description(saved(model, tmp), lambda d: d.update(seed="zero")),
    ),
    Case(
        "load model.json not JSON",
        lambda tmp, model: PPOModel.load(tmp / "model"),
        DamagedModelError,
        "model.json is not JSON",
        setup=lambda tmp, model: (saved(model, tmp) / "model.json").write_text("{"),
    ),
    Case(
        "load an unknown config field",
        lambda tmp, model: PPOModel.load(tmp / "model"),
        ValueError,
        "config is not a valid PPOConfig: unknown PPOConfig field(s) ['speed']",
        setup=lambda tmp, model: edit_description(saved(model, tmp), lambda d: d["config"].update(speed=1)),
    ),
    # issue 27, defect 7: model.json itself is covered by its digest
    Case(
        "load model.json edited (activation tanh)",
        lambda tmp, model: PPOModel.load(tmp / "model"),
        DamagedModelError,
        "model.json has changed since the model was saved (its content no longer matches the SHA-256",
        setup=lambda tmp, model: edit_description(
            saved(model, tmp), lambda d: d["config"].update(activation="tanh"), reseal=False
        ),
    ),
    # issue 27, defect 8: saving writes over nothing it did not write
    save_case(
        "save over a user's params.msgpack",
        "model holds ['params.msgpack'], which is not a saved model; save into a new or empty folder",
        write("model/params.msgpack", "mine"),
    ),
    save_case(
        "save over a saved model",
        "model already holds a saved model; pass overwrite=True to replace it",
        lambda tmp, model: saved(model, tmp),
    ),
    save_case("save onto a file", "model is a file; expected a new or empty folder", write("model", "mine")),
    save_case("save overwrite='yes'", "overwrite='yes': expected True or False", overwrite="yes", raises=TypeError),
    # issue 27: a dict as environment parameters, an environment without what training needs
    Case(
        "make_ppo with a dict as env params",
        lambda tmp, model: make_ppo(TINY, model.env, {"step_size": 0.1}),
        TypeError,
        "env_params is a dict; expected the environment's parameters, a HRVParams "
        "(e.g. env.default_params.replace(step_size=...))",
    ),
    Case(
        "make_train with a dict as env params",
        lambda tmp, model: make_train(TINY, model.env, {"step_size": 0.1}),
        TypeError,
        "env_params is a dict; expected the environment's parameters, a HRVParams",
    ),
    Case(
        "PPOModel with a dict as env params",
        lambda tmp, model: PPOModel(model.env, {"step_size": 0.1}, TINY, model.params, {}, 0),
        TypeError,
        "env_params is a dict; expected the environment's parameters, a HRVParams",
    ),
    Case(
        "train_hr_ppo with a dict as env params",
        lambda tmp, model: train_hr_ppo(model.env, timesteps=128, env_params={"step_size": 0.1}),
        TypeError,
        "env_params is a dict; expected the environment's parameters, a HRVParams",
    ),
    Case(
        "make_ppo of a duck-typed env without name",
        lambda tmp, model: make_ppo(TINY, DuckEnv()),
        TypeError,
        "DuckEnv lacks ['name'], which training needs of an environment (purehr.envs.base.Environment:",
    ),
    Case(
        "make_ppo of an Environment that implements no step",
        lambda tmp, model: make_ppo(TINY, HalfEnv()),
        TypeError,
        "HalfEnv does not implement ['action_space', 'observation_space', 'reset', 'step']",
    ),
    # issue 48: a user's environment's step outputs, checked by name when the task is resolved
    # issue 52, item 1: an "action_mask" observation entry that is not one 0/1 per choice
    own_env_case(
        "own env action mask of the wrong width",
        {"return spaces.Discrete((self._params if params is None else params).cells)": "return spaces.Discrete(8)"},
        [],
        "task '{task}': observation entry 'action_mask' has shape (9,); expected (8,): one 0/1 per choice of "
        "Discrete(n=8)",
        example="masked_game.py",
    ),
    own_env_case(
        "own env terminated float",
        {"        terminated = success\n": "        terminated = success * 0.5\n"},
        [],
        "PointReach.step: terminated has dtype float32 and shape (); expected dtype bool and shape ()",
    ),
    own_env_case(
        "own env truncated int",
        {"jnp.logical_not(success))\n": "jnp.logical_not(success)).astype(jnp.int32)\n"},
        [],
        "PointReach.step: truncated has dtype int32 and shape (); expected dtype bool and shape ()",
    ),
    own_env_case(
        "own env observation longer than its space",
        {"state.position]).astype": "state.position, state.goal[:1]]).astype"},
        [],
        "PointReach.reset: observation has shape (5,); expected (4,), the shape of observation_space",
    ),
    own_env_case(
        "own env reward of shape (1,)",
        {"reward.astype(jnp.float32), terminated": "reward.reshape(1).astype(jnp.float32), terminated"},
        [],
        "PointReach.step: reward has dtype float32 and shape (1,); expected a float or integer dtype and shape ()",
    ),
    own_env_case(
        "own env state that changes shape",
        {"time = state.time + 1\n": "time = state.time + jnp.ones(1, jnp.int32)\n"},
        [],
        "PointReach.step: the next state's .time has dtype int32 and shape (1,); expected dtype int32 and "
        "shape (), as reset returned it",
    ),
    own_env_case(
        "own env factory raises",
        {"    return PointReach(**kwargs)\n": "    raise RuntimeError('no licence for the simulator')\n"},
        [],
        "error: task '{task}': make_env() raised RuntimeError: no licence for the simulator",
    ),
    # issue 52: the packages a factory module declares, whose versions the run records
    own_env_case(
        "own env PACKAGES not installed",
        {"from purehr.envs import spaces\n": "from purehr.envs import spaces\n\nPACKAGES = ('purehr-no-such-dist',)\n"},
        [],
        "PACKAGES names 'purehr-no-such-dist', which is not an installed distribution",
    ),
    own_env_case(
        "own env PACKAGES a string",
        {"from purehr.envs import spaces\n": "from purehr.envs import spaces\n\nPACKAGES = 'numpy'\n"},
        [],
        "PACKAGES is 'numpy'; expected a tuple of distribution names, e.g. PACKAGES = (\"pgx\",)",
    ),
    # issue 52, friction 3: the reference policies a factory module names
    own_env_case(
        "own env BASELINES entry not callable",
        {"# BASELINES = {": "BASELINES = {'greedy': 1, "},
        [],
        "BASELINES['greedy'] is 1, which is not callable; expected make_policy(env, env_params) returning "
        "policy(obs, t, key) -> action",
    ),
    own_env_case(
        "own env BASELINES entry named as a floor",
        {'# BASELINES = {"straight"': 'BASELINES = {"random"'},
        [],
        "baseline 'random' clashes with a floor or another baseline",
    ),
    own_env_case(
        "own env REFERENCE_BASELINE not in BASELINES",
        {"# BASELINES = ": "BASELINES = ", '# REFERENCE_BASELINE = "straight"': 'REFERENCE_BASELINE = "greedy"'},
        [],
        "the reference baseline 'greedy' is none of its baselines ['straight']",
    ),
    own_env_case(
        "own env max_steps 1e9",
        {},
        ["--env-arg", "{task}", "max_steps=1e9"],
        "its episodes last 1,000,000,000 steps (max_episode_steps); expected at most 100,000",
    ),
    # issue 48: the GRU's flags without the GRU, and a network that cannot fit in memory
    script_case(
        "train recurrent-width with the mlp policy",
        "scripts/train_all_seeds.py",
        [*GRU_FLAGS, "--seeds", "0", "--recurrent-width", "256"],
        "recurrent_width=256 applies to policy='gru'; task 'hrv' trains policy='mlp' (add --policy gru, or leave "
        "out --recurrent-width)",
    ),
    script_case(
        "train recurrent-skip with the mlp policy",
        "scripts/train_all_seeds.py",
        [*GRU_FLAGS, "--seeds", "0", "--recurrent-skip", "true"],
        "recurrent_skip=True applies to policy='gru'; task 'hrv' trains policy='mlp'",
    ),
    script_case(
        "train a GRU of width 10^8",
        "scripts/train_all_seeds.py",
        [*GRU_FLAGS, "--seeds", "0", "1", "--policy", "gru", "--recurrent-width", "100000000"],
        "hrv: training 2 seeds needs at least",
    ),
    script_case(
        "train actor layers of 10^8",
        "scripts/train_all_seeds.py",
        [*GRU_FLAGS, "--seeds", "0", "--actor-hidden", "100000000", "100000000"],
        "(actor_hidden=(100000000, 100000000)",
    ),
]


def _observation(model: PPOModel) -> dict[str, np.ndarray]:
    observation, _ = model.env.reset(jax.random.PRNGKey(1), model.env_params)
    return {name: np.asarray(value) for name, value in observation.items()}


def snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` with its content's digest: what a call must not change."""
    return {
        str(path.relative_to(root)): "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_refused_clearly_and_writes_nothing(case: Case, model, tmp_path, capsys):
    case.setup(tmp_path, model)
    before = snapshot(tmp_path)
    with pytest.raises(case.raises) as raised:
        case.call(tmp_path, model)
    if case.exit_code is not None:
        assert raised.value.code == case.exit_code
    said = capsys.readouterr().err + str(raised.value)
    assert case.message.replace("{tmp}", str(tmp_path)) in said, said
    assert "Traceback" not in said
    assert snapshot(tmp_path) == before


# --- rows that are not refusals ------------------------------------------------------------


def test_limits_overwrite_accepts_a_folder_holding_an_earlier_limits_run(tmp_path):
    """The other side of the limits rows above: the recorded run's summary.json marks its folder
    as a limits run's, so --overwrite may replace its files there (a user's beside them stay:
    a run writes only its own names)."""
    limits = load_script(ROOT / LIMITS)
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_bytes((ROOT / "results" / "limits" / "summary.json").read_bytes())
    (out / "my_notes.txt").write_text("mine\n")
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in LIMITS_RECORD]
    parser = limits.build_parser()
    limits.check_arguments(parser, parser.parse_args([*argv, "--overwrite"]))  # accepted: no SystemExit
    assert limits.is_limits_run(out) and not limits.is_limits_run(tmp_path)


def a_pbt_run(tmp: Path) -> Path:
    """A PBT run of hrv seeds 0-3, its checkpoints.csv rows alone (pbt_parent): seed 3 copies seed 0
    at 2,560 steps, seed 1 copies seed 3 at 5,120 steps; nobody copies at 0 and 7,680."""
    from purehr.run.status import PROTOCOL_TEXT
    from purehr.run.store.files import write_csv

    run = tmp / "run"
    run.mkdir()
    manifest = dict(status="finished", tasks=["hrv"], seeds=[0, 1, 2, 3], configs={"hrv": TINY.to_dict()})
    manifest.update(protocol=PROTOCOL_TEXT, pbt={"explore": ["learning_rate"]})
    (run / "manifest.json").write_text(json.dumps(manifest))
    copies = {(3, 2560): 0, (1, 5120): 3}
    for seed in range(4):
        rows = [
            dict(
                target_steps=steps, actual_steps=steps, update=steps // 512, pbt_parent=copies.get((seed, steps), seed)
            )
            for steps in (0, 2560, 5120, 7680)
        ]
        write_csv(run / "hrv" / f"seed_{seed}" / "checkpoints.csv", None, rows)
    return run


def test_evaluate_says_whose_weights_a_pbt_members_checkpoint_holds(tmp_path):
    """A PBT member's checkpoint after a copy holds another member's weights: evaluate.py says
    whose, from the lineage the run records (pbt_parent), where they differ from the member's own."""
    evaluate = load_script(ROOT / EVALUATE)
    run = a_pbt_run(tmp_path)
    said = evaluate.pbt_weights_note(run, "hrv", 1, 5120)
    assert said.startswith("hrv seed 1's checkpoint at 5,120 steps holds seed 3's weights, not its own: PBT copied")
    assert said.endswith("by the run's lineage (checkpoints.csv pbt_parent) they descend from seed 0's")
    later = evaluate.pbt_weights_note(run, "hrv", 1, 7680)
    assert later.startswith("hrv seed 1's checkpoint at 7,680 steps holds weights that descend from seed 0's")
    assert "PBT last copied another member's weights into it (seed 3's) at 5,120 steps" in later
    assert "descend" not in evaluate.pbt_weights_note(run, "hrv", 3, 2560)  # seed 0's own, copied once
    assert evaluate.pbt_weights_note(run, "hrv", 2, 7680) is None  # its own weights
    assert evaluate.pbt_weights_note(run, "hrv", 3, 0) is None  # before any copy


def test_a_model_saved_without_digests_loads_with_a_warning(model, tmp_path):
    path = saved(model, tmp_path)
    edit_description(path, lambda d: (d.pop("digests"), d.pop("model_json_sha256")))  # as an old purehr saved it
    with pytest.warns(UserWarning, match="saved without file digests"):
        loaded = PPOModel.load(path)
    for a, b in zip(jax.tree.leaves(model.params), jax.tree.leaves(loaded.params)):
        assert isinstance(b, jax.Array) and np.array_equal(np.asarray(a), np.asarray(b))
    assert isinstance(loaded.env_params.style_vectors, jax.Array)  # the pytree types a fresh env has
    assert json.loads((path / "model.json").read_text()).get("digests") is None  # load wrote nothing


def test_a_saved_model_records_the_sha256_of_each_file(model, tmp_path):
    path = saved(model, tmp_path)
    digests = json.loads((path / "model.json").read_text())["digests"]
    assert digests == {
        name: hashlib.sha256((path / name).read_bytes()).hexdigest()
        for name in ("params.msgpack", "env_params.msgpack", "metrics.npz")
    }


@pytest.mark.parametrize(
    "text, value",
    [(w, True) for w in ("true", "YES", "1", "On", " True ")]
    + [(w, False) for w in ("false", "no", "0", "OFF", "False")],
)
def test_boolean_flags_take_the_usual_spellings(text, value):
    assert parse_bool(text) is value
    train = load_script(ROOT / "scripts" / "train_all_seeds.py")
    assert train.build_parser().parse_args(["--anneal-lr", text]).ppo_anneal_lr is value


# --- every flag of every script -------------------------------------------------------------


@pytest.mark.parametrize("script", SCRIPTS, ids=[f"{p.parent.name}/{p.name}" for p in SCRIPTS])
def test_every_flag_has_help_and_shows_its_default(script):
    parser = load_script(script).build_parser()
    assert issubclass(parser.formatter_class, HelpFormatter), "defaults are shown by purehr.cli.arguments.HelpFormatter"
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help.strip(), f"{script.name} {name} has no help"
        shown = formatter._get_help_string(action)
        if action.option_strings:
            assert "default" in shown.lower() or "(required)" in shown, f"{script.name} {name}: {shown!r}"
        assert getattr(action.type, "__name__", "") != "<lambda>", f"{script.name} {name}: an anonymous type"


def test_help_shows_defaults_as_typed():
    train = load_script(ROOT / "scripts" / "train_all_seeds.py").build_parser().format_help()
    flat = " ".join(train.split())
    assert "seeds (default: 0 1 2 3 4; on --resume: the run's)" in flat
    assert "--no-render skip figures and the replay (default: off)" in flat
    assert "(default: the protocol's, swing 64 64, hrv 256 128 64)" in flat


def test_compare_rewards_example_keeps_its_line_continuation():
    text = load_script(ROOT / "studies" / "scripts" / "compare_rewards.py").build_parser().format_help()
    assert "--out results/reward_comparison \\\n        --combinations potential/hrv_similarity" in text


# --- damaged checkpoints: one clear error, no asyncio noise, and a read writes nothing ------------


def test_a_damaged_checkpoint_gives_one_error_and_no_event_loop_tracebacks(tmp_path, capfd):
    from purehr.run.store.checkpoints import CorruptCheckpointError, SeedCheckpoints

    state = {f"leaf_{i}": jnp.arange(64.0) * i for i in range(24)}
    checkpoints = SeedCheckpoints(tmp_path / "checkpoints", asynchronous=False)
    digest = checkpoints.save(0, state)
    checkpoints.finish()
    for data in (tmp_path / "checkpoints" / "0" / "default" / "d").iterdir():
        flip_byte(data)
    before = snapshot(tmp_path)
    reader = SeedCheckpoints(tmp_path / "checkpoints", read_only=True)
    with pytest.raises(CorruptCheckpointError, match="checkpoint .*/0 cannot be read"):
        reader.restore(0, jax.eval_shape(lambda: state), digest)
    reader.finish()
    time.sleep(0.5)  # reads Orbax left in flight would report into the closed loop by now
    printed = capfd.readouterr()
    assert "Event loop is closed" not in printed.err + printed.out
    assert snapshot(tmp_path) == before


def test_reading_checkpoints_that_are_missing_creates_nothing(tmp_path):
    from purehr.run.store.checkpoints import CorruptCheckpointError, SeedCheckpoints

    with pytest.raises(CorruptCheckpointError, match="checkpoint folder .*checkpoints is missing"):
        SeedCheckpoints(tmp_path / "seed_0" / "checkpoints", read_only=True)
    assert list(tmp_path.iterdir()) == []
