"""``python -m purehr COMMAND ...``: the console command ``purehr`` (purehr.cli.main)."""

import sys

from purehr.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
