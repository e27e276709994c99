"""Understudy: predict how long a deep-learning workload takes on a GPU you don't have.

This package holds the domain shared by the HTTP side (`app`) and the GPU side (`worker`): the workload spec, the
target catalog, result types, settings and the store. None of it imports torch.
"""

__version__ = "0.1.0"
