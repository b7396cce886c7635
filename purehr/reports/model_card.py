"""The model card: a README that tells someone who did not train a policy what it is and how to
run it. An exported policy's (``export_card_files``: its task, algorithm and network, the command
and config that reproduce it, its held-out results beside the run's mean and 95% interval over
seeds, the reference and the floors, the learning figure, the replay where the task has one,
the contract's summary, the licence and five lines of ONNX Runtime without JAX) and a published
run's (``run_card``: the same per task, over its seeds). Every number is read from the run's
records (``manifest.json``, ``reported.csv``/``checkpoints.csv``), never computed again."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from purehr.reports.results_table import algorithm_label, final_checkpoint_metrics, goal_metric
from purehr.reports.stats import mean_confidence_interval, metric_range
from purehr.run.host.estimate import network_text
from purehr.run.store.record import recorded_algorithm
from purehr.run.store.run_dir import FIGURES, read_manifest

CARD_FILE = "README.md"
REPLAY_FILES = ("replay_poster.png", "replay.mp4")
LICENCE = (
    "purehr's repository declares no licence (no LICENSE file, none in pyproject.toml): these weights and "
    "files come under the same terms as the code that trained them; ask its authors before redistributing."
)


def card_metrics(task: str) -> list[tuple[str, str, int]]:
    """(metric, label, digits) the card shows for ``task``: success, the goal metric, the return."""
    goal = goal_metric(task)
    rows = [("success_rate", "held-out success rate", 2), goal]
    return rows + ([("return_mean", "held-out return", 2)] if goal[0] != "return_mean" else [])


def results_rows(run_dir: Path, task: str, seed: int | None) -> list[dict[str, Any]]:
    """Per metric: the seed's value (None for the whole run), the run's mean and 95% t interval
    over seeds, the reference's and each floor's value (the manifest's), as numbers."""
    manifest = read_manifest(run_dir)
    seeds = list(manifest["seeds"])
    per_seed = final_checkpoint_metrics(run_dir, task, seeds)
    entry = (manifest.get("baselines") or {}).get(task) or {}
    rows = []
    for metric, label, digits in card_metrics(task):
        values = per_seed.get(metric, np.full(len(seeds), math.nan))
        stats = mean_confidence_interval(values, bounds=metric_range(metric))
        rows.append(
            {
                "metric": metric,
                "label": label,
                "digits": digits,
                "seed": None if seed is None else float(values[seeds.index(seed)]),
                "per_seed": [float(v) for v in values],
                "mean": stats["mean"],
                "ci_low": stats["ci_low"],
                "ci_high": stats["ci_high"],
                "reference": (entry.get("name") or "reference", _number_of(entry.get("metrics"), metric))
                if entry.get("metrics")
                else None,
                "floors": {name: _number_of(values_, metric) for name, values_ in (entry.get("floors") or {}).items()},
            }
        )
    return rows


def _number_of(metrics: Any, name: str) -> float:
    value = (metrics or {}).get(name) if isinstance(metrics, dict) else None
    return float(value) if isinstance(value, (int, float)) else math.nan


def _shown(value: float | None, digits: int) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def results_table(run_dir: Path, task: str, seed: int | None) -> list[str]:
    rows = results_rows(run_dir, task, seed)
    floors = list(rows[0]["floors"]) if rows else []
    reference = rows[0]["reference"][0] if rows and rows[0]["reference"] else None
    seeds = len(rows[0]["per_seed"]) if rows else 0
    head = ["metric"] + ([f"this policy (seed {seed})"] if seed is not None else [])
    head += (
        [f"{seeds} seeds: mean [95% interval]"] + ([reference] if reference else []) + [f"floor: {f}" for f in floors]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        d = row["digits"]
        cells = [row["label"]] + ([_shown(row["seed"], d)] if seed is not None else [])
        interval = _shown(row["mean"], d)
        if math.isfinite(row["ci_low"]):
            interval += f" [{_shown(row['ci_low'], d)}, {_shown(row['ci_high'], d)}]"
        cells.append(interval)
        cells += [_shown(row["reference"][1], d)] if reference else []
        cells += [_shown(row["floors"][name], d) for name in floors]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def contract_lines(record: dict[str, Any]) -> list[str]:
    """The contract in a few Markdown lines."""

    def tensor(spec):
        return f"`{spec['name']}` {spec['dtype']}[{', '.join(str(n) for n in spec['shape'])}]"

    lines = [
        "- inputs: " + ", ".join(tensor(spec) for spec in record["inputs"]),
        "- outputs: " + ", ".join(tensor(spec) for spec in record["outputs"]),
        f"- observation: {record['observation']['space']}",
        f"- action: {record['action']['space']}: {record['action']['mapping']}",
    ]
    if record["carry"]:
        lines.append(f"- recurrent: the carry starts as {record['carry']['initial']}; {record['carry']['use']}")
    checkpoint = record["checkpoint"]
    where = f"{checkpoint['source']} {checkpoint['path']}"
    if checkpoint.get("steps") is not None:
        where += f", seed {checkpoint['seed']}, {checkpoint['steps']:,} steps"
    lines.append(f"- checkpoint: {where}, state digest `{checkpoint.get('state_digest')}`")
    parity = record["parity"]
    for name, described in record["files"].items():
        figures = parity[name]
        lines.append(
            f"- {described['file']} ({described['bytes']:,} bytes): maximum absolute error "
            f"{figures['max_abs_error']:.2e} and action agreement {figures['action_agreement']:.4f} against the JAX "
            f"policy on {figures['observations']:,} held-out observations (tolerance {parity['tolerance']:g})"
        )
    lines.append(
        f"- purehr {record['purehr']['version']} at {record['purehr']['git_revision']}; all of it in contract.json"
    )
    return lines


def onnx_example(record: dict[str, Any]) -> list[str]:
    """Five lines that run the ONNX policy with ONNX Runtime and NumPy only (zeros of the
    contract's shapes where an observation goes)."""
    inputs = ", ".join(f"`{spec['name']}` {spec['dtype']}{spec['shape'][1:]}" for spec in record["inputs"])
    return [
        f"Inputs, each with a leading batch axis: {inputs}.",
        "",
        "```python",
        "import json, numpy as np, onnxruntime as ort",
        "",
        'contract = json.load(open("contract.json"))  # names, shapes, dtypes, the action\'s meaning',
        'session = ort.InferenceSession("policy.onnx")',
        'feeds = {i["name"]: np.zeros([1, *i["shape"][1:]], i["dtype"]) for i in contract["inputs"]}  # observations',
        'action = session.run(None, feeds)[0][0]  # outputs as contract["outputs"]: the action, then a GRU\'s carry',
        "```",
    ]


def _reproduce_lines(manifest: dict, task: str) -> list[str]:
    command = " ".join(str(word) for word in manifest.get("command") or []) or "(not recorded)"
    config = {
        "algorithm": recorded_algorithm(manifest, task),
        "config": (manifest.get("configs") or {}).get(task),
        "protocol": (manifest.get("protocol_settings") or {}).get(task),
        "environment": (manifest.get("environments") or {}).get(task),
        "seeds": manifest.get("seeds"),
    }
    return [
        f"Trained with `{command}` at purehr {manifest.get('git_revision')} (manifest.json holds the machine, "
        "versions and everything below):",
        "",
        "```json",
        json.dumps(config, indent=1),
        "```",
    ]


def _figures(folder: Path, run_dir: Path, task: str, seed: int | None) -> list[str]:
    """The learning figure and the replay (where the run has one of ``task``), linked from ``folder``
    (the files copied into it when it lies outside the run)."""
    lines = []
    source = run_dir / FIGURES
    inside = folder.resolve().is_relative_to(run_dir.resolve()) if folder.exists() else False
    learning = source / f"{task}_learning.png"
    replay = source / "replay_timeline.json"
    replay_task = json.loads(replay.read_text()).get("task") if replay.is_file() else None
    wanted = [learning] if learning.is_file() else []
    if replay_task == task:
        wanted += [source / name for name in REPLAY_FILES if (source / name).is_file()]

    def link(path: Path) -> str:
        if inside:
            return os.path.relpath(path, folder)
        shutil.copy2(path, folder / path.name)
        return path.name

    links = {path.name: link(path) for path in wanted}
    if learning.name in links:
        lines += ["## Learning", "", f"![held-out learning curve of {task}]({links[learning.name]})", ""]
    if "replay_poster.png" in links:
        seed_of = json.loads(replay.read_text()).get("seed")
        lines += ["## Replay", "", f"Seed {seed_of}'s held-out episode at its checkpoints, as training went:", ""]
        lines += [f"![replay]({links['replay_poster.png']})", ""]
        if "replay.mp4" in links:
            lines += [f"[the video]({links['replay.mp4']})", ""]
    return lines


def export_card(folder: Path, record: dict[str, Any], run_dir: Path | None, task: str | None, seed: int | None) -> str:
    """The README of an export in ``folder`` (figures linked or copied there)."""
    algorithm = record["algorithm"]
    environment = record["environment"]
    name = environment.get("name") or environment.get("class")
    lines = [
        f"# {name}: a {algorithm['name'].upper()} policy exported by purehr",
        "",
        f"- task: `{name}` ({environment['class']}, arguments {json.dumps(environment.get('kwargs') or {})})",
        f"- algorithm: {algorithm['name'].upper()}; network: {algorithm['network']}",
    ]
    if run_dir is not None:
        manifest = read_manifest(run_dir)
        checkpoint = record["checkpoint"]
        lines += [
            f"- checkpoint: seed {seed}, {checkpoint['steps']:,} environment steps ({checkpoint['step']} of the run "
            f"{run_dir})",
            "",
            "## Reproduce",
            "",
            *_reproduce_lines(manifest, task),
            "",
            "## Held-out results",
            "",
            f"This seed's {'reported' if checkpoint['step'] == 'reported' else 'exported'} checkpoint beside the run's "
            "seeds (their reported checkpoints), the reference policy and the floors, from the run's records:",
            "",
            *results_table(run_dir, task, seed if checkpoint["step"] == "reported" else None),
            "",
            *_figures(folder, run_dir, task, seed),
        ]
    else:
        lines += ["", f"Saved model {record['checkpoint']['path']}; config:", "", "```json"]
        lines += [json.dumps(algorithm["config"], indent=1), "```", ""]
    lines += ["## Contract", "", *contract_lines(record), "", "## Run it without JAX", ""]
    lines += onnx_example(record)
    lines += [
        "",
        "To step an environment, feed each observation's fields as the inputs, take `action`, and feed a recurrent "
        "policy's carry back (docs/how-to/export.md).",
        "",
        "## Licence",
        "",
        LICENCE,
    ]
    return "\n".join(lines) + "\n"


def export_card_files(
    folder: Path, record: dict[str, Any], run_dir: Path | None, task: str | None, seed: int | None
) -> None:
    """Writes ``folder``/README.md (and copies the figures it shows when ``folder`` is outside the run).
    ``folder`` is the export's temporary folder beside its final place: links are relative to it."""
    (folder / CARD_FILE).write_text(export_card(folder, record, run_dir, task, seed))


def run_card(record_dir: Path) -> str:
    """The README of a published run: per task its results over the seeds, how it was trained,
    its figures, how to export a seed's policy, and the licence."""
    manifest = read_manifest(record_dir)
    lines = [
        f"# A purehr run: {', '.join(manifest['tasks'])}, seeds {', '.join(str(s) for s in manifest['seeds'])}",
        "",
    ]
    for task in manifest["tasks"]:
        config = (manifest.get("configs") or {}).get(task) or {}
        network = network_text(SimpleNamespace(to_dict=lambda config=config: config))
        lines += [
            f"## {task}",
            "",
            f"- algorithm: {algorithm_label(manifest, task)}; network: {network}",
            "",
            *_reproduce_lines(manifest, task),
            "",
            *results_table(record_dir, task, None),
            "",
            *[line.replace("## ", "### ") for line in _figures(record_dir, record_dir, task, None)],
            f"Export a seed's policy (ONNX, a jax.export program, a contract and its own card): `purehr export "
            f"{record_dir} --task {task} --seed {manifest['seeds'][0]} --step reported --out {task}_policy`",
            "",
        ]
    lines += ["## Licence", "", LICENCE]
    return "\n".join(lines) + "\n"
