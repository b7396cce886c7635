"""Re-evaluate only the baseline controllers of a run and redraw its figures.

    python scripts/refresh_baseline.py --run-dir artifacts/protocol

Touches no PPO checkpoint, training log or replay: only manifest.json's ``baselines`` and
the learning figures / final metrics are rewritten (after a controller retune, say).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--run-dir", type=Path, required=True, help="the run whose baselines to re-evaluate")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    from purehr.run.baselines import evaluate_baselines
    from purehr.run.compiled.task_setup import recorded_setup
    from purehr.run.store.run_dir import RunDirectory
    from purehr.viz.render import render_figures_only

    run_dir = RunDirectory(args.run_dir)
    try:
        manifest = run_dir.read_manifest()
    except (FileNotFoundError, ValueError) as error:
        parser.exit(2, f"error: {error}\n")
    # each task as the run trained it: its config, environment and curriculum (the baselines are
    # judged on the curriculum's final stage, as the run's own were)
    baselines = evaluate_baselines([recorded_setup(manifest, task) for task in manifest["tasks"]])
    for task, baseline in baselines.items():
        before = manifest.get("baselines", {}).get(task, {}).get("metrics", {}).get("success_rate")
        print(f"{task}: {baseline['name']} success {baseline['metrics']['success_rate']:.3f} (was {before})")
    manifest["baselines"] = baselines
    run_dir.write_manifest(manifest)
    for path in render_figures_only(run_dir.root):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
