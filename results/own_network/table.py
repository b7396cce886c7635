"""The tables of results/own_network/README.md from the runs' directories: per run, the held-out
metrics of every seed's last checkpoint and their mean, and the mean at every checkpoint.

    python results/own_network/table.py RUN_DIR [RUN_DIR ...]
"""

import csv
import json
import sys
from pathlib import Path


def rows(run: Path, task: str, seed: int) -> list[dict]:
    with open(run / task / f"seed_{seed}" / "checkpoints.csv") as file:
        return list(csv.DictReader(file))


def main(runs: list[str]) -> None:
    print(
        "| run | algorithm | network | steps | metric | per seed (last checkpoint) | mean | mean at each checkpoint |"
    )
    print("|---|---|---|---:|---|---|---:|---|")
    for run in map(Path, runs):
        manifest = json.loads((run / "manifest.json").read_text())
        (task,) = manifest["tasks"]
        config = manifest["configs"][task]
        network = config.get("network") or (
            f"shipped {config.get('policy', 'mlp')}"
            if manifest["algorithms"][task] == "ppo"
            else f"shipped (conv {config.get('conv_channels')})"
        )
        per_seed = {seed: rows(run, task, seed) for seed in manifest["seeds"]}
        metrics = ["eval_return_mean"]
        if task.startswith("hrv"):
            metrics = ["eval_success_rate", "eval_mean_speed_of_success", "eval_episode_length"]
        for metric in metrics:
            if metric not in per_seed[manifest["seeds"][0]][-1]:
                continue
            last = [float(r[-1][metric]) for r in per_seed.values()]
            steps = per_seed[manifest["seeds"][0]][-1]["actual_steps"]
            first = per_seed[manifest["seeds"][0]]
            means = [sum(float(s[i][metric]) for s in per_seed.values()) / len(per_seed) for i in range(len(first))]
            curve = [f"{int(r['target_steps']) // 1000}k: {m:.3f}" for r, m in zip(first, means)]
            print(
                f"| {run.name} | {manifest['algorithms'][task]} | {network} | {steps} | {metric} | "
                f"{', '.join(f'{v:.3f}' for v in last)} | **{sum(last) / len(last):.3f}** | {'; '.join(curve)} |"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
