"""Tasks from environment suites, named ``<suite>:<environment>`` (``gymnax:CartPole-v1``,
``brax:inverted_pendulum``, ``xminigrid:MiniGrid-Empty-5x5``). Each suite module has
``PACKAGE`` (its pip extra), ``environment_names()`` and ``suite_task(environment)``; it
imports its package only when asked for a task, so a missing one is named with its pip command."""
