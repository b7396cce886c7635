"""The seed API (``train_hr_ppo``, ``PPOModel``) and the saved-model format."""
