"""Hyperparameter sweep: the grid x seeds trained in one compiled call per network shape.

The command's code is purehr/cli/sweep.py; ``purehr sweep ...`` is the same command. Every name of that
module is reachable here too (``main``, ``build_parser``, ...), for callers that load this file.
"""

from purehr.cli import sweep as _command

globals().update({name: value for name, value in vars(_command).items() if not name.startswith("__")})

if __name__ == "__main__":
    raise SystemExit(_command.main())
