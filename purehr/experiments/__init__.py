"""Experiments built on the protocol: hyperparameter sweeps and their ranking. (The project's
own studies, the ablations and the reward-form comparison among them, are in studies/.)"""
