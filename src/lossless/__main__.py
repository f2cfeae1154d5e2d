"""``python -m lossless``: the command line."""

import sys

from lossless.cli import main

if __name__ == "__main__":
    sys.exit(main())
