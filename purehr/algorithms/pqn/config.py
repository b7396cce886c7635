"""PQN configuration: sizes and every setting in a frozen dataclass (help beside each field),
the continuous ones the training state carries as a pytree (``PQNHyperparams``), as PPOConfig.

The defaults are purejaxql's published CartPole settings (Gallici et al., 2024): 32
environments x 64 steps, 4 epochs of 16 minibatches, RAdam at 1e-4 decayed linearly, gradient
norm 10, gamma 0.99, lambda 0.95, epsilon 1 -> 0.2 over the first 20% of updates, rewards x 0.1,
two LayerNorm layers of 256. A task sets its own (``purehr.tasks``).
"""

from __future__ import annotations

from purehr.algorithms.config_types import ConfigFields, annealed_learning_rate, config_class, network_field
from purehr.protocol_settings import with_help

ACTIVATIONS = ("relu", "tanh", "swish")
MAX_UPDATES = 2**31 - 1
"""The update counter is int32 on the device."""


@config_class
class PQNConfig(ConfigFields):
    total_timesteps: int = with_help(500_000, "environment steps of training per seed")
    num_envs: int = with_help(32, "parallel environments per seed")
    num_steps: int = with_help(64, "rollout length per environment and update")
    num_epochs: int = with_help(4, "passes over each batch per update")
    minibatch_size: int = with_help(128, "transitions per gradient step (must divide num_envs * num_steps)")
    learning_rate: float = with_help(1e-4, "RAdam step size", traced=True, bounds=">0")
    anneal_lr: bool = with_help(True, "decay the learning rate linearly to 0 over the budget (true/false)")
    gamma: float = with_help(0.99, "discount factor", traced=True, bounds="[0,1]")
    q_lambda: float = with_help(
        0.95, "lambda of the Q(lambda) returns (0: one-step Q-learning targets)", traced=True, bounds="[0,1]"
    )
    epsilon_start: float = with_help(1.0, "exploration epsilon at the first update", traced=True, bounds="[0,1]")
    epsilon_finish: float = with_help(0.2, "exploration epsilon once the decay is over", traced=True, bounds="[0,1]")
    epsilon_decay_fraction: float = with_help(
        0.2, "share of the updates over which epsilon decays linearly", traced=True, bounds="(0,1]"
    )
    max_grad_norm: float = with_help(10.0, "global gradient-norm clip", traced=True, bounds=">0")
    reward_scaling: float = with_help(
        0.1,
        "multiply the rewards the returns are built from by this; logged returns stay unscaled",
        traced=True,
        bounds=">0",
    )
    hidden: tuple[int, ...] = with_help((256, 256), "Q network layer widths")
    activation: str = with_help("relu", "hidden activation (relu, tanh or swish)", choices=ACTIVATIONS)
    layer_norm: bool = with_help(True, "LayerNorm before each hidden activation (PQN's stabiliser; true/false)")
    """Gallici et al.'s point: with LayerNorm, TD learning without a target network is stable;
    false only to ablate it."""
    normalize_observations: bool = with_help(
        False, "normalise observations by their running mean and variance (true/false)"
    )
    eval_epsilon: float = with_help(
        0.01, "epsilon of the stochastic evaluation policy (deterministic=False)", bounds="[0,1]"
    )
    conv_channels: tuple[int, ...] = with_help(
        (),
        "channels of 3 x 3 convolutions over an image observation before the hidden layers (none: an MLP)",
        bounds="may be empty",
    )
    """A convolutional torso (``purehr.algorithms.pqn.network.QNetwork``): each entry one 3 x 3
    convolution (stride 1, no padding), then LayerNorm (with ``layer_norm``) and the activation,
    over the observation in its own [height, width, channels] shape; flattened into the hidden
    layers. purejaxql's MinAtar network is ``(16,)`` with ``hidden=(128,)``."""
    input_scale: float = with_help(
        1.0, "multiply the observations by this before the network (purejaxql's MinAtar: 1/255)", bounds=">0"
    )
    network: str | None = network_field()

    def check(self) -> None:
        if self.batch_size % self.minibatch_size:
            raise ValueError(
                f"PQNConfig.minibatch_size={self.minibatch_size} does not divide the batch "
                f"num_envs * num_steps = {self.num_envs} * {self.num_steps} = {self.batch_size}; "
                f"expected a divisor of {self.batch_size}"
            )
        if self.num_updates > MAX_UPDATES:
            raise ValueError(
                f"PQNConfig.total_timesteps={self.total_timesteps:,}: {self.num_updates:,} updates, more than the "
                f"{MAX_UPDATES:,} an int32 counter holds; expected at most {MAX_UPDATES * self.batch_size:,}"
            )

    @property
    def batch_size(self) -> int:
        """Environment steps per update (per seed): the protocol counts steps by it."""
        return self.num_envs * self.num_steps

    @property
    def num_minibatches(self) -> int:
        return self.batch_size // self.minibatch_size

    @property
    def num_updates(self) -> int:
        """Rounded up, so the last checkpoint target (= total_timesteps) is always reached."""
        return -(-self.total_timesteps // self.batch_size)

    def budget_dependence(self) -> str | None:
        """Why a longer run's first updates would differ from this run's, or None: a resume that
        extends the budget is refused with it. Both PQN's schedules span the budget: the annealed
        learning rate, and epsilon's decay over ``epsilon_decay_fraction`` of the updates (a
        constant epsilon has none)."""
        annealed = annealed_learning_rate(self.anneal_lr)
        if annealed or self.epsilon_start == self.epsilon_finish:
            return annealed
        return (
            f"its exploration epsilon decays from {self.epsilon_start:g} to {self.epsilon_finish:g} over the first "
            f"epsilon_decay_fraction={self.epsilon_decay_fraction:g} of the budget's updates (a constant epsilon, "
            "--epsilon-finish equal to --epsilon-start, has no such schedule)"
        )


PQNHyperparams = PQNConfig.Hyperparams
"""The traced ``PQNConfig`` fields as float32 arrays (what a sweep vmaps and PBT explores): scalars,
or with a leading seed axis in a sweep. Their order is the leaf order of every checkpoint."""
HYPERPARAMETERS = PQNConfig.hyperparameter_names()
"""The names of the ``PQNHyperparams`` fields, in their (checkpoint leaf) order."""
