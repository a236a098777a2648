"""``python -m enerf.cli``: the ``enerf`` command."""

import sys

from . import main

sys.exit(main())
