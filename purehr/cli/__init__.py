"""The command line shared by every script: argument types and the help formatter
(``arguments``) and the flags generated from ``PPOConfig`` (``ppo_flags``). Library code does not
import it; scripts do."""
