"""PQN (Gallici et al., 2024, "Simplifying Deep Temporal Difference Learning"), one concept a
module: the algorithm read top to bottom (``algorithm.make_pqn``: an epsilon-greedy rollout of
vectorised environments, Q(lambda) returns, epochs of minibatches; no replay buffer, no target
network), its ``config``, the LayerNorm Q network with one head per action branch
(``network``), the returns (``returns``), the loss (``loss``) and its metric names
(``metrics``). The protocol reaches it only through ``purehr.algorithms.registry``."""

from purehr.algorithms.base import lazy_exports

_EXPORTS = {
    "PQNConfig": "purehr.algorithms.pqn.config",
    "PQNHyperparams": "purehr.algorithms.pqn.config",
    "make_pqn": "purehr.algorithms.pqn.algorithm",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["PQNConfig", "PQNHyperparams", "make_pqn"]
