"""A device's local step as an FL client runs it: the slower of the GPU running the step's kernels and the CPU
issuing its ops, and how much the steps of one kind's devices differ.

Every estimator predicts a step's GPU time: the kernels' time, as a CUDA graph replays them. An FL client runs its
steps eagerly, one after another, each ending in `loss.item()`: for every op, Python, the dispatcher and autograd do
their bookkeeping and launch its kernel from the CPU, and the GPU runs each kernel once it is launched. A small step
(a ResNet-18 on 32 px images) is paced by the CPU: on the H200 it issues its 211 ops in 8.1 ms, while their kernels
take 1.5 ms and the final `loss.item()` waits 0.05 ms for the last of them. So a client's step is

    wall_ms = max(gpu_ms, launch_ms),    launch_ms = kernels x LAUNCH_US / 1000

with `kernels` the step's ops as the engine counts them on the meta device (engine/counting.py, stored with each
prediction as details["kernels"]) and LAUNCH_US the H200 host's CPU time to issue one of them. LAUNCH_US was chosen,
and the form checked, on measured eager steps of twenty small FL workloads by benchmarks/fl/wall_clock.py: within
15 % on 16 of the 20, 7 of the 10 it was not chosen on (a mean error of 12 % on those 10). The max leaves out what
queues when the two are close: the GPU work of the backward's first layers, issued last, which the CPU cannot hide
(2.9 ms on a 25 ms step whose kernels take 14 ms; benchmarks/fl/README.md). The clients' CPUs are taken to issue as
fast as that host's, and differ among themselves by COMPUTE_SIGMA below. A prediction without a count (made before
the engine stored one) keeps its GPU time alone.

Devices of one kind differ: each client's step is its kind's times exp(sigma Z). COMPUTE_SIGMA per device kind:

- consumer and edge, 0.6: the lognormal spread of device speed FedScale ships for its simulated clients
  (fedscale 1.0, fedscale/cloud/internal/client_metadata.py, `get_completion_time_lognormal`, tail_skew=0.6, after
  the PAPAYA and GFL papers). A user's machine launches from its own CPU and shares it with whatever else runs.
- datacenter, 0: the servers of a silo are taken to be alike.
"""

from __future__ import annotations

from understudy.links import DeviceKind

# The CPU time to issue one op of an eager training step (its dispatch, autograd's bookkeeping, its kernel launch),
# chosen by benchmarks/fl/wall_clock.py on every other workload of the H200's measured small FL steps
# (benchmarks/fl/README.md).
LAUNCH_US = 48.6
COMPUTE_SIGMA: dict[DeviceKind, float] = {"consumer": 0.6, "edge": 0.6, "datacenter": 0.0}


def launch_ms(kernels: int | None) -> float:
    """The CPU's time to issue a step's ops, in ms (0 where the count is not known)."""
    return (kernels or 0) * LAUNCH_US / 1000.0


def wall_ms(gpu_ms: float, launch: float) -> float:
    """The wall-clock step: the GPU's time or the CPU's issuing, whichever is slower (ms)."""
    return max(gpu_ms, launch)
