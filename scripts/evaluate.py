"""Held-out evaluation of a baseline policy, printed as a table or one JSON object.

The command's code is purehr/cli/evaluate.py; ``purehr evaluate ...`` is the same command. Every name of that
module is reachable here too (``main``, ``build_parser``, ...), for callers that load this file.
"""

from purehr.cli import evaluate as _command

globals().update({name: value for name, value in vars(_command).items() if not name.startswith("__")})

if __name__ == "__main__":
    raise SystemExit(_command.main())
