"""``--pbt`` and its options (scripts/train_all_seeds.py): population-based training over each
task's seeds, docs/pbt.md. What they give is checked by ``purehr.population.PBTSettings``; a
flag that needs ``--pbt`` without it is refused."""

from __future__ import annotations

import argparse

from purehr.population.settings import (
    DEFAULT_BOUNDS,
    DEFAULT_EXPLORE,
    FITNESS_RULES,
    NAMED_BOUNDS,
    PBTSettings,
    explorable,
)

DEFAULTS = PBTSettings()


def add_pbt_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("population-based training (docs/pbt.md)")
    group.add_argument(
        "--pbt",
        action="store_true",
        help="train each task's seeds as one population: at checkpoints the worst members copy the weights, "
        "optimiser state and hyperparameters of the best and perturb them, inside the compiled call",
    )
    group.add_argument(
        "--population", type=int, default=None, metavar="N", help="members per task: seeds 0 .. N-1 (or --seeds)"
    )
    group.add_argument(
        "--pbt-explore",
        nargs="+",
        default=None,
        metavar="NAME",
        help=f"hyperparameters to explore, each task those its algorithm has (default: {' '.join(DEFAULT_EXPLORE)}, "
        "PPO's; of them "
        + ", ".join(
            f"{name} has {' '.join(n for n in DEFAULT_EXPLORE if n in names) or 'none: name its own'}"
            for name, names in explorable().items()
            if name != "ppo"
        )
        + "; one that starts at 0, as an ent_coef of 0, cannot be explored: leave it out; "
        + "; ".join(f"{name}: {', '.join(names)}" for name, names in explorable().items())
        + ")",
    )
    group.add_argument(
        "--pbt-bounds",
        nargs="+",
        default=None,
        metavar="NAME=LOW:HIGH",
        help="bounds of an explored hyperparameter (defaults: "
        + ", ".join(f"{n}={lo:g}:{hi:g}" for n, (lo, hi) in DEFAULT_BOUNDS.items())
        + "; another algorithm's by the end of its name: "
        + ", ".join(f"*{'/*'.join(ends)}={lo:g}:{hi:g}" for ends, (lo, hi) in NAMED_BOUNDS)
        + ")",
    )
    group.add_argument(
        "--pbt-fraction",
        type=float,
        default=None,
        help=f"truncation selection: the bottom fraction copies a random member of the top fraction "
        f"(default {DEFAULTS.fraction})",
    )
    group.add_argument(
        "--pbt-factors",
        nargs=2,
        type=float,
        default=None,
        metavar=("DOWN", "UP"),
        help=f"explore: multiply a copied hyperparameter by one of these (default {DEFAULTS.factors[0]} "
        f"{DEFAULTS.factors[1]})",
    )
    group.add_argument(
        "--pbt-resample",
        type=float,
        default=None,
        metavar="P",
        help=f"explore: draw a copied hyperparameter anew within its bounds with this probability "
        f"(default {DEFAULTS.resample_probability})",
    )
    group.add_argument(
        "--pbt-interval",
        type=int,
        default=None,
        metavar="K",
        help="the step fires at every K-th checkpoint target (default 1: every target but the last)",
    )
    group.add_argument(
        "--pbt-fitness",
        nargs="+",
        default=None,
        metavar="TASK=RULE",
        help=f"what ranks a task's members: {' or '.join(FITNESS_RULES)} (default: success where the task "
        "defines it, ties broken by held-out return; else return)",
    )


def _pairs(values: list[str] | None, flag: str, what: str) -> dict[str, str] | None:
    if values is None:
        return None
    pairs = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise ValueError(f"{flag} {value!r}: expected {what}")
        if name in pairs:  # the last would win silently
            given = ", ".join(v for v in values if v.partition("=")[0] == name)
            raise ValueError(f"{flag} {name} given twice ({given}); expected each name once")
        pairs[name] = rest
    return pairs


def _bounds(values: list[str] | None) -> dict[str, tuple[float, float]] | None:
    pairs = _pairs(values, "--pbt-bounds", "NAME=LOW:HIGH")
    if pairs is None:
        return None
    bounds = {}
    for name, text in pairs.items():
        low, sep, high = text.partition(":")
        try:
            bounds[name] = (float(low), float(high))
        except ValueError:
            raise ValueError(f"--pbt-bounds {name}={text}: expected NAME=LOW:HIGH with two numbers") from None
        if not sep:
            raise ValueError(f"--pbt-bounds {name}={text}: expected NAME=LOW:HIGH")
    return bounds


def pbt_from_args(args) -> tuple[PBTSettings | None, list[int] | None]:
    """(the PBT settings, the seeds) the command line gives: ``--population N`` means seeds
    0 .. N-1 unless ``--seeds`` names N of them."""
    given = {
        "explore": args.pbt_explore,
        "bounds": _bounds(args.pbt_bounds),
        "fraction": args.pbt_fraction,
        "factors": args.pbt_factors,
        "resample_probability": args.pbt_resample,
        "interval": args.pbt_interval,
        "fitness": _pairs(args.pbt_fitness, "--pbt-fitness", "TASK=RULE"),
    }
    if not args.pbt:
        used = [name for name, value in given.items() if value is not None]
        if used or args.population is not None:
            flags = ["--population"] * (args.population is not None) + [f"--pbt-{n.split('_')[0]}" for n in used]
            raise ValueError(f"{' '.join(flags)} given without --pbt; add --pbt to train a population")
        return None, args.seeds
    seeds = args.seeds
    if args.population is not None:
        if args.population < 1:
            raise ValueError(f"--population {args.population}: expected a positive number of members")
        if seeds is None:
            seeds = list(range(args.population))
        elif len(seeds) != args.population:
            raise ValueError(f"--population {args.population} but {len(seeds)} --seeds {seeds}: give one, or agree")
    return PBTSettings.checked(**given), seeds
