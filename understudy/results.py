"""What a prediction says and how it was made: status, host setting, timing, host identity, and the GPU-free estimate
it shows while it waits for a measurement."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from understudy.bands import DEFAULT_COVERAGE, ErrorBand


class Status(StrEnum):
    """A prediction's state. A ledger row is queued, running or final (done, oom, failed); `estimated` is never
    stored: it is what a reader is shown for a queued or running row that carries a GPU-free estimate (Estimate,
    shown_status)."""

    queued = "queued"
    running = "running"
    estimated = "estimated"
    done = "done"
    oom = "oom"
    failed = "failed"

    @property
    def final(self) -> bool:
        return self in (Status.done, Status.oom, Status.failed)


SmMechanism = Literal["green-context", "mps", "none"]
ClockMode = Literal["locked", "emulated", "none"]
TimingMode = Literal["graph", "eager", "none"]


class HostSetting(BaseModel):
    """How the host GPU was set to stand in for a target. Two targets with equal settings share one measurement."""

    model_config = ConfigDict(frozen=True)

    sm_count: int | None = Field(default=None, description="SMs the workload ran on; None: all of the host's")
    sm_mechanism: SmMechanism = "none"
    clock_mhz: float | None = Field(default=None, description="core clock the time stands for")
    clock_mode: ClockMode = "none"
    memory_cap_gb: float | None = None
    profile: bool = Field(default=False, description="also split device time by kernel class")

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two settings one measurement. An emulated clock is applied to the time afterwards, so targets
        that differ only in it share the run."""
        clock = None if self.clock_mode == "emulated" else self.clock_mhz
        return (self.sm_count, self.sm_mechanism, clock, self.clock_mode, self.memory_cap_gb, self.profile)

    def describe(self) -> str:
        """'28 SMs (green-context), 1777 MHz (emulated), memory capped at 12 GB'; 'all SMs' when SMs were left alone."""
        sms = f"{self.sm_count} SMs ({self.sm_mechanism})" if self.sm_count else "all SMs"
        clock = f", {self.clock_mhz:.0f} MHz ({self.clock_mode})" if self.clock_mhz else ""
        memory = f", memory capped at {self.memory_cap_gb:g} GB" if self.memory_cap_gb else ""
        return sms + clock + memory


class Measurement(BaseModel):
    """One timed run of a workload on the host under one setting."""

    status: Literal["done", "oom", "failed"] = "done"
    min_ms: float | None = None
    median_ms: float | None = None
    spread_ms: float | None = Field(default=None, description="max minus min of the per-window step times")
    windows: int = 0
    timing_mode: TimingMode = "none"
    observed_clock_mhz: float | None = None
    peak_memory_gb: float | None = None
    kernel_ms: dict[str, float] = Field(default_factory=dict, description="device time per kernel class")
    error: str | None = None
    wall_s: float | None = None
    compile_s: float | None = Field(default=None, description="a compiled workload's compile time (its step's first "
                                    "call), no part of the step time")

    @property
    def device_share(self) -> float:
        """The share of the timed step the host's GPU was busy: 1 for a graph-timed step; for an eagerly timed one,
        its kernels' sum over the step where that is less. An eager step of many small ops waits on the host's CPU
        launching them (edgenext_small's AMP training on the H200: 59 ms a step for 18.5 ms of kernels), and that
        CPU is no part of any target's time; a graph-timed step's kernels sum to its time within a few per cent."""
        busy = sum(self.kernel_ms.values())
        if self.timing_mode != "eager" or busy <= 0 or not self.min_ms:
            return 1.0
        return min(1.0, busy / self.min_ms)

    @property
    def device_ms(self) -> float:
        """The host GPU's time for one step (device_share of the fastest timed step)."""
        return (self.min_ms or 0.0) * self.device_share


class HostInfo(BaseModel):
    """The machine a prediction was made on, as the host probe saw it."""

    gpu_name: str | None = None
    gpu_count: int = 0
    sm_count: int | None = None
    max_sm_clock_mhz: float | None = None
    current_sm_clock_mhz: float | None = None
    supported_clocks_mhz: list[float] = Field(default_factory=list)
    memory_gb: float | None = None
    driver: str | None = None
    compute_capability: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    timm: str | None = None
    fingerprint: str = "cpu"
    note: str | None = None

    @property
    def has_gpu(self) -> bool:
        return self.gpu_name is not None


MemoryFit = Literal["fits", "tight", "oom"]


class MemoryVerdict(BaseModel):
    """Whether a workload fits a target's memory, with the margin the prediction keeps: the predicted peak's band
    (what the allocator, cuDNN's workspaces and fragmentation do at the edge, understudy.bands.MemoryMargin) against
    the capacity. `tight`: the capacity lies inside that band, so the workload may or may not fit; `oom`: even the
    band's low end exceeds it."""

    model_config = ConfigDict(frozen=True)

    verdict: MemoryFit = Field(description="fits, tight (the capacity lies inside the predicted peak's band: it may "
                               "or may not fit) or oom (even the band's low end exceeds the capacity)")
    peak_gb: float = Field(description="the predicted peak (GiB)")
    low_gb: float = Field(description="the low end of the predicted peak's band (GiB)")
    high_gb: float = Field(description="the high end of the predicted peak's band (GiB)")
    capacity_gb: float = Field(description="the target's memory (a nominal GB taken as a GiB)")
    parts_gb: dict[str, float] = Field(default_factory=dict, description="the predicted peak's parts (GiB): weights "
                                       "and inputs, optimizer state, activations, CUDA context")

    def describe(self) -> str:
        """The verdict in a few words: 'fits 5.1 GB', 'tight 22.0-26.4 GB of 24', 'oom >= 30.1 GB'."""
        if self.verdict == "fits":
            return f"fits {self.peak_gb:.1f} GB"
        if self.verdict == "tight":
            return f"tight {self.low_gb:.1f}-{self.high_gb:.1f} GB of {self.capacity_gb:g}"
        return f"oom >= {self.low_gb:.1f} GB"


def split_details(stored: Mapping[str, Any] | None) -> tuple[dict[str, Any], ErrorBand | None, MemoryVerdict | None]:
    """A ledger row's details as PredictionResult.stored_details wrote them, split into the details proper, the band
    and the memory verdict."""
    details = dict(stored or {})
    band, memory = details.pop("band", None), details.pop("memory", None)
    return (details, ErrorBand.model_validate(band) if band else None,
            MemoryVerdict.model_validate(memory) if memory else None)


class PredictionResult(BaseModel):
    """A prediction for one workload on one target by one estimator."""

    workload_digest: str
    target_id: str
    estimator: str
    estimator_version: str
    status: Status
    latency_ms: float | None = Field(default=None, description="predicted step time (the minimum over windows)")
    median_ms: float | None = None
    spread_ms: float | None = None
    samples_per_s: float | None = None
    host_setting: HostSetting | None = None
    timing_mode: TimingMode = "none"
    host_fingerprint: str = "cpu"
    host_name: str | None = None
    error: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    band: ErrorBand | None = Field(default=None, description="how far off latency_ms may be (understudy.bands)")
    memory: MemoryVerdict | None = None

    def interval_ms(self, coverage: float = DEFAULT_COVERAGE) -> tuple[float, float] | None:
        """The step time's band at `coverage`: [low, high] ms, None without a latency or a band."""
        if self.latency_ms is None or self.band is None:
            return None
        return self.band.interval(self.latency_ms, coverage)

    def stored_details(self) -> dict[str, Any]:
        """The details as the ledger stores them: with the band and the memory verdict, which from_columns lifts out
        again."""
        extra = {name: value.model_dump(mode="json") for name, value in (("band", self.band), ("memory", self.memory))
                 if value is not None}
        return {**self.details, **extra}

    @classmethod
    def from_columns(cls, values: Mapping[str, Any]) -> PredictionResult:
        """A stored prediction as a result, from its ledger row's RESULT_ROW_COLUMNS (the store reads them through
        SQLAlchemy, the CLI's cache lookup through sqlite3)."""
        details, band, memory = split_details(values["details"])
        return cls(
            workload_digest=values["workload_digest"],
            target_id=values["target_id"],
            estimator=values["estimator"],
            estimator_version=values["estimator_version"],
            status=Status(values["status"]),
            latency_ms=values["latency_ms"],
            median_ms=values["median_ms"],
            spread_ms=values["spread_ms"],
            samples_per_s=values["samples_per_s"],
            host_setting=HostSetting.model_validate(values["host_setting"]) if values["host_setting"] else None,
            timing_mode=values["timing_mode"] or "none",
            host_fingerprint=values["host_fingerprint"] or values["host_class"],
            host_name=values["host_name"],
            error=values["error"],
            details=details,
            band=band,
            memory=memory,
        )


class Estimate(BaseModel):
    """The GPU-free answer (the analytic estimator's) a prediction carries while it waits for its measurement, kept
    beside the measured answer once that lands: the numbers of a PredictionResult that say something about the
    workload, without what only a measurement has (host setting, timing mode, host)."""

    model_config = ConfigDict(frozen=True)

    estimator: str
    estimator_version: str
    status: Literal["done", "oom"] = Field(description="the estimate's own verdict: done (a time) or oom (the "
                                           "workload is predicted not to fit)")
    latency_ms: float | None = Field(default=None, description="the estimated step time; None when oom")
    median_ms: float | None = None
    spread_ms: float | None = None
    samples_per_s: float | None = None
    band: ErrorBand | None = Field(default=None, description="how far off latency_ms may be (understudy.bands)")
    memory: MemoryVerdict | None = None

    @classmethod
    def of(cls, result: PredictionResult) -> Estimate | None:
        """The estimate a result gives; None for a failed result, which says nothing about the workload."""
        if result.status not in (Status.done, Status.oom):
            return None
        return cls(estimator=result.estimator, estimator_version=result.estimator_version,
                   status="oom" if result.status == Status.oom else "done", latency_ms=result.latency_ms,
                   median_ms=result.median_ms, spread_ms=result.spread_ms, samples_per_s=result.samples_per_s,
                   band=result.band, memory=result.memory)


def shown_status(status: Status, estimated: bool) -> Status:
    """The status a reader is shown: `estimated` while a row that carries an estimate waits for its measurement,
    else the row's own."""
    return Status.estimated if estimated and not status.final else status


# The ledger columns a PredictionResult is read from (ledger.models.Prediction).
RESULT_ROW_COLUMNS = ("workload_digest", "target_id", "estimator", "estimator_version", "status", "latency_ms",
                  "median_ms", "spread_ms", "samples_per_s", "host_setting", "timing_mode", "host_fingerprint",
                  "host_class", "host_name", "error", "details")
