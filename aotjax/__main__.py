"""`python -m aotjax <command>` (see `aotjax.cli`)."""
import sys

from aotjax.cli import main

if __name__ == "__main__":
    sys.exit(main())
