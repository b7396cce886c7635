"""The baselines a run is judged against are kept by a digest of their definition (task,
policies, environment, held-out params and episodes, code, precision, backend): a run with the
same definition reuses them (in the process and from the cache file), a changed one evaluates
again. No program is compiled here: the evaluation itself is replaced by a counter."""

from __future__ import annotations

import json

import jax
import pytest
from conftest import HRV_TINY

from purehr.run import baselines
from purehr.run.compiled.task_setup import build_task_setup
from purehr.tasks import get_task
from purehr.tasks.task import Baseline

FAKE = {"name": "oracle", "definition": "", "metrics": {"success_rate": 1.0}, "floors": {"random": {"x": 0.5}}}


def setup(config=HRV_TINY, **env_kwargs):
    return build_task_setup("hrv", config, env=get_task("hrv").make_env(**env_kwargs) if env_kwargs else None)


def key(task_setup) -> str:
    return baselines.baseline_key(baselines.baseline_definition(task_setup))


def test_the_same_definition_is_the_same_key_and_a_changed_one_another():
    same = key(setup())
    assert key(setup()) == same
    changed = {
        "eval_episodes": key(setup(HRV_TINY.replace(eval_episodes=get_task("hrv").default_protocol.eval_episodes + 1))),
        "env kwargs": key(setup(hrv_dim=16)),
        "held-out params (the discount)": key(setup(HRV_TINY.replace(gamma=0.9))),
        "swing": key(build_task_setup("swing", get_task("swing").default_config.replace(eval_episodes=20))),
    }
    assert same not in changed.values() and len(set(changed.values())) == len(changed), changed


def test_the_training_settings_that_change_no_baseline_number_keep_the_key():
    assert key(setup(HRV_TINY.replace(learning_rate=1e-3, total_timesteps=4096))) == key(setup())


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """``_evaluate`` replaced by a counter, an empty process cache and a fresh cache directory."""
    calls = []
    monkeypatch.setattr(baselines, "_evaluate", lambda task_setup: calls.append(task_setup.name) or dict(FAKE))
    monkeypatch.setattr(baselines, "_EVALUATED", {})
    return calls, tmp_path / "cache"


def test_a_second_run_reuses_the_baselines_in_process_and_from_the_cache_file(counted, monkeypatch):
    calls, folder = counted
    first = baselines.evaluate_baselines([setup()], cache_dir=folder)
    said = []
    second = baselines.evaluate_baselines([setup()], said.append, cache_dir=folder)
    assert calls == ["hrv"] and first == second == {"hrv": FAKE}
    assert said and "reused" in said[0]
    monkeypatch.setattr(baselines, "_EVALUATED", {})  # a new process: the file is read
    assert baselines.evaluate_baselines([setup()], cache_dir=folder) == {"hrv": FAKE} and calls == ["hrv"]
    record = json.loads((folder / f"{key(setup())}.json").read_text())
    assert record["definition"]["task"] == "hrv" and record["baselines"] == FAKE


def test_a_changed_definition_or_a_damaged_cache_file_evaluates_again(counted, monkeypatch):
    calls, folder = counted
    baselines.evaluate_baselines([setup()], cache_dir=folder)
    baselines.evaluate_baselines([setup(HRV_TINY.replace(eval_episodes=7))], cache_dir=folder)
    assert calls == ["hrv", "hrv"]
    monkeypatch.setattr(baselines, "_EVALUATED", {})
    (folder / f"{key(setup())}.json").write_text('{"key": "')
    assert baselines.evaluate_baselines([setup()], cache_dir=folder) == {"hrv": FAKE} and len(calls) == 3


def test_the_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PUREHR_CACHE_DIR", str(tmp_path))
    assert baselines.baseline_cache_dir() == tmp_path / "baselines"
    monkeypatch.setenv("PUREHR_CACHE_DIR", "")
    assert baselines.baseline_cache_dir() is None
    monkeypatch.delenv("PUREHR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert baselines.baseline_cache_dir() == tmp_path / "purehr" / "baselines"


def test_an_edited_cache_file_is_not_trusted_but_evaluated_again_and_said(counted, monkeypatch):
    """Issue 48 defect 6: a kept entry edited to oracle success 0.5 and episode length 60 was
    reused, and its numbers reached the manifest and the goal verdict."""
    calls, folder = counted
    baselines.evaluate_baselines([setup()], cache_dir=folder)
    path = folder / f"{key(setup())}.json"
    record = json.loads(path.read_text())
    record["baselines"]["metrics"] = {"success_rate": 0.5, "episode_length": 60.0}
    path.write_text(json.dumps(record))
    monkeypatch.setattr(baselines, "_EVALUATED", {})  # a new process: the file is read
    said = []
    assert baselines.evaluate_baselines([setup()], said.append, cache_dir=folder) == {"hrv": FAKE}
    assert calls == ["hrv", "hrv"]
    assert len(said) == 1 and "edited or damaged" in said[0] and str(path) in said[0], said
    assert json.loads(path.read_text())["baselines"] == FAKE  # the entry is written again, whole
    monkeypatch.setattr(baselines, "_EVALUATED", {})
    assert baselines.evaluate_baselines([setup()], cache_dir=folder) == {"hrv": FAKE} and len(calls) == 2


def _make_raising_policy(env, env_params):
    raise RuntimeError("no controller for this arena")


def _make_wide_policy(env, env_params):
    return lambda observation, t, key: jax.numpy.zeros((3,), jax.numpy.int32)


def test_a_baseline_that_raises_or_acts_in_another_shape_names_task_baseline_and_module():
    """Issue 63 W9: a user's ``make_policy`` that raises, or whose policy returns another shape
    than hrv's MultiDiscrete(10) action, is one line naming all of it, not a traceback."""
    task_setup = setup()
    raising = Baseline("mine", "mine", _make_raising_policy)
    with pytest.raises(ValueError) as raised:
        baselines.checked_policy(task_setup, raising)
    assert str(raised.value) == (
        f"task 'hrv': baseline 'mine' ({__name__}._make_raising_policy): make_policy(env, env_params) raised "
        "RuntimeError: no controller for this arena"
    )
    with pytest.raises(ValueError) as raised:
        baselines.checked_policy(task_setup, Baseline("wide", "wide", _make_wide_policy))
    message = str(raised.value)
    assert message.startswith(f"task 'hrv': baseline 'wide' ({__name__}._make_wide_policy): its policy returns ")
    assert "shape=(3,)" in message and "expected an action of shape (10,)" in message
    for floor in get_task("hrv").baselines:  # the task's own pass unchanged
        assert baselines.checked_policy(task_setup, floor) is not None


D3_TASK = """
from d3_base import PointReach
from d3_helper import gain


class Reach(PointReach):
    pass


def make_env(**kwargs):
    return Reach(**kwargs)


def make_still_policy(env, env_params):
    return lambda observation, t, key: gain() * observation[:2]


BASELINES = {"still": make_still_policy}
"""


def test_an_edit_of_any_user_file_the_definition_imports_changes_the_key(tmp_path, monkeypatch):
    """Issue 63 D3: only the environment class's file and make_policy's file were hashed, so a
    baseline whose gain lives in a helper module, or an environment subclassing another file's
    class, reused the old numbers after that file changed. Every user file of the definition is
    hashed: the environment class's whole MRO, make_policy's module, and what they import."""
    import shutil
    import sys
    from pathlib import Path

    from purehr.tasks import registry

    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.syspath_prepend(str(tmp_path))
    shutil.copy(Path(__file__).resolve().parents[1] / "examples" / "my_env.py", tmp_path / "d3_base.py")
    (tmp_path / "d3_helper.py").write_text("def gain():\n    return 0.0\n")
    (tmp_path / "d3_task.py").write_text(D3_TASK)

    def fresh_key():
        for name in ("d3_task", "d3_helper", "d3_base"):
            sys.modules.pop(name, None)
        registry._RESOLVED.pop("d3_task:make_env", None)
        return key(build_task_setup(get_task("d3_task:make_env")))

    try:
        first = fresh_key()
        assert fresh_key() == first  # nothing edited: the same key
        (tmp_path / "d3_helper.py").write_text("def gain():\n    return 0.5\n")
        helper_edited = fresh_key()
        assert helper_edited != first
        with (tmp_path / "d3_base.py").open("a") as file:
            file.write("\n# an edit of the parent class's file\n")
        assert fresh_key() != helper_edited
    finally:
        for name in ("d3_task", "d3_helper", "d3_base"):
            sys.modules.pop(name, None)
        registry._RESOLVED.pop("d3_task:make_env", None)
