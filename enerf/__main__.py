"""``python -m enerf``: the ``enerf`` command (also what ``torchrun -m enerf`` runs on every rank)."""
from .cli import main
raise SystemExit(main())
