"""A matrix row's run in a child process (tests/test_protocol_matrix.py SIGKILLs it):
``python tests/matrix_child.py ALGORITHM RUN_DIR [--log BACKEND ...]``. It trains exactly what
the test's in-process reference trains, through ``train_all_seeds``, with no command-line flags
of any algorithm."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from algorithm_matrix import MATRIX, SEEDS  # noqa: E402


def main(argv: list[str]) -> None:
    from purehr.run.protocol import train_all_seeds

    name, run_dir, *rest = argv
    log = rest[1:] if rest[:1] == ["--log"] else None
    train_all_seeds(Path(run_dir), seeds=SEEDS, progress=False, log=log, **MATRIX[name].run_arguments())


if __name__ == "__main__":
    main(sys.argv[1:])
