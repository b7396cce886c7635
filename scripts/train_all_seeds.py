"""Train every task for every seed in one compiled call, then evaluate and render.

The command's code is purehr/cli/train.py; ``purehr train ...`` is the same command. Every name of that
module is reachable here too (``main``, ``build_parser``, ...), for callers that load this file.
"""

from purehr.cli import train as _command

globals().update({name: value for name, value in vars(_command).items() if not name.startswith("__")})

if __name__ == "__main__":
    raise SystemExit(_command.main())
