"""Which HRV reward learns? Train every reward form x similarity of docs/hrv_task.md with the same
seeds and budget, and compare held-out success.

    python scripts/compare_rewards.py --steps 250000 --out results/reward_comparison \\
        --combinations potential/hrv_similarity          # one combination per invocation
    python scripts/compare_rewards.py --out results/reward_comparison --summarize-only

One compiled call per combination (the reward form and the similarity select code, so they
are static): the scan over updates is outside, ``vmap(update)`` over seeds inside; before
training, every ``--eval-every`` updates and after the last a ``lax.cond`` runs the held-out
evaluation of docs/hrv_task.md (100 fixed episodes, difficulty 0.9, precision 0.05, deterministic
policy; plus the same episodes with N(0, 0.02^2) noise on the observed current HRV) on the
device, vmapped over seeds. Only those scalars leave the device.

Each combination writes ``<out>/<reward_form>__<similarity>/`` (curves.csv, run.json with
timing and load, final_metrics.csv last); every invocation then rebuilds from the finished
folders ``<out>/curves.csv``, ``final_metrics.csv`` (the last evaluation of every seed),
``summary.csv`` (mean and two-sided 95% t interval over seeds per combination),
``reward_comparison.{png,pdf}`` and ``comparison.json``. Held-out *return* is in each
reward's own units, so it is not comparable across reward forms; success, final distance
and alignment are.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COMBINATIONS = (("distance", "hrv_similarity"), ("progress", "hrv_similarity"),
                ("potential", "hrv_similarity"), ("potential", "cosine"),
                ("seed", "hrv_similarity"), ("seed", "cosine"))
"""The similarity enters only the potential and seed forms (distance and progress measure
the gap directly), so those two are run once."""
EVAL_METRICS = ("success_rate", "noisy_success_rate", "return_mean", "final_distance", "alignment",
                "episode_length")
FINAL_CSV = "final_metrics.csv"


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli import HelpFormatter

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--steps", type=int, default=300_000, help="environment steps per seed")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4], help="training seeds")
    parser.add_argument("--eval-every", type=int, default=10, help="updates between held-out evaluations")
    parser.add_argument("--eval-episodes", type=int, default=100, help="held-out episodes per evaluation")
    parser.add_argument("--combinations", nargs="+", default=[f"{r}/{s}" for r, s in COMBINATIONS],
                        help="reward_form/similarity pairs")
    parser.add_argument("--out", type=Path, required=True, help="output directory (one folder per combination)")
    parser.add_argument("--overwrite", action="store_true",
                        help="re-run a combination whose folder under --out is finished")
    parser.add_argument("--no-figure", action="store_true", help="skip reward_comparison.png/.pdf")
    parser.add_argument("--summarize-only", action="store_true",
                        help="train nothing: rebuild summary, CSVs and figure from the finished combinations")
    return parser


def make_comparison_program(env, config, eval_every: int, eval_episodes: int):
    """``train(keys) -> (runner, training metrics [update, seed], evaluations [update + 1, seed])``
    for one environment; evaluation rows that were not due are NaN."""
    import jax
    import jax.numpy as jnp

    from purehr.ppo.loop import Hook, UpdateLoop, run_updates
    from purehr.run.task_setup import build_task_setup

    setup = build_task_setup("hrv", config, env=env)
    ppo, num_updates = setup.ppo, setup.ppo.num_updates

    def evaluate(network_params):
        return setup.task.heldout_evaluation(env, setup.eval_env_params, ppo.policy(network_params),
                                             num_episodes=eval_episodes)

    def evaluate_seeds(runner):
        return jax.vmap(evaluate)(runner.params)

    def due(updates_done):
        return (updates_done % eval_every == 0) | (updates_done == num_updates)

    evaluation = Hook(due, lambda runner, _metrics: evaluate_seeds(runner), at_start=True)
    loop = UpdateLoop(jax.vmap(ppo.update), num_updates, (evaluation,))

    def train(keys):
        (runner,), (output,) = run_updates([loop], [jax.vmap(ppo.init)(keys)], num_updates)
        kept = {name: output.metrics[name] for name in ("mean_episode_return", "train_success_rate",
                                                        "mean_distance", "entropy", "approx_kl")}
        evaluations = jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]),
                                   output.at_start[0], output.hooks[0])
        return runner, kept, evaluations

    return jax.jit(train), ppo


def _load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def combination_dir(out: Path, name: str) -> Path:
    return out / name.replace("/", "__")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    combinations = []
    for text in args.combinations:
        parts = text.split("/")
        if len(parts) != 2 or (parts[0], parts[1]) not in COMBINATIONS:
            parser.exit(2, f"error: combination {text!r}: expected one of "
                           f"{[f'{r}/{s}' for r, s in COMBINATIONS]}\n")
        combinations.append((parts[0], parts[1]))
    if args.eval_every < 1 or args.steps < 1:
        parser.exit(2, "error: --steps and --eval-every must be positive\n")
    if not args.summarize_only:
        for reward_form, similarity in combinations:
            done = combination_dir(args.out, f"{reward_form}/{similarity}") / FINAL_CSV
            if done.exists() and not args.overwrite:
                parser.exit(2, f"error: {done} exists (that combination was already run); pass --overwrite, "
                               "--summarize-only, or choose another --out\n")
        for reward_form, similarity in combinations:
            run_combination(args, reward_form, similarity, argv)
    summarize(args.out, args.no_figure)
    return 0


def run_combination(args, reward_form: str, similarity: str, argv) -> None:
    """Train and evaluate one combination (one compiled call); writes its folder."""
    import jax
    import numpy as np

    from purehr.envs.hrv import HRV_OBSERVATION_NOISE_STD
    from purehr.ppo.train import keys_for_seeds
    from purehr.run.run_dir import atomic_write_json, write_csv
    from purehr.stats import tail_mean
    from purehr.tasks import get_task

    name = f"{reward_form}/{similarity}"
    folder = combination_dir(args.out, name)
    config = get_task("hrv").default_config.replace(total_timesteps=args.steps, eval_episodes=args.eval_episodes)
    keys = keys_for_seeds(args.seeds)
    env = get_task("hrv").make_env(similarity=similarity, reward_form=reward_form)
    train, ppo = make_comparison_program(env, config, args.eval_every, args.eval_episodes)
    load_before = _load_average()
    started = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    _, metrics, evaluations = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - started
    steps = ppo.num_updates * config.batch_size
    timing = {"compile_s": compile_s, "train_and_eval_s": run_s, "env_steps_per_seed": steps,
              "env_steps_per_s_all_seeds": steps * len(args.seeds) / run_s,
              "load_average_before": load_before, "load_average_after": _load_average()}
    print(f"[{name}] compile {compile_s:.1f} s, train+eval {run_s:.1f} s "
          f"({steps * len(args.seeds) / run_s:.0f} steps/s over {len(args.seeds)} seeds), "
          f"load {load_before} -> {timing['load_average_after']}", file=sys.stderr, flush=True)
    evaluations = {k: np.asarray(v) for k, v in evaluations.items()}
    metrics = {k: np.asarray(v) for k, v in metrics.items()}
    evaluated = np.flatnonzero(np.isfinite(evaluations["success_rate"][:, 0]))
    curves, finals = [], []
    for index, seed in enumerate(args.seeds):
        for row_index in evaluated:
            row = {"combination": name, "reward_form": reward_form, "similarity": similarity, "seed": seed,
                   "update": int(row_index), "env_steps": int(row_index) * config.batch_size}
            row.update({f"eval_{m}": float(evaluations[m][row_index, index]) for m in EVAL_METRICS})
            curves.append(row)
        final = dict(curves[-1])
        for column, key in (("train_final_return", "mean_episode_return"),
                            ("train_final_success_rate", "train_success_rate")):
            final[column] = tail_mean(metrics[key][:, index])
        finals.append(final)
    folder.mkdir(parents=True, exist_ok=True)
    write_csv(folder / "curves.csv", None, curves)
    atomic_write_json(folder / "run.json", {
        "command": ["python", "scripts/compare_rewards.py", *(sys.argv[1:] if argv is None else argv)],
        "combination": name, "seeds": args.seeds, "steps_per_seed": steps, "config": config.to_dict(),
        "evaluation": {"episodes": args.eval_episodes, "every_updates": args.eval_every, "difficulty": 0.9,
                       "target_precision": 0.05, "observation_noise_std": HRV_OBSERVATION_NOISE_STD},
        "timing": timing})
    write_csv(folder / FINAL_CSV, None, finals)      # last: marks the combination done


def summarize(out: Path, no_figure: bool = False) -> None:
    """Rebuild the comparison from every finished combination folder under ``out``."""
    import numpy as np

    from purehr.run.run_dir import atomic_write_json, environment_description, write_csv
    from purehr.stats import mean_confidence_interval

    names = [f"{r}/{s}" for r, s in COMBINATIONS
             if (combination_dir(out, f"{r}/{s}") / FINAL_CSV).exists()]
    if not names:
        print(f"no finished combination under {out}", file=sys.stderr)
        return
    curves, finals, runs, summary = [], [], {}, []
    for name in names:
        folder = combination_dir(out, name)
        curves += _rows(folder / "curves.csv")
        rows = _rows(folder / FINAL_CSV)
        finals += rows
        runs[name] = json.loads((folder / "run.json").read_text())
        entry = {"combination": name, "seeds": len(rows), "env_steps_per_seed": runs[name]["steps_per_seed"]}
        for metric in [f"eval_{m}" for m in EVAL_METRICS] + ["train_final_success_rate", "train_final_return"]:
            ci = mean_confidence_interval(np.array([r[metric] for r in rows], float))
            entry.update({f"{metric}_mean": ci["mean"], f"{metric}_ci_low": ci["ci_low"],
                          f"{metric}_ci_high": ci["ci_high"]})
        summary.append(entry)
    write_csv(out / "curves.csv", None, curves)
    write_csv(out / FINAL_CSV, None, finals)
    write_csv(out / "summary.csv", None, summary)
    description = environment_description()
    description.update(combinations=runs)
    references = reference_metrics(out)
    description.update(reference_policies=references)
    atomic_write_json(out / "comparison.json", description)
    if not no_figure:
        plot(out, curves, summary, names, references)
    print(f"{'combination':26s} held-out success, mean [95% t CI] over seeds   final distance   train success")
    for entry in summary:
        print(f"{entry['combination']:26s} {100 * entry['eval_success_rate_mean']:5.1f}% "
              f"[{100 * entry['eval_success_rate_ci_low']:6.1f}%, {100 * entry['eval_success_rate_ci_high']:6.1f}%]"
              f"           {entry['eval_final_distance_mean']:.3f}            "
              f"{100 * entry['train_final_success_rate_mean']:5.1f}%")
    print(f"wrote {out}")


def _rows(path: Path) -> list[dict]:
    from purehr.run.run_dir import parse_row, read_csv

    return [parse_row(row, ("combination", "reward_form", "similarity")) for row in read_csv(path)]


REFERENCE_POLICIES = ("oracle", "random", "no-op")
REFERENCE_STYLES = {"oracle": ("black", "--"), "random": ("grey", ":"), "no-op": ("grey", "-.")}


def reference_metrics(out: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Held-out metrics of the greedy oracle, the uniform random policy and the no-op policy
    (style none, keep, keep every dimension) under each reward: what PPO is judged against.
    Success, distance and alignment do not depend on the reward; the return does. Cached in
    ``<out>/reference_policies.json``."""
    path = out / "reference_policies.json"
    if path.exists():
        return json.loads(path.read_text())
    import jax

    from purehr.run.run_dir import atomic_write_json
    from purehr.tasks import get_task

    task = get_task("hrv")
    baselines = {baseline.name: baseline for baseline in task.baselines}
    references: dict[str, dict[str, dict[str, float]]] = {}
    for reward_form, similarity in COMBINATIONS:
        env = task.make_env(similarity=similarity, reward_form=reward_form)
        params = env.default_params
        policies = {name: baselines[name].make_policy(env, params) for name in REFERENCE_POLICIES}
        references[f"{reward_form}/{similarity}"] = {
            name: {k: float(v) for k, v in jax.jit(lambda: task.heldout_evaluation(env, params, policy))().items()}
            for name, policy in policies.items()}
    atomic_write_json(path, references)
    return references


def plot(out: Path, curves: list[dict], summary: list[dict], names: list[str],
         references: dict | None = None) -> None:
    import numpy as np
    from matplotlib.figure import Figure

    from purehr.stats import t_interval
    from purehr.viz.learning_curves import OKABE_ITO, save_figure

    colours = [OKABE_ITO[c] for c in ("blue", "orange", "green", "purple", "vermillion", "sky_blue")]
    panels = [("eval_success_rate", "held-out success rate", (-0.03, 1.03)),
              ("eval_final_distance", "held-out final L2 distance to target", None),
              ("eval_alignment", "held-out HRV alignment (Pearson r)", (-1.05, 1.05))]
    fig = Figure(figsize=(15.0, 4.4))
    axes = fig.subplots(1, len(panels) + 1, gridspec_kw={"width_ratios": [1, 1, 1, 0.9]})
    for colour, name in zip(colours, names):
        rows = [r for r in curves if r["combination"] == name]
        seeds = sorted({r["seed"] for r in rows})
        steps = np.array(sorted({r["env_steps"] for r in rows}))
        for ax, (metric, label, limits) in zip(axes, panels):
            values = np.array([[next(r[metric] for r in rows if r["seed"] == s and r["env_steps"] == x)
                                for x in steps] for s in seeds])
            for seed_values in values:
                ax.plot(steps, seed_values, color=colour, alpha=0.25, linewidth=0.7)
            mean, low, high = t_interval(values)
            ax.plot(steps, mean, color=colour, linewidth=2.0, label=name)
            if len(seeds) > 1:
                ax.fill_between(steps, low, high, color=colour, alpha=0.15, linewidth=0)
            ax.set_xlabel("environment steps per seed")
            ax.set_ylabel(label)
            if limits:
                ax.set_ylim(*limits)
    # reference policies (reward-independent metrics: take them from the first combination)
    if references:
        reference = next(iter(references.values()))
        handles = {}
        for ax, (metric, _, _) in zip(list(axes[:3]) + [axes[3]], panels + [("eval_final_distance", "", None)]):
            for policy in REFERENCE_POLICIES:
                colour, style = REFERENCE_STYLES[policy]
                handles[policy] = ax.axhline(reference[policy][metric.removeprefix("eval_")], color=colour,
                                             linestyle=style, linewidth=1.0)
        axes[2].legend(list(handles.values()), list(handles), fontsize=7, loc="lower right",
                       title="reference policies", title_fontsize=7)
    bars = axes[-1]
    last = {name: max(r["env_steps"] for r in curves if r["combination"] == name) for name in names}
    for index, (colour, entry) in enumerate(zip(colours, summary)):
        mean = entry["eval_final_distance_mean"]
        low, high = entry["eval_final_distance_ci_low"], entry["eval_final_distance_ci_high"]
        error = None if not np.isfinite(low) else [[mean - low], [high - mean]]
        bars.bar(index, mean, color=colour, yerr=error, capsize=4)
        finals = [r["eval_final_distance"] for r in curves
                  if r["combination"] == entry["combination"] and r["env_steps"] == last[entry["combination"]]]
        bars.scatter(np.full(len(finals), index) + np.linspace(-0.2, 0.2, len(finals)), finals, color="black",
                     s=8, zorder=3)
        bars.text(index, 0.12, f"success\n{100 * entry['eval_success_rate_mean']:.0f}%", ha="center", va="bottom",
                  fontsize=7, color="white")
    short = {"hrv_similarity": "L2 sim.", "cosine": "cosine"}
    bars.set_xticks(range(len(summary)),
                    [f"{e['combination'].split('/')[0]}\n{short[e['combination'].split('/')[1]]}" for e in summary],
                    fontsize=7)
    bars.set_ylabel("final held-out L2 distance\n(mean, 95% t CI; dots = seeds)")
    axes[0].legend(fontsize=7, loc="center right")
    steps_per_seed = summary[0].get("env_steps_per_seed", float("nan"))
    fig.suptitle(f"HRV reward form x similarity, PPO protocol defaults, {steps_per_seed:,.0f} steps x "
                 f"{summary[0]['seeds']:.0f} seeds each\nheld-out: 100 fixed episodes, difficulty 0.9, precision "
                 "0.05; thin lines = seeds, band = 95% t interval", fontsize=9)
    fig.tight_layout()
    save_figure(fig, out, "reward_comparison")


if __name__ == "__main__":
    sys.exit(main())
