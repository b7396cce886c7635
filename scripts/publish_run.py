"""Copy a finished run into a small record for results/ (final checkpoints only).

The command's code is purehr/cli/publish.py; ``purehr publish ...`` is the same command. Every name of that
module is reachable here too (``main``, ``build_parser``, ...), for callers that load this file.
"""

from purehr.cli import publish as _command

globals().update({name: value for name, value in vars(_command).items() if not name.startswith("__")})

if __name__ == "__main__":
    raise SystemExit(_command.main())
