"""PPO, one concept a module: the algorithm (``algorithm.make_ppo``: rollout, GAE, epochs of
minibatches), the driver that trains every seed in one jitted call (``trainer.make_train``), the
scan over updates and its hooks (``loop``), and the pieces: ``config``, ``networks``,
``distributions``, ``loss``, ``gae``, ``shuffle``, ``metrics``."""
