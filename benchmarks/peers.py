"""purehr against its peers, each on its own published settings: PureJaxRL (``ppo.py`` on
CartPole-v1, ``ppo_continuous_action.py`` on Brax's inverted_pendulum), rejax, Brax's own
PPO (``brax:inverted_pendulum``: a Python loop of its own, measured its way by
``brax_peer.py``, whose docstring says how), and purejaxql's PQN against purehr's PQN
(``purejaxql:CartPole-v1``, ``--purejaxql PATH``: ``_purejaxql_peer.py``, whose docstring says
where its config comes from and what is not the same), and rejax's PQN and SAC against
purehr's (``rejax-pqn:CartPole-v1``, ``rejax-sac:Pendulum-v1``: ``_rejax_offpolicy_peer.py``,
likewise), and Brax's own SAC against purehr's (``brax-sac:inverted_pendulum``:
``_brax_sac_peer.py``, measured as ``brax_peer.py`` measures Brax's PPO). PureJaxRL's adapter is
``_purejaxrl_peer.py``.

    python benchmarks/peers.py --purejaxrl PATH --json benchmarks/results/peers.json
    python benchmarks/peers.py --configs rejax:CartPole-v1 --repeats 1        # one, shorter
    python benchmarks/peers.py --configs purejaxql:CartPole-v1 --purejaxql PATH
    python benchmarks/peers.py --configs rejax-pqn:CartPole-v1 rejax-sac:Pendulum-v1 brax-sac:inverted_pendulum

``--purejaxrl PATH``: PureJaxRL is not a package. PATH is a folder with its unmodified
``ppo.py``, ``ppo_continuous_action.py`` and ``wrappers.py``
(``git clone https://github.com/luchris429/purejaxrl``, then PATH = ``purejaxrl/purejaxrl``).
Its wrappers import ``brax`` (the ``brax`` extra) and ``navix`` for a grid-world wrapper no
config here uses; navix has no release for Python 3.11 that keeps this jax, so an empty
``navix`` module stands in when none is installed (said in the JSON).
rejax: ``pip install -c constraints.txt -e ".[bench]"``.

Each config is one peer's published settings (``PEER_CONFIGS``) and purehr on the same
numbers: the same environment (gymnax, purehr through ``GymnaxEnv``), budget (purehr's rounded
to the peer's whole updates), 5 seeds vmapped in one jitted call per library, network widths,
activation and hyperparameters. The libraries run interleaved in one process (peer, purehr,
peer, purehr, ...) so both see the same machine load; each library's steps/s is its best of
``--repeats`` runs. Also recorded: compile time (``lower().compile()``), the compiled
program's memory (XLA's account: arguments + outputs + temporaries), the final greedy return
per seed from one evaluator (``purehr.envs.rollout.run_episodes``, 20 episodes per seed,
deterministic action: argmax / mean), and the load average before and after. Ratios are
purehr / peer.

``PJRT_NPROC`` defaults to 1 here (set before jax starts): PureJaxRL's orthogonal init runs a
QR under its seed vmap, which hangs XLA's CPU thread pool on a 2-core machine with the default
pool (docs/protocol.md, "Engine facts"), and these small networks run faster on one thread.
Both libraries run under the same setting.

What is the same and what is not (said in each record too):

- rejax evaluates 128 stochastic episodes every ``eval_freq`` steps inside its training scan;
  its eval_callback is a no-op here and eval_freq = total_timesteps, so both time training only.
  rejax keeps the learning rate constant (purehr: ``anneal_lr=False``) and clips each gradient
  element (purehr: ``elementwise_grad_clip=True``); it has separate actor and critic
  optimisers, purehr one optimiser over both networks of the same widths.
- PureJaxRL (``ppo.py``): orthogonal init (purehr: scaled Gaussian), a clipped value loss
  (purehr: plain), advantages normalised per minibatch (purehr: over the batch), time limits
  treated as terminations (purehr bootstraps them from V(final observation)); the learning
  rate anneals and the gradient's global norm is clipped in both.
- PureJaxRL (``ppo_continuous_action.py``, its hopper settings on inverted_pendulum, 6 updates
  of 2,048 environments x 10 steps: ``PUREJAXRL_CONFIGS``): as ``ppo.py`` above, and a
  Gaussian policy whose samples the environment clips to [-1, 1] (purehr: tanh-squashed, the
  log-probability of the latent sample); its observations normalised by statistics updated at
  every step (purehr: after each update), and its rewards by a running return scale (purehr
  has none); Brax's auto-reset restarts each environment from that environment's first
  initial state (purehr draws a fresh one). Same 256 x 256 tanh networks, constant learning
  rate, no entropy bonus; the policy's log std starts at 0 in both. The greedy policy is the
  clipped mean after the peer's own observation normaliser (purehr: tanh of the mean).
"""

from __future__ import annotations

import os

os.environ.setdefault("PJRT_NPROC", "1")  # before jax starts: see the docstring

import argparse  # noqa: E402
import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import load_averages, write_json  # noqa: E402
from _purejaxql_peer import PurejaxqlRun, load_purejaxql, purejaxql_as_purehr  # noqa: E402
from _purejaxrl_peer import PUREJAXRL_CONFIGS, PureJaxRLRun, load_purejaxrl, purejaxrl_as_purehr  # noqa: E402
from _rejax_offpolicy_peer import (  # noqa: E402
    DIFFERENCES,
    PQN_CONFIGS,
    SAC_CONFIGS,
    RejaxOffPolicyRun,
    rejax_pqn_as_purehr,
    rejax_sac_as_purehr,
)

from purehr.algorithms.base import AlgorithmConfig  # noqa: E402
from purehr.algorithms.ppo.config import PPOConfig  # noqa: E402
from purehr.algorithms.trainer import make_train  # noqa: E402
from purehr.engine.seeds import keys_for_seeds  # noqa: E402
from purehr.envs.brax_adapter import BraxEnv  # noqa: E402
from purehr.envs.gymnax_adapter import GymnaxEnv  # noqa: E402
from purehr.envs.rollout import run_episodes  # noqa: E402

# rejax configs/gymnax/*.yaml, ppo section (commit 4954fbf of keraJLi/rejax)
_REJAX_SMALL = dict(
    agent_kwargs={"activation": "tanh"},
    num_envs=5,
    num_steps=100,
    num_epochs=5,
    num_minibatches=5,
    learning_rate=0.00075,
    max_grad_norm=0.5,
    total_timesteps=100_000,
    gamma=0.99,
    gae_lambda=0.95,
    clip_eps=0.2,
    ent_coef=0.01,
    vf_coef=0.5,
)
REJAX_CONFIGS = {
    "CartPole-v1": dict(env="CartPole-v1", **_REJAX_SMALL),
    "Acrobot-v1": dict(env="Acrobot-v1", **_REJAX_SMALL, normalize_observations=True),
    "Pendulum-v1": dict(
        env="Pendulum-v1",
        agent_kwargs={"activation": "swish"},
        num_envs=100,
        num_steps=100,
        num_epochs=10,
        num_minibatches=10,
        learning_rate=0.001,
        max_grad_norm=10,
        total_timesteps=150_000,
        gamma=0.995,
        gae_lambda=0.95,
        clip_eps=0.2,
        ent_coef=0.0,
        vf_coef=0.5,
        normalize_observations=True,
    ),
}
BRAX_ENVIRONMENTS = {"inverted_pendulum"}
"""Config environments that are Brax's (``BraxEnv``, positional backend, 1,000-step episodes:
the backend and time limit of PureJaxRL's ``BraxGymnaxWrapper``); the others are gymnax's."""
BRAX_CONFIG = "brax:inverted_pendulum"  # brax_peer.py: Brax's train_fn settings, its way of timing
BRAX_SAC_CONFIG = "brax-sac:inverted_pendulum"  # _brax_sac_peer.py: Brax's SAC, brax_peer.py's way of timing
PUREJAXQL_CONFIGS = ("CartPole-v1", "Asterix-MinAtar")  # _purejaxql_peer.py: its PQN, its config read from its folder
PEER_CONFIGS = (
    [f"purejaxrl:{name}" for name in PUREJAXRL_CONFIGS]
    + [f"rejax:{name}" for name in REJAX_CONFIGS]
    + [BRAX_CONFIG]
    + [f"purejaxql:{name}" for name in PUREJAXQL_CONFIGS]
    + [f"rejax-pqn:{name}" for name in PQN_CONFIGS]
    + [f"rejax-sac:{name}" for name in SAC_CONFIGS]
    + [BRAX_SAC_CONFIG]
)
EVAL_EPISODES = 20


def rejax_as_purehr(rejax: dict) -> PPOConfig:
    """rejax's numbers in purehr's terms (a minibatch size, not a count), with its activation,
    observation normalisation, constant learning rate and element-wise gradient clip."""
    batch = rejax["num_envs"] * rejax["num_steps"]
    return PPOConfig(
        total_timesteps=rejax["total_timesteps"],
        num_envs=rejax["num_envs"],
        num_steps=rejax["num_steps"],
        num_epochs=rejax["num_epochs"],
        minibatch_size=batch // rejax["num_minibatches"],
        learning_rate=rejax["learning_rate"],
        anneal_lr=False,
        gamma=rejax["gamma"],
        gae_lambda=rejax["gae_lambda"],
        clip_range=rejax["clip_eps"],
        ent_coef=rejax["ent_coef"],
        vf_coef=rejax["vf_coef"],
        max_grad_norm=float(rejax["max_grad_norm"]),
        elementwise_grad_clip=True,
        actor_hidden=(64, 64),
        critic_hidden=(64, 64),
        activation=rejax["agent_kwargs"]["activation"],
        normalize_observations=rejax.get("normalize_observations", False),
    )


def program_bytes(compiled) -> int | None:
    analysis = compiled.memory_analysis()
    if analysis is None:
        return None
    return int(analysis.argument_size_in_bytes + analysis.output_size_in_bytes + analysis.temp_size_in_bytes)


def timed(compiled, argument) -> tuple[float, object]:
    started = time.perf_counter()
    result = jax.block_until_ready(compiled(argument))
    return time.perf_counter() - started, result


def seed_mean_greedy_returns(policy_of, params, env: GymnaxEnv) -> np.ndarray:
    """Mean greedy return per seed of ``policy_of(one seed's params)`` over ``EVAL_EPISODES``
    episodes of ``env`` (the same episodes for every library)."""

    def returns(one_seed):
        policy = policy_of(one_seed)
        return run_episodes(env, env.default_params, policy, jax.random.PRNGKey(7), EVAL_EPISODES)["return"]

    return np.asarray(jax.jit(jax.vmap(returns))(params)).mean(axis=1)


class RejaxRun:
    def __init__(self, name: str, seeds: int):
        from rejax import PPO

        self.algo = PPO.create(**REJAX_CONFIGS[name]).replace(
            eval_callback=lambda algo, ts, rng: jnp.zeros(()),
            skip_initial_evaluation=True,
            eval_freq=REJAX_CONFIGS[name]["total_timesteps"],
        )
        self.keys = jax.random.split(jax.random.PRNGKey(0), seeds)
        started = time.perf_counter()
        self.compiled = jax.jit(jax.vmap(lambda key: self.algo.train(key)[0])).lower(self.keys).compile()
        self.compile_s = time.perf_counter() - started
        iterations = -(-self.algo.total_timesteps // (self.algo.num_envs * self.algo.num_steps))
        self.env_steps = seeds * iterations * self.algo.num_envs * self.algo.num_steps

    def run(self):
        return timed(self.compiled, self.keys)

    def greedy_returns(self, train_state, env: GymnaxEnv) -> np.ndarray:
        algo = self.algo

        def policy_of(ts):
            def policy(observation, t, key):
                if getattr(algo, "normalize_observations", False):
                    observation = algo.normalize_obs(ts.obs_rms_state, observation)
                dist = algo.actor.apply(ts.actor_ts.params, observation[None], method="_action_dist")
                if algo.discrete:
                    return jnp.argmax(dist.logits[0])
                space = algo.env.action_space(algo.env_params)
                return jnp.clip(dist.mean()[0], space.low, space.high)

            return policy

        return seed_mean_greedy_returns(policy_of, train_state, env)


class PurehrRun:
    def __init__(self, config: AlgorithmConfig, seeds: int, env: GymnaxEnv):
        self.config = config
        self.train = make_train(config, env)
        self.keys = keys_for_seeds(range(seeds))
        started = time.perf_counter()
        self.compiled = self.train.jitted.lower(self.keys, None).compile()
        self.compile_s = time.perf_counter() - started
        self.env_steps = seeds * config.num_updates * config.batch_size

    def run(self):
        return timed(lambda keys: self.compiled(keys, None), self.keys)

    def greedy_returns(self, result, env: GymnaxEnv) -> np.ndarray:
        algorithm = self.train.algorithm
        return seed_mean_greedy_returns(algorithm.policy, algorithm.network_params(result.runner), env)


def make_runs(
    config_name: str, seeds: int, purejaxql: Path | None = None, budget: int | None = None
) -> tuple[str, dict, GymnaxEnv | BraxEnv, dict]:
    """(peer, {library: run}, environment, the peer's settings) of one ``peer:environment``;
    ``purejaxql``: its folder (purejaxql:* configs), ``budget``: their reduced budget."""
    peer, name = config_name.split(":", 1)
    env = BraxEnv(name) if name in BRAX_ENVIRONMENTS else GymnaxEnv(name)
    if peer == "purejaxql":
        run = PurejaxqlRun(purejaxql, name, seeds, seed_mean_greedy_returns, budget)
        runs = {"purejaxql": run, "purehr": PurehrRun(purejaxql_as_purehr(run.settings), seeds, env)}
        return peer, runs, env, run.settings
    if peer in ("rejax-pqn", "rejax-sac"):
        algorithm = peer.split("-")[1]
        run = RejaxOffPolicyRun(algorithm, name, seeds, seed_mean_greedy_returns)
        to_purehr = rejax_pqn_as_purehr if algorithm == "pqn" else rejax_sac_as_purehr
        return peer, {peer: run, "purehr": PurehrRun(to_purehr(run.settings), seeds, env)}, env, run.settings
    if peer == "rejax":
        settings = REJAX_CONFIGS[name]
        runs = {"rejax": RejaxRun(name, seeds), "purehr": PurehrRun(rejax_as_purehr(settings), seeds, env)}
    else:
        settings = PUREJAXRL_CONFIGS[name]
        runs = {
            "purejaxrl": PureJaxRLRun(name, seeds, seed_mean_greedy_returns),
            "purehr": PurehrRun(purejaxrl_as_purehr(name), seeds, env),
        }
    return peer, runs, env, settings


def compare_with_brax(repeats: int) -> dict:
    """Brax's own PPO, which trains one seed per call in a Python loop that compiles at every
    call, measured as ``brax_peer.py`` measures it (its defaults; its docstring says how)."""
    import brax_peer

    defaults = brax_peer.build_parser()
    record = brax_peer.compare(defaults.get_default("steps"), repeats, defaults.get_default("chunks"), "positional")
    ratio = record["ratio_purehr_over_brax_steps_per_s"]
    compile_ratio = record["summary"]["purehr"]["compile_s_median"] / record["summary"]["brax"]["compile_s_median"]
    return dict(
        record,
        config=BRAX_CONFIG,
        ratio_purehr_over_peer={"steps_per_s": ratio, "compile_s": round(compile_ratio, 3)},
        **{"purehr_1.2x_as_fast": ratio >= 1.2, "purehr_first_call_no_slower": compile_ratio <= 1.0},
    )


def compare(
    config_name: str, seeds: int, repeats: int, purejaxql: Path | None = None, budget: int | None = None
) -> dict:
    if config_name == BRAX_CONFIG:
        return compare_with_brax(repeats)
    if config_name == BRAX_SAC_CONFIG:
        import _brax_sac_peer

        return _brax_sac_peer.compare(repeats)
    peer, runs, env, settings = make_runs(config_name, seeds, purejaxql, budget)
    seconds = {library: [] for library in runs}
    results = {}
    for _ in range(repeats):  # interleaved: both see the same load
        for library, run in runs.items():
            elapsed, results[library] = run.run()
            seconds[library].append(elapsed)
    record = {
        "config": config_name,
        "seeds": seeds,
        "peer_settings": settings,
        "purehr_config": runs["purehr"].config.to_dict(),
    }
    if peer == "purejaxql" and budget is not None:
        record["reduced_budget"] = f"TOTAL_TIMESTEPS and TOTAL_TIMESTEPS_DECAY set to {budget}, not the published"
    if peer.startswith("rejax-"):
        record["not_the_same"] = DIFFERENCES
    for library, run in runs.items():
        returns = run.greedy_returns(results[library], env)
        record[library] = {
            "compile_s": round(run.compile_s, 2),
            "run_s": [round(s, 2) for s in seconds[library]],
            "env_steps": run.env_steps,
            "steps_per_s": round(run.env_steps / min(seconds[library])),
            "program_memory_mb": round((program_bytes(run.compiled) or 0) / 2**20, 2),
            "greedy_return_per_seed": [round(float(r), 1) for r in returns],
            "greedy_return_mean": round(float(returns.mean()), 1),
        }
    ours, theirs = record["purehr"], record[peer]
    record["ratio_purehr_over_peer"] = {
        "steps_per_s": round(ours["steps_per_s"] / theirs["steps_per_s"], 3),
        "compile_s": round(ours["compile_s"] / theirs["compile_s"], 3),
    }
    record["purehr_1.2x_as_fast"] = record["ratio_purehr_over_peer"]["steps_per_s"] >= 1.2
    record["purehr_first_call_no_slower"] = record["ratio_purehr_over_peer"]["compile_s"] <= 1.0
    record["purehr_returns_no_worse"] = bool(ours["greedy_return_mean"] >= theirs["greedy_return_mean"] - 1e-6)
    return record


def versioned_packages(peers: set[str]) -> set[str]:
    """The installed packages a record names the versions of: gymnax, the peers that are
    packages, and what purejaxql's script imports (it is a folder, not a package)."""
    packages = {"gymnax", *peers} - {"purejaxrl", "purejaxql", "rejax-pqn", "rejax-sac", "brax-sac"}
    if "brax-sac" in peers:
        packages.add("brax")
    if peers & {"rejax-pqn", "rejax-sac"}:
        packages.add("rejax")
    if "purejaxql" in peers:
        packages |= {"hydra-core", "omegaconf", "flax", "optax"}
    return packages


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, output_file, positive_int

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--configs",
        nargs="+",
        default=None,
        choices=PEER_CONFIGS,
        help="peer:environment, each with that peer's published settings (default: all; the purejaxql:* "
        "ones only with --purejaxql)",
    )
    parser.add_argument(
        "--purejaxrl", type=Path, default=None, help="folder of a PureJaxRL checkout's ppo.py (purejaxrl:* configs)"
    )
    parser.add_argument(
        "--purejaxql", type=Path, default=None, help="folder of a purejaxql checkout's pqn_gymnax.py and config/"
    )
    parser.add_argument(
        "--purejaxql-timesteps",
        type=positive_int,
        default=None,
        help="a reduced budget for the purejaxql:* configs (default: their published TOTAL_TIMESTEPS)",
    )
    parser.add_argument("--seeds", type=positive_int, default=5, help="seeds vmapped in each library's one call")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed runs per library (best counts)")
    parser.add_argument("--json", type=output_file, default=None, help="also write the records to this file")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.configs is None:  # every config, purejaxql's only when its folder is given (they came later)
        args.configs = [c for c in PEER_CONFIGS if args.purejaxql is not None or not c.startswith("purejaxql:")]
    peers = {config.split(":")[0] for config in args.configs}
    for peer in ("purejaxrl", "purejaxql"):
        if peer in peers and getattr(args, peer) is None:
            parser.error(f"--configs {' '.join(args.configs)}: the {peer}:* configs need --{peer} PATH")
    for peer, package, extra in (
        ("rejax", "rejax", "bench"),
        ("rejax-pqn", "rejax", "bench"),
        ("rejax-sac", "rejax", "bench"),
        ("brax", "brax", "brax"),
        ("brax-sac", "brax", "brax"),
        ("purejaxrl", "brax", "brax"),
        ("purejaxql", "hydra", "purejaxql"),
    ):
        if peer in peers and importlib.util.find_spec(package) is None:  # PureJaxRL's wrappers import brax
            parser.exit(
                2, f"error: the {peer}:* configs need {package}: pip install -c constraints.txt -e '.[{extra}]'\n"
            )
    navix_stand_in = load_purejaxrl(args.purejaxrl) if "purejaxrl" in peers else False
    if "purejaxql" in peers:
        load_purejaxql(args.purejaxql)
    load_before = os.getloadavg()
    records = []
    for name in args.configs:
        records.append(compare(name, args.seeds, args.repeats, args.purejaxql, args.purejaxql_timesteps))
        record = records[-1]
        peer = name.split(":")[0]
        summary = {k: v for k, v in record.items() if k.startswith(("config", "ratio_purehr_over_peer", "purehr_"))}
        summary.pop("purehr_config", None)
        for library in (peer, "purehr") if peer in record else ():
            summary[library] = {
                k: record[library][k] for k in ("steps_per_s", "compile_s", "greedy_return_mean", "program_memory_mb")
            }
        print(json.dumps(summary), flush=True)
    out = {
        "command": " ".join(["python benchmarks/peers.py"] + (sys.argv[1:] if argv is None else list(argv))),
        "records": records,
        "jax": jax.__version__,
        "versions": {name: importlib.metadata.version(name) for name in sorted(versioned_packages(peers))},
        "purejaxrl_folder": None if args.purejaxrl is None else str(args.purejaxrl),
        "purejaxql_folder": None if args.purejaxql is None else str(args.purejaxql),
        "navix_stand_in": navix_stand_in,
        "PJRT_NPROC": os.environ.get("PJRT_NPROC"),
        "devices": [str(d) for d in jax.devices()],
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        **load_averages(load_before),
        "peak_host_memory_mb_whole_process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
