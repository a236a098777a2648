"""Shared pytest settings: deterministic, small thread count for the 2-core CI machine."""

import torch

torch.set_num_threads(min(2, torch.get_num_threads()))
