"""How good is good: optimal-control references for the swing and HRV tasks (results/limits/README.md).

- ``swing_shooting``: the fastest rotation found by shooting through the differentiable plant,
  verified by replay in ``SwingEnv`` (an upper bound on the minimum time from each start);
- ``swing_bound``: a lower bound on that minimum time from the energy the rider must add and
  the most power the servo-limited body can put in;
- ``hrv_search``: the per-dimension lower bound on HRV steps and the exact fewest steps by a
  search over the shared style / content choices, replayed in ``HRWritingEnv``.

The study (``study``: PPO's checkpoints against the references), its record (``record``) and
figures (``figures``) sit beside them; ``studies/scripts/limits.py`` is the command line.
"""
