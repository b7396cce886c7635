"""Tic-tac-toe from pgx, a suite of board games in JAX whose games give their legal moves: the
task ``pgx:tic_tac_toe`` (purehr/envs/pgx_adapter.py, docs/environments.md "pgx").

The agent plays against an opponent that moves uniformly at random among the legal moves; who
moves first is drawn at every game. A win pays +1, a draw 0, a loss -1. pgx's legal-move mask
is the observation's ``"action_mask"`` entry, so PPO only ever picks an empty cell, and the
floor PPO must beat is random-among-legal play (about 0 on average: it wins and loses about
44% of the games each) rather than random play over all nine cells, which loses at its first
move on a taken cell.

This script trains through ``scripts/train_all_seeds.py`` (any of its flags passes through),
then prints, per seed, the last held-out return and win rate against that floor and how many
illegal moves training made::

    .venv/bin/pip install -c constraints.txt -e '.[pgx]'
    .venv/bin/python examples/pgx_tic_tac_toe.py --seeds 0 1 2 --run-dir runs/tic_tac_toe

Measured (2-core CPU, other jobs running; ``--steps 12288 --seeds 0 1 2 --no-render``, 30 s of
CPU): the held-out return of seeds 0-2 is 0.72, 0.67 and 0.53 (win rates 0.84, 0.81, 0.73)
against the floor's 0.04 (win rate 0.45), no illegal move; the default budget is 100,000 steps.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import sys
from pathlib import Path

TASK = "pgx:tic_tac_toe"
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "train_all_seeds.py"


def train_script():
    """``scripts/train_all_seeds.py`` as a module (its ``main(argv) -> exit code``)."""
    spec = importlib.util.spec_from_file_location("_purehr_train_all_seeds", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def summary(run_dir: Path) -> list[dict]:
    """Per seed: the last checkpoint's held-out return and win rate, the random-among-legal
    floor's, and the illegal moves of every training update."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    floor = manifest["baselines"][TASK]["floors"]["random"]
    rows = []
    for seed in manifest["seeds"]:
        seed_dir = run_dir / TASK / f"seed_{seed}"
        with open(seed_dir / "checkpoints.csv") as file:
            last = list(csv.DictReader(file))[-1]
        with open(seed_dir / "updates.csv") as file:
            illegal = sum(float(row["invalid_actions"]) for row in csv.DictReader(file))
        rows.append(
            {
                "seed": seed,
                "steps": int(last["actual_steps"]),
                "return": float(last["eval_return_mean"]),
                "win_rate": float(last["eval_success_rate"]),
                "floor_return": float(floor["return_mean"]),
                "floor_win_rate": float(floor["success_rate"]),
                "illegal_moves": int(illegal),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", default="runs/pgx_tic_tac_toe")
    args, passed = parser.parse_known_args(argv)
    code = train_script().main(["--tasks", TASK, "--run-dir", args.run_dir, *passed])
    if code != 0:
        return code
    for row in summary(Path(args.run_dir)):
        print(
            f"seed {row['seed']}: held-out return {row['return']:.2f} (win rate {row['win_rate']:.2f}) at "
            f"{row['steps']:,} steps; random-among-legal {row['floor_return']:.2f} ({row['floor_win_rate']:.2f}); "
            f"illegal moves in training: {row['illegal_moves']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
