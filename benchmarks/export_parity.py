"""Exports every seed of a run (results/protocol: swing and hrv, the reported checkpoints) and runs
each ONNX policy in a process that does not import JAX (``purehr.deploy.runner``), against the JAX
policy on the same held-out episodes: the task's held-out evaluation and its generic held-out
episodes, episode by episode. Writes each export (card, contract, .onnx) under
``RUN/exports/TASK_seed_N`` and the figures to ``RUN/exports/parity.md`` and ``parity.json``.

    python benchmarks/export_parity.py results/protocol

Swing agrees when every episode's time to rotation is within 0.05 s (length x dt: an episode ends
at its rotation) and the evaluation's mean time to rotation too; hrv when every episode has the
same length."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from purehr.cli.arguments import HelpFormatter
from purehr.deploy import formats
from purehr.deploy.export import export, load_source
from purehr.deploy.parity import compare, heldout_samples
from purehr.deploy.program import policy_program
from purehr.deploy.runner import heldout_outcomes
from purehr.envs.rollout import HELDOUT_SEED
from purehr.run.compiled.compile_cache import use_compile_cache
from purehr.run.store.run_dir import read_manifest

TIME_TOLERANCE_S = 0.05


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("run_dir", type=Path, help="a run directory (or a record such as results/protocol)")
    parser.add_argument("--tasks", nargs="+", default=None, help="tasks to export (default: the run's)")
    parser.add_argument("--formats", nargs="+", default=["onnx"], help="formats to export: onnx, jax")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    use_compile_cache()
    manifest = read_manifest(args.run_dir)
    rows = []
    for task in args.tasks or manifest["tasks"]:
        episodes = int(manifest["protocol_settings"][task]["eval_episodes"])
        for seed in manifest["seeds"]:
            out = args.run_dir / "exports" / f"{task}_seed_{seed}"
            result = export(args.run_dir, task, seed, "reported", out=out, formats=args.formats, overwrite=out.exists())
            source = load_source(args.run_dir, task, seed, "reported")
            clock = time.perf_counter()
            outcomes = heldout_outcomes(out, source.env, source.env_params, source.policy, episodes)
            row = _row(task, seed, result, outcomes, source, time.perf_counter() - clock)
            rows.append(row | _every_heldout_observation(out, source, episodes))
            print(json.dumps(rows[-1]), flush=True)
    (args.run_dir / "exports" / "parity.json").write_text(json.dumps(rows, indent=1) + "\n")
    (args.run_dir / "exports" / "parity.md").write_text(_table(rows, " ".join(["python", *sys.argv])))
    return 0 if all(row["same_outcome"] and row["heldout_action_agreement"] == 1 for row in rows) else 1


def _every_heldout_observation(out: Path, source, episodes: int) -> dict:
    """The written .onnx against the JAX policy's actions on every step of the generic held-out
    episodes the runner plays (``HELDOUT_SEED``), not only the export's own check."""
    spaces = source.env.observation_space(source.env_params), source.env.action_space(source.env_params)
    program = policy_program(source.policy, *spaces)
    samples = heldout_samples(source.env, source.env_params, source.policy, program, episodes, seed=HELDOUT_SEED)
    run = formats.onnx_runner((out / formats.ONNX_FILE).read_bytes(), [spec.name for spec in program.inputs])
    figures = compare(samples, run(samples.inputs), program)
    return {f"heldout_{name}": value for name, value in figures.items()}


def _row(task, seed, result, outcomes, source, seconds) -> dict:
    jax_, onnx = outcomes["jax"], outcomes["onnx"]
    lengths_j, lengths_o = np.asarray(jax_["lengths"]), np.asarray(onnx["lengths"])
    dt = float(getattr(source.env_params, "dt", np.nan)) if task == "swing" else np.nan
    row = {
        "task": task,
        "seed": seed,
        "steps": result.contract["checkpoint"]["steps"],
        "onnx_bytes": result.contract["files"]["onnx"]["bytes"],
        "export_s": round(result.seconds["total"], 2),
        "parity_observations": result.parity["observations"],
        "max_abs_error": result.parity["onnx"]["max_abs_error"],
        "action_agreement": result.parity["onnx"]["action_agreement"],
        "episodes": len(lengths_j),
        "same_lengths": int(np.sum(lengths_j == lengths_o)),
        "max_length_difference": int(np.max(np.abs(lengths_j - lengths_o))),
        "evaluation_jax": jax_["evaluation"],
        "evaluation_onnx": onnx["evaluation"],
        "worker": outcomes["worker"],
        "runner_s": round(seconds, 1),
    }
    if task == "swing":
        per_episode = float(np.max(np.abs(lengths_j - lengths_o))) * dt
        mean = abs(jax_["evaluation"]["time_to_rotation"] - onnx["evaluation"]["time_to_rotation"])
        row |= {"max_episode_time_difference_s": per_episode, "time_to_rotation_difference_s": mean}
        same = per_episode <= TIME_TOLERANCE_S and mean <= TIME_TOLERANCE_S
    else:
        same = row["same_lengths"] == row["episodes"] and (
            jax_["evaluation"]["episode_length"] == onnx["evaluation"]["episode_length"]
        )
    row["same_outcome"] = bool(same and not outcomes["worker"]["jax_imported"])
    return row


def _table(rows: list[dict], command: str) -> str:
    lines = [
        "# Exported policies of this run, run outside JAX",
        "",
        f"`{command}` (this repository's 2-core x86_64 VM, JAX CPU). Each seed's reported checkpoint exported to "
        "ONNX; the ONNX policy run by ONNX Runtime in a process that imports neither JAX nor purehr "
        "(purehr/deploy/onnx_worker.py), stepping the environment in another, against the JAX policy on the same "
        "held-out episodes (the task's evaluation and the generic held-out episodes, as many as the protocol "
        "evaluates). Parity: the exported program's actions against those the JAX policy took, on the held-out "
        "observations of the export's own check (4 episodes), and on every step of the generic held-out episodes "
        "the runner plays (actions within 1e-4 counted as agreeing; exactly equal for hrv's discrete actions).",
        "",
        "| task | seed | steps | .onnx bytes | export check: max abs error, action agreement (observations) | "
        "every held-out step: max abs error, action agreement (observations) | episodes with the same length | "
        "time to rotation JAX / ONNX (s) | episode length JAX / ONNX | same outcome |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        e_j, e_o = row["evaluation_jax"], row["evaluation_onnx"]
        lines.append(
            f"| {row['task']} | {row['seed']} | {row['steps']:,} | {row['onnx_bytes']:,} | "
            f"{row['max_abs_error']:.2e}, {row['action_agreement']:.4f} ({row['parity_observations']}) | "
            f"{row['heldout_max_abs_error']:.2e}, {row['heldout_action_agreement']:.4f} "
            f"({row['heldout_observations']}) | "
            f"{row['same_lengths']}/{row['episodes']} | "
            f"{_pair(e_j.get('time_to_rotation'), e_o.get('time_to_rotation'), 3)} | "
            f"{_pair(e_j.get('episode_length'), e_o.get('episode_length'), 2)} | "
            f"{'yes' if row['same_outcome'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def _pair(a, b, digits) -> str:
    if a is None or b is None:
        return "-"
    return f"{a:.{digits}f} / {b:.{digits}f}"


if __name__ == "__main__":
    sys.exit(main())
