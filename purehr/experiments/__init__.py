"""Experiments built on the protocol: hyperparameter sweeps and their ranking, ablations, the
reward-form comparison."""
