"""PPO (Schulman et al., 2017), one concept a module: the algorithm read top to bottom
(``algorithm.make_ppo``: rollout, GAE, epochs of minibatches), its ``config`` (hyperparameters
with help), its ``loss``, what it asks of a feed-forward or recurrent network (``policy_core``,
``recurrent``), acting outside jit (``acting``) and the names of its metrics (``metrics``).

The pieces other algorithms reuse (GAE, shuffling, distributions, networks, the scan over
updates) live in ``purehr.engine``; the protocol reaches PPO only through
``purehr.algorithms.registry``."""

import importlib

_EXPORTS = {
    "PPOConfig": "purehr.algorithms.ppo.config",
    "PPOHyperparams": "purehr.algorithms.ppo.config",
    "make_ppo": "purehr.algorithms.ppo.algorithm",
}


def __getattr__(name: str):
    """The public names load on first use (PEP 562), so importing the package (the registry
    reads its ``metrics`` for the CSV columns) does not import JAX."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PPOConfig", "PPOHyperparams", "make_ppo"]
