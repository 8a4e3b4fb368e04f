"""``python -m xpubench.devices``: print the environment as JSON (same as ``-m xpubench.devices.detect``)."""

import sys

from xpubench.devices.detect import main

sys.exit(main())
