"""Device populations: one workload's latency over a weighted fleet of GPUs, as an FL orchestrator needs it.

A population is a list of devices (targets), each with a weight (a share) or a count (how many such devices there
are); counts are weights too. Everything here is arithmetic over (latency, weight) pairs: no torch, no database, no
HTTP. The service (app/api/routes/populations.py), the client and the CLI all summarise with `summarize`.

Definitions, so that every number can be checked by hand:

- F(l) is the share of the weight whose latency is at most l (the weighted CDF over the devices that ran).
- The q-quantile (p50 is q = 0.5) is the smallest latency l with F(l) >= q: always one of the devices' latencies.
- The expected round time with K clients is the expected maximum of K latencies drawn independently from the
  weighted distribution (clients sampled at random, with replacement). With the distinct latencies l_1 < ... < l_n,
  P(max <= l_i) = F(l_i)^K, so  E[max] = sum_i l_i * (F(l_i)^K - F(l_{i-1})^K),  F(l_0) = 0.
- The chance that a round of K clients meets a deadline d is F(d)^K.

Devices that cannot run the workload (it does not fit in their memory, or the prediction failed) are not part of the
distribution: an orchestrator cannot pick them. They are reported apart, with their share of the population.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

DEFAULT_PERCENTILES = (0.5, 0.9, 0.99)
# F(l) >= q is tested with this slack, so that a quantile that lands exactly on a step (q = 0.25 with weights 1:3)
# is not pushed to the next latency by rounding in the cumulative sum.
_EPS = 1e-12


class PopulationError(ValueError):
    """A population that cannot be summarised (no devices, a weight that is not positive...)."""


@dataclass(frozen=True)
class DeviceLatency:
    """One kind of device in a population: its latency for the workload and its weight (a share or a count)."""

    target_id: str
    latency_ms: float
    weight: float
    target_name: str | None = None


def _checked(devices: Iterable[DeviceLatency]) -> list[DeviceLatency]:
    items = list(devices)
    if not items:
        raise PopulationError("the population has no device that can run the workload")
    for device in items:
        if not (math.isfinite(device.weight) and device.weight > 0):
            raise PopulationError(f"device {device.target_id!r}: the weight must be a positive number")
        if not (math.isfinite(device.latency_ms) and device.latency_ms >= 0):
            raise PopulationError(f"device {device.target_id!r}: the latency must be a finite number >= 0")
    return items


def distribution(devices: Iterable[DeviceLatency]) -> list[tuple[float, float]]:
    """The distinct latencies in ascending order, each with F(l): the share of the weight at or below it."""
    items = _checked(devices)
    total = math.fsum(device.weight for device in items)
    by_latency: dict[float, list[float]] = {}
    for device in items:
        by_latency.setdefault(device.latency_ms, []).append(device.weight)
    out = []
    running: list[float] = []
    for latency in sorted(by_latency):
        running.extend(by_latency[latency])
        out.append((latency, math.fsum(running) / total))
    out[-1] = (out[-1][0], 1.0)  # exactly 1 at the top, whatever the rounding
    return out


def cdf(devices: Iterable[DeviceLatency], latency_ms: float) -> float:
    """F(latency_ms): the share of the weight whose latency is at most latency_ms."""
    share = 0.0
    for latency, cumulative in distribution(devices):
        if latency > latency_ms:
            break
        share = cumulative
    return share


def percentile(devices: Iterable[DeviceLatency], q: float) -> float:
    """The q-quantile (0 < q <= 1): the smallest latency l with F(l) >= q."""
    if not 0 < q <= 1:
        raise PopulationError(f"a quantile is a fraction in (0, 1], not {q!r}")
    points = distribution(devices)
    for latency, cumulative in points:
        if cumulative >= q - _EPS:
            return latency
    return points[-1][0]


def mean(devices: Iterable[DeviceLatency]) -> float:
    """The weighted mean latency (also the expected round time of a single client)."""
    items = _checked(devices)
    total = math.fsum(device.weight for device in items)
    return math.fsum(device.latency_ms * device.weight for device in items) / total


def expected_max(devices: Iterable[DeviceLatency], k: int) -> float:
    """E[max of k latencies drawn with replacement from the weighted distribution] = sum l_i (F_i^k - F_{i-1}^k)."""
    if k < 1:
        raise PopulationError(f"K (clients per round) must be at least 1, not {k!r}")
    terms = []
    previous = 0.0
    for latency, cumulative in distribution(devices):
        terms.append(latency * (cumulative**k - previous**k))
        previous = cumulative
    return math.fsum(terms)


def prob_round_within(devices: Iterable[DeviceLatency], k: int, deadline_ms: float) -> float:
    """The chance that k clients sampled at random all finish within the deadline: F(deadline)^k."""
    if k < 1:
        raise PopulationError(f"K (clients per round) must be at least 1, not {k!r}")
    return cdf(devices, deadline_ms) ** k


def max_clients_within(devices: Iterable[DeviceLatency], deadline_ms: float, confidence: float,
                       cap: int = 1_000_000) -> int:
    """The largest K whose round meets the deadline with at least this probability (F(d)^K >= confidence).

    0 when not even one client does; `cap` when every device meets the deadline (any K does).
    """
    if not 0 < confidence <= 1:
        raise PopulationError(f"the confidence is a probability in (0, 1], not {confidence!r}")
    share = cdf(devices, deadline_ms)
    if share >= 1.0:
        return cap
    if share <= 0.0 or share < confidence:
        return 0
    return min(cap, int(math.floor(math.log(confidence) / math.log(share) + _EPS)))


def slowest(devices: Iterable[DeviceLatency], n: int) -> list[DeviceLatency]:
    """The n slowest devices, slowest first (ties by target id)."""
    return sorted(_checked(devices), key=lambda device: (-device.latency_ms, device.target_id))[:n]


# --- the summary the API stores and answers ---------------------------------------------------------------------


class SlowDevice(BaseModel):
    target_id: str
    target_name: str | None = None
    latency_ms: float
    share: float = Field(description="this device's share of the whole population's weight")


class RoundTime(BaseModel):
    k: int = Field(description="clients sampled at random (with replacement) per round")
    expected_max_ms: float = Field(description="the expected round time: the expected slowest of the K clients")


class ExcludedDevice(BaseModel):
    target_id: str
    target_name: str | None = None
    status: str = Field(description="oom (does not fit) or failed")
    share: float
    reason: str | None = None


class PopulationSummary(BaseModel):
    """What a population's predictions add up to (see understudy/populations.py for the definitions)."""

    devices: int = Field(description="device kinds that can run the workload")
    weight: float = Field(description="their total weight")
    share: float = Field(description="their share of the whole population's weight")
    mean_ms: float
    min_ms: float
    max_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    slowest: list[SlowDevice]
    round_time: list[RoundTime]
    excluded: list[ExcludedDevice] = Field(default_factory=list)


def summarize(devices: Sequence[DeviceLatency], ks: Sequence[int], *, slowest_n: int = 5,
              excluded: Sequence[ExcludedDevice] = (), excluded_weight: float = 0.0) -> PopulationSummary:
    """Percentiles, the slowest devices and the expected round time for each K, over the devices that ran.

    `excluded_weight` is the weight of the excluded devices, so that shares are of the whole population.
    """
    items = _checked(devices)
    weight = math.fsum(device.weight for device in items)
    whole = weight + excluded_weight
    latencies = [device.latency_ms for device in items]
    return PopulationSummary(
        devices=len(items),
        weight=weight,
        share=weight / whole,
        mean_ms=mean(items),
        min_ms=min(latencies),
        max_ms=max(latencies),
        p50_ms=percentile(items, 0.5),
        p90_ms=percentile(items, 0.9),
        p99_ms=percentile(items, 0.99),
        slowest=[SlowDevice(target_id=d.target_id, target_name=d.target_name, latency_ms=d.latency_ms,
                            share=d.weight / whole) for d in slowest(items, slowest_n)],
        round_time=[RoundTime(k=k, expected_max_ms=expected_max(items, k)) for k in ks],
        excluded=list(excluded),
    )
