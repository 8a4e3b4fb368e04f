"""``python -m xpubench.cli``: the command line, as ``xpubench`` (what a fleet's machines run: cli/fleet.py)."""

import sys

from xpubench.cli import main

sys.exit(main())
