"""publish_run verifies what it ships and copies nothing from outside the run (issue 27,
defects 4 and 5). The run is built by hand around real Orbax checkpoints of an initial state
(no training, nothing compiled): each test copies it and damages one thing."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import jax
import pytest
from conftest import write_synthetic_run

from purehr.reports.publish import UnpublishableRun, publish_run
from purehr.run.compiled.task_setup import recorded_setup
from purehr.run.restoring import restore
from purehr.run.status import PROTOCOL_TEXT
from purehr.run.store.checkpoints import SeedCheckpoints
from purehr.tasks import HRV_DEFAULTS

ROOT = Path(__file__).resolve().parents[1]
TINY = HRV_DEFAULTS.replace(
    num_envs=4, num_steps=8, minibatch_size=16, actor_hidden=(8,), critic_hidden=(8,), total_timesteps=64
)
SEEDS = (0, 1)
STEPS = (0, 64)
LAST = STEPS[-1]


def manifest() -> dict:
    return {
        "status": "finished",
        "tasks": ["hrv"],
        "seeds": list(SEEDS),
        "configs": {"hrv": TINY.to_dict()},
        "protocol": PROTOCOL_TEXT,
        "curricula": {},
    }


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A finished hrv run of two seeds, each with checkpoints at 0 and 64 steps (the initial
    state, saved by Orbax with its digest) and a showcase trace for seed 0."""
    root = tmp_path_factory.mktemp("publish") / "run"
    setup = recorded_setup(manifest(), "hrv")
    checkpoints, updates = {}, {}
    for seed in SEEDS:
        state = setup.algorithm.init(jax.random.PRNGKey(seed))
        saver = SeedCheckpoints(root / "hrv" / f"seed_{seed}" / "checkpoints", asynchronous=False)
        digests = [saver.save(steps, state) for steps in STEPS]
        saver.finish()
        checkpoints["hrv", seed] = [
            {
                "target_steps": steps,
                "actual_steps": steps,
                "eval_success_rate": 0.5,
                "checkpoint_path": f"hrv/seed_{seed}/checkpoints/{steps}",
                "showcase_path": f"hrv/seed_{seed}/showcase/steps_{steps}.npz" if seed == 0 else "",
                "state_digest": digest,
            }
            for steps, digest in zip(STEPS, digests)
        ]
        updates["hrv", seed] = [{"update": 1, "env_steps": 32}, {"update": 2, "env_steps": 64}]
    write_synthetic_run(root, manifest(), updates, checkpoints)
    (root / "hrv" / "seed_0" / "showcase").mkdir()
    for steps in STEPS:
        (root / "hrv" / "seed_0" / "showcase" / f"steps_{steps}.npz").write_bytes(b"trace")
    (root / "figures").mkdir()
    (root / "figures" / "hrv_learning.png").write_bytes(b"png")
    return root


@pytest.fixture
def run(finished_run, tmp_path) -> Path:
    copy = tmp_path / "runs" / "run"
    shutil.copytree(finished_run, copy)
    return copy


def edit_last_row(run: Path, seed: int, **cells) -> None:
    path = run / "hrv" / f"seed_{seed}" / "checkpoints.csv"
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    last = lines[-1].split(",")
    for name, value in cells.items():
        last[header.index(name)] = value
    path.write_text("\n".join(lines[:-1] + [",".join(last)]) + "\n")


def test_a_record_keeps_the_verified_last_checkpoints_and_is_marked_published(run, tmp_path):
    record = tmp_path / "record"
    written = publish_run(run, record)
    for seed in SEEDS:
        assert sorted(p.name for p in (record / "hrv" / f"seed_{seed}" / "checkpoints").iterdir()) == [str(LAST)]
    assert restore(record, task="hrv", seed=1).steps == LAST
    assert json.loads((record / "manifest.json").read_text())["published"] is True
    assert (record / "hrv" / "seed_0" / "showcase" / f"steps_{LAST}.npz").read_bytes() == b"trace"
    assert all(path.is_file() for path in written) and record / "figures" / "hrv_learning.png" in written


def test_a_deleted_last_checkpoint_is_refused_and_nothing_is_written(run, tmp_path):
    shutil.rmtree(run / "hrv" / "seed_0" / "checkpoints" / str(LAST))
    with pytest.raises(UnpublishableRun, match=rf"last checkpoint {run}/hrv/seed_0/checkpoints/{LAST} is missing"):
        publish_run(run, tmp_path / "record")
    assert not (tmp_path / "record").exists()


def test_a_flipped_byte_in_the_last_checkpoint_is_refused_naming_it(run, tmp_path):
    folder = run / "hrv" / "seed_1" / "checkpoints" / str(LAST)
    victim = max((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(UnpublishableRun, match=rf"damaged checkpoint.*checkpoint {folder}"):
        publish_run(run, tmp_path / "record")
    assert not (tmp_path / "record").exists()


def test_a_last_row_without_its_digest_is_refused(run, tmp_path):
    edit_last_row(run, 1, state_digest="")
    with pytest.raises(UnpublishableRun, match=f"checkpoints/{LAST}"):
        publish_run(run, tmp_path / "record")
    assert not (tmp_path / "record").exists()


def test_a_checkpoint_path_out_of_the_run_overwrites_nothing(run, tmp_path):
    """The audit's case: ``../../victim_src`` made publish copy a folder beside the run over
    one beside the record."""
    (tmp_path / "victim_src").mkdir()
    (tmp_path / "victim_src" / "data.txt").write_text("someone else's\n")
    mine = tmp_path / "pub" / "victim_src" / "data.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine\n")
    edit_last_row(run, 0, checkpoint_path="../../victim_src")
    with pytest.raises(UnpublishableRun, match=r"seed_0/checkpoints\.csv: checkpoint_path of the row at actual_steps"):
        publish_run(run, tmp_path / "pub" / "a" / "record")
    assert mine.read_text() == "mine\n"
    assert not (tmp_path / "pub" / "a").exists()


def test_a_showcase_path_or_a_symlink_out_of_the_run_is_refused(run, tmp_path):
    (tmp_path / "secret.txt").write_text("secret\n")
    edit_last_row(run, 0, showcase_path="../../secret.txt")
    with pytest.raises(UnpublishableRun, match="showcase_path of the row at actual_steps 64 leads outside the run"):
        publish_run(run, tmp_path / "record")
    edit_last_row(run, 0, showcase_path=f"hrv/seed_0/showcase/steps_{LAST}.npz")
    (run / "figures" / "notes.png").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(UnpublishableRun, match="notes.png .* leads outside the run"):
        publish_run(run, tmp_path / "record")
    assert not (tmp_path / "record").exists()


def test_the_script_refuses_with_exit_2_and_one_line(run, tmp_path, capsys):
    shutil.rmtree(run / "hrv" / "seed_1" / "checkpoints" / str(LAST))
    spec = importlib.util.spec_from_file_location("publish_cli", ROOT / "scripts" / "publish_run.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with pytest.raises(SystemExit) as raised:
        script.main([str(run), str(tmp_path / "record")])
    assert raised.value.code == 2
    error = capsys.readouterr().err
    assert f"seed_1/checkpoints/{LAST} is missing" in error and "Traceback" not in error
    assert not (tmp_path / "record").exists()
