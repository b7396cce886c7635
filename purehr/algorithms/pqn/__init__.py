"""PQN (Gallici et al., 2024, "Simplifying Deep Temporal Difference Learning"), one concept a
module: the algorithm read top to bottom (``algorithm.make_pqn``: an epsilon-greedy rollout of
vectorised environments, Q(lambda) returns, epochs of minibatches; no replay buffer, no target
network), its ``config``, the LayerNorm Q network with one head per action branch
(``network``), the returns (``returns``), the loss (``loss``) and its metric names
(``metrics``). The protocol reaches it only through ``purehr.algorithms.registry``."""
