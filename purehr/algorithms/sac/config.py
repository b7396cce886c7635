"""SAC configuration: static shape choices in a frozen dataclass, tunable numbers as a pytree
(the split of ``purehr.algorithms.ppo.config``, after rejax).

Sizes that change arrays or the compiled program (environments, steps, gradient steps, the
sampled minibatch, the buffer, network widths) are ``SACConfig`` fields, and so is every
continuous hyperparameter; the ones the training state carries as traced values (a sweep vmaps
them, PBT explores them) are the fields of ``SACHyperparams``.

One update is ``num_steps`` steps of ``num_envs`` environments (``batch_size`` = their product:
the environment steps per update per seed, the protocol's unit), their insertion into the replay
buffer, then ``gradient_steps`` gradient steps on ``sample_size`` transitions drawn uniformly from
the buffer. The replay ratio is ``gradient_steps * sample_size / batch_size`` samples per
environment step.
"""

from __future__ import annotations

from purehr.algorithms.config_types import ConfigFields, config_class, network_field
from purehr.protocol_settings import with_help

ACTIVATIONS = ("tanh", "relu", "swish")
MAX_OPTIMIZER_STEPS = 2**31 - 1
"""Largest count of an int32 counter: the limit on updates x gradient steps per seed."""


@config_class
class SACConfig(ConfigFields):
    total_timesteps: int = with_help(1_000_000, "environment steps of training per seed")
    num_envs: int = with_help(16, "parallel environments per seed")
    num_steps: int = with_help(8, "environment steps per environment and update")
    gradient_steps: int = with_help(16, "gradient steps (critic, actor, temperature) per update")
    sample_size: int = with_help(256, "transitions sampled from the replay buffer per gradient step")
    buffer_size: int = with_help(100_000, "replay buffer capacity in transitions per seed (oldest overwritten)")
    learning_starts: int = with_help(
        5_000, "environment steps per seed of uniform random actions before the first gradient step", bounds=">=0"
    )
    actor_learning_rate: float = with_help(3e-4, "Adam step size of the actor", traced=True, bounds=">0")
    critic_learning_rate: float = with_help(3e-4, "Adam step size of the twin critics", traced=True, bounds=">0")
    temperature_learning_rate: float = with_help(
        3e-4, "Adam step size of the log temperature", traced=True, bounds=">0"
    )
    gamma: float = with_help(0.99, "discount factor", traced=True, bounds="[0,1]")
    tau: float = with_help(
        0.005, "Polyak step of the target critics towards the critics per gradient step", traced=True, bounds="[0,1]"
    )
    initial_temperature: float = with_help(1.0, "entropy temperature alpha at the start", bounds=">0")
    target_entropy_per_dimension: float = with_help(
        -1.0, "target entropy per action dimension (the target is this x action dimensions; SAC's: -1)", traced=True
    )
    actor_hidden: tuple[int, ...] = with_help((256, 256), "actor network layer widths")
    critic_hidden: tuple[int, ...] = with_help((256, 256), "critic network layer widths (each of the twins)")
    activation: str = with_help("relu", "hidden activation (tanh, relu or swish)", choices=ACTIVATIONS)
    action_noise_correlation: float = with_help(
        0.0,
        "b in [0, 1) of the rollout actions' AR(1) noise eps_t = b eps_{t-1} + sqrt(1 - b^2) z_t (stationary "
        "N(0, 1), lag-k correlation b^k; exp(-1/tau) for a correlation time of tau steps); 0: white, SAC's",
    )
    n_step: int = with_help(
        1, "rewards summed in the critics' target before the bootstrap (stopping at episode ends); 1: SAC's"
    )
    network: str | None = network_field()

    def check(self) -> None:
        if self.buffer_size < self.batch_size:
            raise ValueError(
                f"SACConfig.buffer_size={self.buffer_size}: expected at least one update's environment steps, "
                f"num_envs * num_steps = {self.num_envs} * {self.num_steps} = {self.batch_size}"
            )
        if not 0 <= self.action_noise_correlation < 1:
            raise ValueError(
                f"SACConfig.action_noise_correlation={self.action_noise_correlation!r}: expected in [0, 1) "
                "(0: white noise; exp(-1/tau) for a correlation time of tau steps)"
            )
        if self.n_step * self.num_envs > self.buffer_size:
            raise ValueError(
                f"SACConfig.n_step={self.n_step}: expected n_step * num_envs <= buffer_size = {self.buffer_size} "
                "(an n-step window of one environment spans n_step * num_envs buffer rows)"
            )
        if self.num_updates * self.gradient_steps > MAX_OPTIMIZER_STEPS:
            raise ValueError(
                f"SACConfig.total_timesteps={self.total_timesteps:,}: {self.num_updates:,} updates x "
                f"{self.gradient_steps} gradient steps is more than the {MAX_OPTIMIZER_STEPS:,} an int32 step "
                f"counter holds; expected total_timesteps <= "
                f"{MAX_OPTIMIZER_STEPS // self.gradient_steps * self.batch_size:,}"
            )

    @property
    def batch_size(self) -> int:
        """Environment steps per update per seed (the protocol's unit; not the sampled minibatch,
        which is ``sample_size``)."""
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        """Rounded up, so the last checkpoint target (= total_timesteps) is always reached."""
        return -(-self.total_timesteps // self.batch_size)

    @property
    def warmup_updates(self) -> int:
        """Updates of uniform random actions and no gradient step: those that start before
        ``learning_starts`` environment steps were taken."""
        return -(-self.learning_starts // self.batch_size)

    def budget_dependence(self) -> None:
        """None: nothing of SAC's depends on the budget (no learning-rate decay; the warm-up is
        ``learning_starts`` steps, not a share of the budget), so a run can be extended."""
        return None


SACHyperparams = SACConfig.Hyperparams
"""The traced ``SACConfig`` fields as float32 arrays (scalars, or [seeds] in a sweep). Their order
is the leaf order of every checkpoint: do not reorder the traced fields."""
HYPERPARAMETERS = SACConfig.hyperparameter_names()
"""The names of the ``SACHyperparams`` fields, in their (checkpoint leaf) order."""
