"""The mapping math: which SM share and core clock the host can actually give for a target's SMs and clock."""

from __future__ import annotations

import math


def green_context_granularity(compute_capability: str | None) -> tuple[int, int]:
    """(minimum SMs, step) a green context can hold: CUDA's SM partitioning rules per compute capability."""
    major = int((compute_capability or "9.0").split(".")[0])
    if major >= 9:
        return 8, 8
    if major == 8:
        return 4, 2
    return 2, 2


def green_context_sms(target_sms: int, host_sms: int, compute_capability: str | None) -> int:
    """SMs to request: the allowed partition size nearest the target's count, never more than the host has."""
    minimum, step = green_context_granularity(compute_capability)
    if target_sms >= host_sms:
        return host_sms
    # Half-way cases round up: the extra SMs are emulated away by the estimator, missing ones cannot be.
    nearest = max(minimum, step * math.floor(target_sms / step + 0.5))
    return min(nearest, host_sms)


def mps_sms(percentage: int, host_sms: int) -> int:
    """SMs an MPS client gets for CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: whole TPCs (2 SMs), rounded down.

    Matches what was seen on the H200 (132 SMs): 50% -> 66, 25% -> 32, 12% -> 14.
    """
    tpcs = host_sms // 2
    return max(2, 2 * math.floor(tpcs * percentage / 100))


def mps_percentage(target_sms: int, host_sms: int) -> tuple[int, int]:
    """(percentage, SMs it gives) whose SM count is nearest the target's; ties go to fewer SMs."""
    if target_sms >= host_sms:
        return 100, host_sms
    best = min(range(1, 101), key=lambda pct: (abs(mps_sms(pct, host_sms) - target_sms), mps_sms(pct, host_sms)))
    return best, mps_sms(best, host_sms)


def nearest_clock(target_mhz: float, supported_mhz: list[float]) -> float:
    """The supported graphics clock nearest the target's boost clock (the host's top clock if the target is faster)."""
    if not supported_mhz:
        raise ValueError("the host lists no supported graphics clocks")
    return min(supported_mhz, key=lambda clock: (abs(clock - target_mhz), -clock))
