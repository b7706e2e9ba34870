# PYTHON_ARGCOMPLETE_OK  (argcomplete's marker: `python -m kernel` answers shell completion)
"""``python -m kernel`` runs the ``hermes-kernel`` command line."""

import sys

from .cli import main

sys.exit(main())
