"""PPO (Schulman et al., 2017), one concept a module: the algorithm read top to bottom
(``algorithm.make_ppo``: rollout, GAE, epochs of minibatches), its ``config`` (hyperparameters
with help), its ``loss``, what it asks of a feed-forward or recurrent network (``policy_core``,
``recurrent``), acting outside jit (``acting``) and the names of its metrics (``metrics``).

The pieces other algorithms reuse (GAE, shuffling, distributions, networks, the scan over
updates) live in ``purehr.engine``; the protocol reaches PPO only through
``purehr.algorithms.registry``."""

from purehr.algorithms.base import lazy_exports

_EXPORTS = {
    "PPOConfig": "purehr.algorithms.ppo.config",
    "PPOHyperparams": "purehr.algorithms.ppo.config",
    "make_ppo": "purehr.algorithms.ppo.algorithm",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["PPOConfig", "PPOHyperparams", "make_ppo"]
