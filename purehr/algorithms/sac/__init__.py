"""SAC (Haarnoja et al., 2018, with the learned temperature of the second paper), one concept a
module: the algorithm read top to bottom (``algorithm.make_sac``: environment steps, insert,
gradient steps), its ``config`` (hyperparameters with help), the replay ``buffer`` held in the
state, the ``networks`` (tanh-Gaussian actor, twin critics), the ``loss``es and the names of its
``metrics``. Continuous (Box) actions only. The protocol reaches SAC only through
``purehr.algorithms.registry``."""
