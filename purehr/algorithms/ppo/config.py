"""PPO configuration: static shape choices in a frozen dataclass, tunable numbers as a pytree.

The split follows rejax: everything that changes array shapes or the compiled program
(sizes, network widths) lives in `PPOConfig`, and so does every continuous hyperparameter;
the continuous ones the training state carries as traced values are the fields of
`PPOHyperparams` (`HYPERPARAMETERS` names them), a pytree, so a sweep is a `vmap` over it.
Each `PPOConfig` field's help (the text of its command-line flag) sits beside it.
"""

from __future__ import annotations

from purehr.algorithms.config_types import ConfigFields, annealed_learning_rate, config_class, network_field
from purehr.envs import spaces
from purehr.protocol_settings import with_help

ACTIVATIONS = ("tanh", "relu", "swish")
POLICIES = ("mlp", "gru")
MAX_OPTIMIZER_STEPS = 2**31 - 1
"""Largest count of an int32 counter: the limit on updates x epochs x minibatches per seed."""


@config_class(legacy_protocol=True)
class PPOConfig(ConfigFields):
    total_timesteps: int = with_help(1_000_000, "environment steps of training per seed")
    num_envs: int = with_help(8, "parallel environments per seed")
    num_steps: int = with_help(256, "rollout length per environment and update")
    num_epochs: int = with_help(4, "passes over each batch per update")
    minibatch_size: int = with_help(256, "transitions per gradient step (must divide num_envs * num_steps)")
    learning_rate: float = with_help(3e-4, "Adam step size", traced=True, bounds=">0")
    anneal_lr: bool = with_help(
        True, "decay the learning rate linearly to 0 over the budget (true/false, yes/no, 1/0, on/off)"
    )
    clip_range: float = with_help(0.2, "PPO ratio clipping", traced=True, bounds=">0")
    ent_coef: float = with_help(0.001, "entropy bonus weight", traced=True, bounds=">=0")
    vf_coef: float = with_help(0.5, "value loss weight", traced=True, bounds=">=0")
    gae_lambda: float = with_help(0.95, "GAE lambda", traced=True, bounds="[0,1]")
    gamma: float = with_help(0.995, "discount factor", traced=True, bounds="[0,1]")
    max_grad_norm: float = with_help(
        0.5, "global gradient-norm clip (per element with --elementwise-grad-clip true)", traced=True, bounds=">0"
    )
    elementwise_grad_clip: bool = with_help(
        False, "clip each gradient element to +-max_grad_norm instead of the global norm (true/false)"
    )
    """Clip each gradient element to +-max_grad_norm (``optax.clip``, what rejax does under the
    name max_grad_norm) instead of the gradients' global norm: with one optimiser over actor
    and critic, a global clip lets a large value-loss gradient shrink the actor's step too."""
    actor_hidden: tuple[int, ...] = with_help((64, 64), "policy network layer widths")
    critic_hidden: tuple[int, ...] = with_help((64, 64), "value network layer widths")
    activation: str = with_help("tanh", "hidden activation (tanh, relu or swish)", choices=ACTIVATIONS)
    policy: str = with_help(
        "mlp", "mlp (feed-forward) or gru (a recurrent memory; docs/recurrent.md)", choices=POLICIES
    )
    """``"gru"``: a dense embedding and a GRU of ``recurrent_width`` shared by the actor and critic
    MLPs, the hidden state carried through rollouts and checkpoints (``purehr.algorithms.ppo.recurrent``).
    Minibatches are then whole environments' sequences: ``num_envs`` must be a multiple of the
    number of minibatches."""
    recurrent_width: int = with_help(128, "GRU hidden-state width (with --policy gru)")
    recurrent_skip: bool = with_help(
        False, "with --policy gru: the heads read [GRU state, this step's embedding] (true/false)"
    )
    """The GRU's readout (docs/recurrent.md, "The readout"): false, the heads read the hidden
    state alone (PureJaxRL's ``ppo_rnn.py``); true, they also read this step's embedding, so the
    memory only holds what the present observation does not show."""
    log_std_init: float = with_help(-0.5, "initial log standard deviation of the Gaussian policy (swing)")
    normalize_observations: bool = with_help(
        False, "normalise observations by their running mean and variance (true/false)"
    )
    """Normalise the networks' inputs by the running mean and variance of every observation
    trained on so far (all environments of the batch), updated after each update's epochs and
    kept with the network parameters (``purehr.engine.networks``); rejax's Pendulum setting."""
    reward_scaling: float = with_help(
        1.0,
        "multiply the rewards GAE trains on by this (Brax's reward_scaling); logged returns stay unscaled",
        bounds=">0",
    )
    """Brax's ``reward_scaling``: the rewards are multiplied before GAE (and before
    ``normalize_returns``), so the value targets and advantages are in scaled units; the
    logged rewards and returns stay in the environment's (``purehr.algorithms.ppo.rewards``)."""
    normalize_returns: bool = with_help(
        False, "divide the rewards trained on by the running std of the discounted return (true/false)"
    )
    """SB3's ``VecNormalize`` reward normalisation (PureJaxRL's ``NormalizeVecReward``): rewards
    divided by the running standard deviation of each environment's discounted return, the
    statistics carried in the training state (checkpoints, resume) and updated once per
    rollout (the order: ``purehr.algorithms.ppo.rewards``); for rewards whose scale is unknown
    or far from 1. Logged returns stay in the environment's."""
    network: str | None = network_field()
    # PPOConfig(checkpoint_interval=...) and the three other LEGACY_PROTOCOL_FIELDS still build (their
    # owner is ProtocolSettings): kept in config.legacy_protocol, applied over the task's by a run

    def check(self) -> None:
        if self.batch_size % self.minibatch_size:
            raise ValueError(
                f"PPOConfig.minibatch_size={self.minibatch_size} does not divide the batch "
                f"num_envs * num_steps = {self.num_envs} * {self.num_steps} = {self.batch_size}; "
                f"expected a divisor of {self.batch_size}"
            )
        if self.policy == "gru" and self.num_envs % self.num_minibatches:
            raise ValueError(
                f"PPOConfig.minibatch_size={self.minibatch_size} with policy='gru': a recurrent minibatch is whole "
                f"sequences of num_steps={self.num_steps}, so the {self.num_minibatches} minibatches must divide "
                f"num_envs={self.num_envs}; expected minibatch_size = num_steps x a divisor of num_envs, e.g. "
                f"{self.num_steps * max(1, self.num_envs // 4)}"
            )
        if self.network is not None and self.policy != "mlp":
            raise ValueError(
                f"PPOConfig.policy={self.policy!r} with network={self.network!r}: your network replaces the "
                "shipped ones; expected policy='mlp' (a recurrent network of yours declares initial_carry)"
            )
        self._check_budget()

    def _check_budget(self) -> None:
        """The update and optimiser-step counters are int32 on the device (optax counts its
        steps in int32 without x64), so a budget whose optimiser steps do not fit is refused
        here, before anything is compiled or written. Environment steps are never counted
        on the device: they are ``update * batch_size`` in Python ints on the host."""
        steps_per_update = self.num_epochs * self.num_minibatches
        if steps_per_update > MAX_OPTIMIZER_STEPS:  # no total_timesteps fits: the batch is the problem
            most_envs = MAX_OPTIMIZER_STEPS * self.minibatch_size // (self.num_epochs * self.num_steps)
            raise ValueError(
                f"PPOConfig.num_envs={self.num_envs:,}: one update is {self.num_epochs} epochs x "
                f"{self.num_minibatches:,} minibatches = {steps_per_update:,} optimiser steps, more than the "
                f"{MAX_OPTIMIZER_STEPS:,} an int32 step counter holds; expected num_envs <= {most_envs:,} with "
                f"num_steps={self.num_steps}, minibatch_size={self.minibatch_size} and num_epochs={self.num_epochs} "
                "(or a larger minibatch_size)"
            )
        if self.num_updates * steps_per_update > MAX_OPTIMIZER_STEPS:
            most = MAX_OPTIMIZER_STEPS // steps_per_update * self.batch_size
            raise ValueError(
                f"PPOConfig.total_timesteps={self.total_timesteps:,}: {self.num_updates:,} updates x "
                f"{self.num_epochs} epochs x {self.num_minibatches} minibatches = "
                f"{self.num_updates * steps_per_update:,} optimiser steps, more than the "
                f"{MAX_OPTIMIZER_STEPS:,} an int32 step counter holds; expected total_timesteps <= "
                f"{most:,} with this batch ({self.batch_size} steps per update)"
            )

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_minibatches(self) -> int:
        return self.batch_size // self.minibatch_size

    @property
    def num_updates(self) -> int:
        """Rounded up, so the last checkpoint target (= total_timesteps) is always reached."""
        return -(-self.total_timesteps // self.batch_size)  # exact for any int

    def budget_dependence(self) -> str | None:
        """Why a longer run's first updates would differ from this run's (its annealed learning
        rate), or None: a resume that extends the budget is refused with it."""
        return annealed_learning_rate(self.anneal_lr)


PPOHyperparams = PPOConfig.Hyperparams
"""The traced ``PPOConfig`` fields (what a sweep vmaps, PBT explores) as float32 arrays: scalars,
or with a leading seed axis in a sweep. Their order is the leaf order of every checkpoint:
reordering the traced fields would make the checkpoints on disk unreadable."""
HYPERPARAMETERS = PPOConfig.hyperparameter_names()
"""The names of the ``PPOHyperparams`` fields, in their (checkpoint leaf) order."""


DISCRETE_DEFAULTS = PPOConfig(
    total_timesteps=500_000,
    num_envs=4,
    num_steps=128,
    minibatch_size=128,
    learning_rate=2.5e-4,
    anneal_lr=True,
    gamma=0.99,
    gae_lambda=0.95,
    ent_coef=0.01,
    activation="tanh",
)
"""PureJaxRL's ``ppo.py`` settings (CartPole-v1: 4 envs x 128 steps, 4 minibatches, 4 epochs,
lr 2.5e-4 annealed, entropy 0.01, 64x64 tanh): the default of a discrete-action environment."""
CONTINUOUS_DEFAULTS = PPOConfig(
    total_timesteps=1_000_000,
    num_envs=64,
    num_steps=32,
    minibatch_size=512,
    learning_rate=3e-4,
    anneal_lr=False,
    gamma=0.99,
    gae_lambda=0.95,
    ent_coef=0.0,
    actor_hidden=(256, 256),
    critic_hidden=(256, 256),
    activation="tanh",
    log_std_init=0.0,
    normalize_observations=True,
)
"""PureJaxRL's ``ppo_continuous_action.py`` settings (lr 3e-4, 4 epochs, entropy 0, 256x256
tanh, normalized observations) at a batch a 2-core CPU turns over (64 envs x 32 steps, 4
minibatches): the default of a continuous-action environment."""


def defaults_for(action_space) -> PPOConfig:
    """PPO's defaults for a task without tuned ones (the registry's ``defaults`` of ``ppo``): by
    its action space, continuous or not."""
    return CONTINUOUS_DEFAULTS if isinstance(action_space, spaces.Box) else DISCRETE_DEFAULTS
