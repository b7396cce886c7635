"""PQN (Gallici et al., 2024, "Simplifying Deep Temporal Difference Learning"), one concept a
module: the algorithm read top to bottom (``algorithm.make_pqn``: an epsilon-greedy rollout of
vectorised environments, Q(lambda) returns, epochs of minibatches; no replay buffer, no target
network), its ``config``, the LayerNorm Q network with one head per action branch
(``network``), the returns (``returns``), the loss (``loss``) and its metric names
(``metrics``). The protocol reaches it only through ``purehr.algorithms.registry``."""

import importlib

_EXPORTS = {
    "PQNConfig": "purehr.algorithms.pqn.config",
    "PQNHyperparams": "purehr.algorithms.pqn.config",
    "make_pqn": "purehr.algorithms.pqn.algorithm",
}


def __getattr__(name: str):
    """The public names load on first use (PEP 562), so importing the package (the registry
    reads its ``metrics`` for the CSV columns) does not import JAX."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PQNConfig", "PQNHyperparams", "make_pqn"]
