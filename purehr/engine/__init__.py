"""The parts every algorithm is built from, none of them an algorithm or the protocol: the scan
over updates and its hooks (``loop``), seeds as PRNG keys (``seeds``), XLA's options for training
programs (``compile_options``), GAE (``gae``), minibatch shuffling (``shuffle``), action
distributions (``distributions``), networks with observation normalisation (``networks``), the
truncation bootstrap on the truncated rows (``bootstrap``), the environment parameters an update
trains on (``env_params``), acting outside jit (``acting``), and flax's Dense and Conv layers with
backward passes that are fast on a CPU (``dense``, ``conv``)."""
