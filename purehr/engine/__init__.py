"""The parts every algorithm is built from, none of them an algorithm or the protocol: the scan
over updates and its hooks (``loop``), seeds as PRNG keys (``seeds``), XLA's options for training
programs (``compile_options``), GAE (``gae``), minibatch shuffling (``shuffle``), action
distributions (``distributions``) and networks with observation normalisation (``networks``)."""
