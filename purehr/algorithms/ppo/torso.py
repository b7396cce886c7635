"""The parts of PPO's network (``purehr.engine.networks.ActorCritic``, or ``RecurrentActorCritic``
with a memory) for a config: the shipped ones of ``PPOConfig.policy`` ("mlp": an actor and a
critic MLP, each ending in its own output layer; "gru": the same after a ``GRUTorso``), or a
user's module (``PPOConfig.network``; ``purehr.engine.user_network``): a torso copied for the
actor and the critic, with PPO's dense heads over it; a whole network (PPO adds only the log
std); or a recurrent torso shared by PPO's heads. Every one is then built and driven the same
way (``make_policy_core``); a user's is checked against the spaces (shapes only) before
anything compiles.

Shapes: E = ``num_envs``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from purehr.engine.networks import MLP, POLICY_GAIN, VALUE_GAIN, GRUTorso
from purehr.engine.user_network import StructuredInput, build_network, check_fits, is_recurrent, is_whole
from purehr.envs.spaces import flat_dim


def network_parts(config, observation_space, action_space, outputs: int) -> dict:
    """The network's parts (``torso``, ``actor``, ``critic``, ``heads``, ``whole``) for a
    policy of ``outputs`` outputs; a ``torso`` makes it recurrent."""
    if config.network is None:
        parts = dict(
            actor=MLP(config.actor_hidden, config.activation, outputs, POLICY_GAIN),
            critic=MLP(config.critic_hidden, config.activation, 1, VALUE_GAIN),
        )
        if config.policy == "gru":
            parts["torso"] = GRUTorso(config.recurrent_width, config.activation, config.recurrent_skip)
        return parts
    torso = build_network(config.network, observation_space, action_space)
    if is_recurrent(torso):
        if config.num_envs % config.num_minibatches:
            raise ValueError(
                f"PPOConfig.minibatch_size={config.minibatch_size} with the recurrent network {config.network!r}: "
                f"a minibatch is whole sequences, so the {config.num_minibatches} minibatches must divide "
                f"num_envs={config.num_envs}"
            )
        return dict(torso=StructuredInput(torso, observation_space), actor=None, critic=None, heads=True)
    if is_whole(torso):
        return dict(actor=StructuredInput(torso, observation_space), critic=None, whole=True)
    actor, critic = (StructuredInput(torso.clone(), observation_space) for _ in range(2))
    return dict(actor=actor, critic=critic, heads=True)


def check_user_network(config, core, observation_space, action_space, outputs: int) -> None:
    """Refuses a user's network whose outputs do not fit (``check_fits``), naming the shapes."""
    size = flat_dim(observation_space)
    if getattr(core.network, "torso", None) is not None:
        expected = "a recurrent torso (carry, observation [N, ...]) -> (carry, features [N, F])"

        def check(params):
            rows = jnp.zeros((config.num_envs, size), jnp.float32)
            outputs_of = jax.eval_shape(core.step, params, core.initial_carry(), rows, rows)
            if outputs_of.actor_output.shape != (config.num_envs, outputs):
                raise ValueError(
                    f"policy outputs {outputs_of.actor_output.shape}; expected ({config.num_envs}, {outputs})"
                )
    else:
        if core.network.whole:
            expected = f"a whole network observation [N, ...] -> (policy outputs [N, {outputs}], value [N])"
        else:
            expected = "a torso observation [N, ...] -> features [N, F]"

        def check(params):
            batch = jnp.zeros((3, size), jnp.float32)
            actor_output, _, value = jax.eval_shape(core.network.apply, params, batch)
            if actor_output.shape != (3, outputs) or value.shape != (3,):
                raise ValueError(
                    f"for 3 observations it gave policy outputs {actor_output.shape} and values {value.shape}; "
                    f"expected ({3}, {outputs}) and (3,)"
                )

    init = lambda: core.init_params(jax.random.PRNGKey(0), size)  # noqa: E731
    check_fits(config.network, init, observation_space, action_space, expected, check)
