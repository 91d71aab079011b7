"""``python -m epochal.cli``: the ``epochal`` command line."""

import sys

from epochal.cli import main

sys.exit(main())
