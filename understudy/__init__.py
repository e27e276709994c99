"""Understudy: predict how long a deep-learning workload takes on a GPU you don't have.

The ground floor, which every other package stands on and which imports none of them: the workload spec, the
target catalog, result types, calibration math, populations, cache keys, errors and settings. None of it imports
torch, a database or Redis.
"""

__version__ = "0.1.0"
