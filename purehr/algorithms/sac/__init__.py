"""SAC (Haarnoja et al., 2018, with the learned temperature of the second paper), one concept a
module: the algorithm read top to bottom (``algorithm.make_sac``: environment steps, insert,
gradient steps), its ``config`` (hyperparameters with help), the replay ``buffer`` held in the
state, the ``networks`` (tanh-Gaussian actor, twin critics as one ensemble), the ``loss``es,
the names of its ``metrics``, an update's random numbers from one hash call (``draws``), the
cond that skips the warm-up updates' gradient steps under the seed vmap (``batch_cond``), and
two options off by default: temporally correlated exploration noise (``exploration``) and
n-step soft targets (``n_step``).
Continuous (Box) actions only. The protocol reaches SAC only through
``purehr.algorithms.registry``."""

from purehr.algorithms.base import lazy_exports

_EXPORTS = {
    "SACConfig": "purehr.algorithms.sac.config",
    "SACHyperparams": "purehr.algorithms.sac.config",
    "make_sac": "purehr.algorithms.sac.algorithm",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["SACConfig", "SACHyperparams", "make_sac"]
