"""The truncation bootstrap: valued in every rollout step (the feed-forward core before
2026-12-03: the critic on 2 x num_envs rows per step, this step's observations and the
previous step's final ones) against after the rollout, at the truncated steps only (today's
``FeedForwardCore``). The old core is rebuilt here as a subclass, so both programs compile in
one process and run interleaved.

    PJRT_NPROC=1 python benchmarks/bootstrap.py --configs rejax_cartpole pjx_cartpole brax pjx_continuous
    PJRT_NPROC=1 python benchmarks/bootstrap.py --configs swing hrv

Configs: rejax's and PureJaxRL's CartPole settings and PureJaxRL's continuous settings on
inverted_pendulum (2 of its updates) from ``peers.py``, Brax's inverted_pendulum settings from
``brax_peer.py`` (10 updates), the swing (409,600 steps) and hrv (204,800 steps) defaults.
5 seeds vmapped; printed per config: each program's run times, compile times, and new / old
steps/s from the best and from the median run.
"""

from __future__ import annotations

import os

os.environ.setdefault("PJRT_NPROC", "1")  # before jax starts: as peers.py

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from purehr.algorithms.ppo import algorithm  # noqa: E402
from purehr.algorithms.ppo.policy_core import FeedForwardCore, StepOutputs  # noqa: E402
from purehr.algorithms.trainer import make_train  # noqa: E402
from purehr.engine.networks import ActorCritic  # noqa: E402
from purehr.engine.seeds import keys_for_seeds  # noqa: E402

CONFIGS = ("rejax_cartpole", "pjx_cartpole", "pjx_continuous", "brax", "swing", "hrv")
SEEDS = 5


class EveryStepCore(FeedForwardCore):
    """The feed-forward core as it was: every step's final observations valued in the rollout."""

    records_final_observations = False

    def step(self, params, carry, observation, previous_final):
        actor_output, log_std = self.network.apply(params, observation, method=ActorCritic.policy)
        values = self.network.apply(params, jnp.concatenate([observation, previous_final]), method=ActorCritic.value)
        return StepOutputs(actor_output, log_std, values[: self.num_envs], values[self.num_envs :], (), ())

    def next_values(self, params, carry, trajectory, observation, final_observation):
        last = self.network.apply(params, final_observation, method=ActorCritic.value)
        return jnp.concatenate([trajectory.previous_final_value[1:], last[None]])


def config_and_env(name: str):
    import brax_peer
    import peers

    from purehr.envs.brax_adapter import BraxEnv
    from purehr.envs.gymnax_adapter import GymnaxEnv
    from purehr.tasks.registry import get_task

    if name == "rejax_cartpole":
        return peers.rejax_as_purehr(peers.REJAX_CONFIGS["CartPole-v1"]), GymnaxEnv("CartPole-v1")
    if name == "pjx_cartpole":
        return peers.purejaxrl_as_purehr("CartPole-v1"), GymnaxEnv("CartPole-v1")
    if name == "pjx_continuous":
        peers.PUREJAXRL_CONFIGS["inverted_pendulum"]["TOTAL_TIMESTEPS"] = 2 * 20480
        return peers.purejaxrl_as_purehr("inverted_pendulum"), BraxEnv("inverted_pendulum")
    if name == "brax":
        return brax_peer.purehr_config(brax_peer.steps_per_update() * 10), BraxEnv("inverted_pendulum")
    task = get_task(name)
    steps = {"swing": 409_600, "hrv": 204_800}[name]
    return task.default_config.replace(total_timesteps=steps), task.make_env()


def compare(name: str, repeats: int) -> None:
    config, env = config_and_env(name)
    programs = {}
    for label, core in (("old", EveryStepCore), ("new", FeedForwardCore)):
        algorithm.FeedForwardCore = core  # what make_policy_core builds
        train = make_train(config, env)
        keys = keys_for_seeds(range(SEEDS))
        started = time.perf_counter()
        compiled = train.jitted.lower(keys, None).compile()
        programs[label] = (compiled, keys, time.perf_counter() - started)
    algorithm.FeedForwardCore = FeedForwardCore
    times = {label: [] for label in programs}
    for _ in range(repeats):  # interleaved: both see the same load
        for label, (compiled, keys, _) in programs.items():
            started = time.perf_counter()
            jax.block_until_ready(compiled(keys, None))
            times[label].append(time.perf_counter() - started)
    print(
        name,
        {label: [round(t, 2) for t in ts] for label, ts in times.items()},
        "compile",
        {label: round(program[2], 1) for label, program in programs.items()},
        "new/old steps/s (best)",
        round(min(times["old"]) / min(times["new"]), 3),
        "(median)",
        round(np.median(times["old"]) / np.median(times["new"]), 3),
        flush=True,
    )


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, positive_int

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS), help="the settings to compare on"
    )
    parser.add_argument("--repeats", type=positive_int, default=5, help="timed runs per program (interleaved)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # peers.py, brax_peer.py
    for name in args.configs:
        compare(name, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
