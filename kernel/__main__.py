"""``python -m kernel`` runs the ``hermes-kernel`` command line."""

import sys

from .cli import main

sys.exit(main())
