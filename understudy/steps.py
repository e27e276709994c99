"""A device's local step as an FL client runs it: the predicted GPU time plus what the CPU spends launching the
step's kernels, and how much the steps of one kind's devices differ.

Every estimator predicts a step's GPU time: the kernels' time, as a CUDA graph replays them. An FL client runs its
steps eagerly, one after another, each ending in `loss.item()`: Python, the dispatcher and autograd launch every
kernel from the CPU, and a small step (a ResNet-18 on 32 px images) waits on that far longer than on its kernels
(6.8 ms a step against 1.5 ms of kernels on the H200). So a client's step is

    wall_ms = gpu_ms + kernels x LAUNCH_US / 1000

with `kernels` the step's kernel launches as the engine counts them on the meta device (engine/counting.py, stored
with each prediction as details["kernels"]). LAUNCH_US is the H200 host's CPU cost per launch, chosen and checked on
measured eager steps of small FL workloads by benchmarks/fl/wall_clock.py: within 15 % on 8 of 14 workloads (5 of
the 7 it was not chosen on), a mean error of 18 % on those 7, where three runs of the same measurement differ by up
to 40 % (benchmarks/fl/README.md). The clients' CPUs are taken to launch as fast as that host's, and differ among
themselves by COMPUTE_SIGMA below. A prediction without a count (made before the engine stored one) keeps its GPU
time alone.

Devices of one kind differ: each client's step is its kind's times exp(sigma Z). COMPUTE_SIGMA per device kind:

- consumer and edge, 0.6: the lognormal spread of device speed FedScale ships for its simulated clients
  (fedscale 1.0, fedscale/cloud/internal/client_metadata.py, `get_completion_time_lognormal`, tail_skew=0.6, after
  the PAPAYA and GFL papers). A user's machine launches from its own CPU and shares it with whatever else runs.
- datacenter, 0: the servers of a silo are taken to be alike.
"""

from __future__ import annotations

from understudy.links import DeviceKind

# The CPU cost of one kernel launch of an eager training step, chosen by benchmarks/fl/wall_clock.py on every other
# workload of the H200's measured small FL steps (benchmarks/fl/README.md).
LAUNCH_US = 37.1
COMPUTE_SIGMA: dict[DeviceKind, float] = {"consumer": 0.6, "edge": 0.6, "datacenter": 0.0}


def launch_ms(kernels: int | None) -> float:
    """What launching a step's kernels costs the CPU, in ms (0 where the count is not known)."""
    return (kernels or 0) * LAUNCH_US / 1000.0
