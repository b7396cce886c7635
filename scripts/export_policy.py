"""Export a trained policy: ONNX and a jax.export program, contract.json and a model card.

The command's code is purehr/cli/export.py; ``purehr export ...`` is the same command. Every name of that
module is reachable here too (``main``, ``build_parser``, ...), for callers that load this file.
"""

from purehr.cli import export as _command

globals().update({name: value for name, value in vars(_command).items() if not name.startswith("__")})

if __name__ == "__main__":
    raise SystemExit(_command.main())
