"""``python -m enerf``: the ``enerf`` command."""

import sys

from .cli import main

sys.exit(main())
