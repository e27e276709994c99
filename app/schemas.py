"""Request and response bodies of the HTTP API (pydantic), apart from the SQLAlchemy rows they are read from."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Discriminator, Field, PrivateAttr, StringConstraints,
                      Tag, ValidationInfo, field_validator, model_validator)

from understudy.bands import DEFAULT_COVERAGE, MAX_COVERAGE, MIN_COVERAGE, ErrorBand
from understudy.calibration import CalibrationPoint
from understudy.catalog import CatalogTarget, InlineTarget, TargetSpec
from ledger.dispatch import worker_slot
from understudy.errors import UnknownEstimator
from understudy.estimator_info import CALIBRATED_ESTIMATOR, estimator_info
from understudy.populations import PopulationSummary
from understudy.links import DeviceKind, Link
from understudy.results import (Estimate, HostSetting, MemoryVerdict, Status, TimingMode, shown_status,
                               split_details)
from understudy.rounds import RoundConfig, RoundParameters
from ledger.models import Calibration, Host, Population, Prediction
from understudy.traces import DEFAULT_OORT_THRESHOLD, MAX_TRACE_CELLS, TraceFormat
from understudy.workload import Precision, Workload

# --- requests ---------------------------------------------------------------------------------------------------


def _known_estimator(value: str) -> str:
    try:
        return estimator_info(value).name
    except UnknownEstimator as exc:
        raise ValueError(str(exc)) from None


def _target_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "catalog"
    if isinstance(value, (dict, InlineTarget)):
        return "inline"
    return None


TargetRef = Annotated[
    Annotated[CatalogTarget, Tag("catalog")] | Annotated[InlineTarget, Tag("inline")],
    Discriminator(_target_kind, custom_error_type="target_type",
                  custom_error_message="a target is a catalog id or name (a string) or an inline spec (an object)"),
]
# Tags the discriminated union adds to error locations; app.errors drops them so a field reads "targets[1]".
TARGET_TAGS = ("catalog", "inline")
EstimatorName = Annotated[str, StringConstraints(min_length=1, max_length=40), AfterValidator(_known_estimator)]

# The most targets any request may list, whatever UNDERSTUDY_MAX_TARGETS says (which may only lower it): every
# target is looked up while the body is validated, on the event loop.
MAX_TARGETS_IN_SCHEMA = 256
# Calibration points: each is predicted by the base estimator when the calibration is first fitted, in one job.
MAX_CALIBRATION_POINTS = 50

# A measured step time as a request gives it: finite and plausible (a step from 10 us to 10 minutes).
MeasuredMs = Annotated[float, Field(ge=0.01, le=600_000, allow_inf_nan=False, strict=True,
                                    description="the measured step time in milliseconds (the fastest of several "
                                                "timed windows after warm-up)")]

WORKLOAD_EXAMPLE: dict[str, Any] = {"model": "resnet50", "mode": "train", "batch_size": 64, "resolution": 224,
                    "precision": "amp-fp16", "optimizer": "sgd"}


class PredictionCreate(BaseModel):
    """A workload and the GPUs to predict it on."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"workload": WORKLOAD_EXAMPLE, "targets": ["rtx-3090", "t4"], "estimator": "analytic"},
                {"workload": {"model": "vit_base_patch16_224", "mode": "infer", "batch_size": 8},
                 "targets": ["rtx-4090", {"name": "My laptop GPU", "sm_count": 30, "boost_clock_mhz": 1700,
                                          "memory_bandwidth_gbps": 336, "memory_size_gb": 6}]},
            ]
        },
    )

    workload: Workload
    targets: list[TargetRef] = Field(
        min_length=1, max_length=MAX_TARGETS_IN_SCHEMA,
        description="catalog ids or names (GET /v1/targets), each with an optional power limit (\"rtx-4090@300w\"), "
                    "or inline specs of GPUs not in the catalog",
    )
    estimator: EstimatorName | None = Field(
        default=None,
        description="spec, flops, analytic, hostaware or calibrated (a target's calibration applied to its base "
                    "estimator; POST /v1/targets/{id}/calibrations first); default: hostaware when a GPU worker is "
                    "registered, otherwise analytic (which needs no GPU)",
    )
    host: str | None = Field(
        default=None, min_length=1, max_length=200,
        description="for a GPU estimator: the registered host to measure on (its id, fingerprint or host class, "
                    "as GET /v1/hosts lists them); default: the best registered GPU host",
    )
    calibration: str | None = Field(
        default=None, min_length=1, max_length=32, pattern=r"^[0-9a-f]+$",
        description="with estimator calibrated: the id of the calibration to use for its target (anyone's, by id); "
                    "default: the caller's own latest calibration of each target",
    )
    coverage: float = Field(
        default=DEFAULT_COVERAGE, ge=MIN_COVERAGE, le=MAX_COVERAGE, allow_inf_nan=False,
        description=f"the share of measured step times each answer's interval_ms is meant to hold, {MIN_COVERAGE} to "
                    f"{MAX_COVERAGE} (understudy.bands); it changes only the answer, not what is predicted or cached")


# --- responses --------------------------------------------------------------------------------------------------


class LatencyPublic(BaseModel):
    min_ms: float | None = Field(default=None, description="the predicted step time: the minimum over windows")
    median_ms: float | None = None
    spread_ms: float | None = Field(default=None, description="max minus min of the per-window step times")


class HostSettingPublic(HostSetting):
    summary: str = Field(description="the setting in words: SMs and how they were restricted, clock and how")


class BandPublic(BaseModel):
    """How far off the predicted step time may be: the interval_ms of a coverage is latency.min_ms times
    `multipliers`."""

    model: str = Field(description="the version of the band model (understudy/data/error_bands.json)")
    basis: str = Field(description="what the band was conditioned on, in words: the estimator and mode, whether the "
                                   "target's architecture was seen in development, whether it runs power-limited, "
                                   "the share of the step on the FP32 (SIMT) lanes; and a calibration that "
                                   "narrowed it")
    multipliers: tuple[float, float] = Field(description="(low, high): interval_ms over latency.min_ms at coverage")


class MemoryPublic(MemoryVerdict):
    summary: str = Field(description="the verdict in a few words: 'fits 5.1 GB', 'tight 22.0-26.4 GB of 24', "
                                     "'oom >= 30.1 GB'")


class PredictionHost(BaseModel):
    host_class: str = Field(description='the queue it ran on: "cpu" or "gpu:<fingerprint>"')
    fingerprint: str | None = Field(default=None, description='the host GPU\'s fingerprint; "any" for estimators '
                                                              "that never touch a GPU")
    gpu_name: str | None = None
    worker: str | None = Field(default=None, description="the worker that ran it, by the name GET /v1/hosts lists "
                                                         "it under (<host name>:gpu<index>)")


# Which answer a prediction's latency, interval_ms, samples_per_s and memory are: its GPU-free estimate while its
# measurement is awaited, or its own final result.
Answer = Literal["estimate", "final"]


def answer_of(status: Status) -> Answer | None:
    """Which answer a prediction shown with this status carries (shown_status): none while it waits without one."""
    if status == Status.estimated:
        return "estimate"
    return "final" if status.final else None


class EstimatePublic(BaseModel):
    """The GPU-free estimate (the analytic estimator's roofline, made in seconds on any worker) of a prediction
    that waits for a GPU measurement; kept beside the measured answer once that lands."""

    estimator: str = Field(description="the estimator that made it: analytic")
    estimator_version: str
    status: Literal["done", "oom"] = Field(description="done (a time) or oom (estimated not to fit the target)")
    latency_ms: float | None = Field(default=None, description="the estimated step time (null when oom)")
    interval_ms: tuple[float, float] | None = Field(
        default=None, description="[low, high] ms: where the measured step time should fall by this estimate, for "
                                  "`coverage` of workloads (the estimator's own, wider, error band)")
    coverage: float = Field(default=DEFAULT_COVERAGE, description="the share of measured step times interval_ms is "
                                                                   "meant to hold")
    band: BandPublic | None = Field(default=None, description="the error band interval_ms is drawn from")
    samples_per_s: float | None = None
    memory: MemoryPublic | None = Field(default=None, description="whether the workload fits, by this estimate")
    _band: ErrorBand | None = PrivateAttr(default=None)

    def at_coverage(self, coverage: float) -> EstimatePublic:
        """The same estimate with its interval at `coverage`."""
        if coverage == self.coverage:
            return self
        return self.model_copy(update=_band_fields(self._band, self.latency_ms, coverage))


def estimate_public(estimate: Estimate, coverage: float = DEFAULT_COVERAGE) -> EstimatePublic:
    public = EstimatePublic(
        estimator=estimate.estimator, estimator_version=estimate.estimator_version, status=estimate.status,
        latency_ms=estimate.latency_ms, samples_per_s=estimate.samples_per_s, memory=_memory_public(estimate.memory),
        **_band_fields(estimate.band, estimate.latency_ms, coverage))
    public._band = estimate.band
    return public


def _memory_public(memory: MemoryVerdict | None) -> MemoryPublic | None:
    return MemoryPublic(**memory.model_dump(), summary=memory.describe()) if memory is not None else None


class PredictionPublic(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{
                "id": "5b0c7a8e2f7d4d0f9f3e0c1a2b3c4d5e", "request_id": "9a1b2c3d4e5f40718293a4b5c6d7e8f9",
                "status": "done", "cached": False, "model": "resnet50", "workload": WORKLOAD_EXAMPLE,
                "target_id": "rtx-3090", "target_name": "GeForce RTX 3090", "estimator": "analytic",
                "estimator_version": "1",
                "latency": {"min_ms": 112.4, "median_ms": 112.4, "spread_ms": 0.0}, "samples_per_s": 569.4,
                "interval_ms": [89.0, 141.9], "coverage": 0.8,
                "band": {"model": "4", "basis": "analytic train, Ampere (seen in development), at full power, 0% in "
                                                "plain-lane convolutions", "multipliers": [0.792, 1.263]},
                "memory": {"verdict": "fits", "peak_gb": 12.8, "low_gb": 11.5, "high_gb": 14.1, "capacity_gb": 24.0,
                           "parts_gb": {"weights": 0.2, "optimizer": 0.1, "activations": 11.5, "overhead": 1.0},
                           "summary": "fits 12.8 GB"},
                "host_setting": None, "timing_mode": "none",
                "host": {"host_class": "cpu", "fingerprint": "any", "gpu_name": None, "worker": "box:gpu0"},
                "error": None, "details": {}, "attempts": 1, "created_at": "2025-01-01T12:00:00Z",
                "started_at": "2025-01-01T12:00:01Z", "finished_at": "2025-01-01T12:00:03Z",
                "answer": "final", "estimate": None,
            }, {
                "id": "7c1d9e0f3a8b4c2d9e1f0a2b3c4d5e6f", "request_id": "0b2c3d4e5f6a41829304b5c6d7e8f9a0",
                "status": "estimated", "answer": "estimate", "cached": False, "model": "resnet50",
                "workload": WORKLOAD_EXAMPLE, "target_id": "rtx-3090", "target_name": "GeForce RTX 3090",
                "estimator": "hostaware", "estimator_version": estimator_info("hostaware").version,
                "latency": {"min_ms": 112.4, "median_ms": 112.4, "spread_ms": 0.0}, "samples_per_s": 569.4,
                "interval_ms": [92.1, 134.9], "coverage": 0.8, "memory": None,
                "estimate": {"estimator": "analytic", "estimator_version": estimator_info("analytic").version,
                             "status": "done", "latency_ms": 112.4, "interval_ms": [92.1, 134.9],
                             "coverage": 0.8, "samples_per_s": 569.4, "memory": None},
                "host_setting": None, "timing_mode": None,
                "host": {"host_class": "gpu:3f2a9c1d0b8e7f65", "fingerprint": None, "gpu_name": None,
                         "worker": None},
                "error": None, "details": {}, "attempts": 0, "created_at": "2025-01-01T12:00:00Z",
            }]
        }
    )

    id: str
    request_id: str | None = None
    status: Status = Field(description="queued or running (waiting for its result), estimated (waiting for its GPU "
                                       "measurement, with a GPU-free estimate in hand: latency, interval_ms, "
                                       "samples_per_s and memory are the estimate's), done, oom (the workload does "
                                       "not fit the target) or failed; only done, oom and failed are final")
    answer: Answer | None = Field(
        default=None, description="which answer latency, interval_ms, samples_per_s and memory are: estimate (the "
                                  "GPU-free estimate, while status is estimated) or final (the prediction's own "
                                  "result); null while there is neither")
    estimate: EstimatePublic | None = Field(
        default=None, description="the GPU-free estimate given while the GPU measurement was awaited, kept once the "
                                  "prediction is final (so both show); null for a prediction that needed none (its "
                                  "estimator needs no GPU) or got none")
    cached: bool = Field(default=False, description="in a POST answer: the result existed before this request")
    model: str
    workload: dict[str, Any] = Field(description="the workload in canonical form, every default spelled out")
    workload_digest: str | None = Field(default=None, description="the canonical workload's sha256: every "
                                                                  "prediction of one workload shares it")
    target_id: str
    target_name: str | None = None
    estimator: str
    estimator_version: str
    latency: LatencyPublic | None = Field(default=None, description="present once status is done, or estimated "
                                                                    "(then the estimate's)")
    interval_ms: tuple[float, float] | None = Field(
        default=None, description="[low, high] ms: where the measured step time should fall, for `coverage` of "
                                  "workloads (the error band around latency.min_ms); null without a latency or a band")
    coverage: float = Field(default=DEFAULT_COVERAGE, description="the share of measured step times interval_ms is "
                                                                   "meant to hold: the request's coverage")
    band: BandPublic | None = Field(default=None, description="the error band interval_ms is drawn from")
    memory: MemoryPublic | None = Field(
        default=None, description="whether the workload fits the target's memory, from its predicted peak: fits, tight "
                                  "(the capacity lies inside the peak's band: it may or may not fit) or oom; null "
                                  "until predicted, and for a failed prediction")
    samples_per_s: float | None = None
    host_setting: HostSettingPublic | None = Field(
        default=None, description="how the host GPU was set to stand in for the target (null: nothing was measured)"
    )
    timing_mode: TimingMode | None = None
    host: PredictionHost
    error: str | None = Field(default=None, description="why it failed or does not fit")
    details: dict[str, Any] = Field(default_factory=dict)
    attempts: int = 0
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    _band: ErrorBand | None = PrivateAttr(default=None)  # the whole band, for another coverage (at_coverage)

    def at_coverage(self, coverage: float) -> PredictionPublic:
        """The same prediction with its interval at `coverage`."""
        if coverage == self.coverage:
            return self
        update = _band_fields(self._band, self.latency.min_ms if self.latency else None, coverage)
        if self.estimate is not None:
            update["estimate"] = self.estimate.at_coverage(coverage)
        return self.model_copy(update=update)


def _band_fields(band: ErrorBand | None, latency_ms: float | None, coverage: float) -> dict[str, Any]:
    """PredictionPublic's coverage, interval_ms and band for a prediction's band at `coverage`."""
    if band is None or latency_ms is None:
        return {"coverage": coverage, "interval_ms": None, "band": None}
    low, high = band.multipliers(coverage)
    return {"coverage": coverage, "interval_ms": (latency_ms * low, latency_ms * high),
            "band": BandPublic(model=band.model, basis=band.basis, multipliers=(low, high))}


class PredictionsPublic(BaseModel):
    data: list[PredictionPublic]
    count: int = Field(description="rows matching the filters, over all pages")


class PredictionRequestPublic(BaseModel):
    """The answer to a POST: one prediction per target, in the order given (poll GET /v1/predictions/{id})."""

    request_id: str
    cached: bool = Field(description="every result was already in the store; nothing was queued")
    data: list[PredictionPublic]
    count: int


class TargetPublic(TargetSpec):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "id": "rtx-3090", "name": "GeForce RTX 3090", "architecture": "Ampere", "compute_capability": "8.6",
        "sm_count": 82, "boost_clock_mhz": 1695, "memory_size_gb": 24, "memory_bandwidth_gbps": 936,
        "l2_cache_mb": 6, "fp32_tflops": 35.6, "fp16_tensor_tflops": 71, "bf16_tensor_tflops": 71,
        "tf32_tensor_tflops": 35.6, "source": "https://...", "tensor_source": "https://...", "origin": "catalog"}]})


class TargetsPublic(BaseModel):
    data: list[TargetPublic]
    count: int


class HostPublic(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "id": "box:gpu0", "host_class": "gpu:3f2a9c1d0b8e7f65", "gpu_name": "NVIDIA H200",
        "fingerprint": "3f2a9c1d0b8e7f65", "last_heartbeat": "2025-01-01T12:00:00Z", "alive": True,
        "queue_depth": 2, "queues": {"gpu:3f2a9c1d0b8e7f65": 2, "cpu": 0}, "info": {"driver": "570.86.15"}}]})

    id: str = Field(description="the worker's slot: <host name>:gpu<index>")
    host_class: str
    gpu_name: str | None = None
    fingerprint: str
    last_heartbeat: datetime
    alive: bool = Field(description="a heartbeat arrived within UNDERSTUDY_HOST_STALE_S")
    queue_depth: int | None = Field(default=None, description="jobs waiting in its host-class queue (null: Redis "
                                                              "unreachable)")
    queues: dict[str, int] | None = Field(default=None, description="jobs waiting in each queue it serves")
    info: dict[str, Any] = Field(description="the host probe: GPU, driver, software versions, estimator versions")


class HostsPublic(BaseModel):
    data: list[HostPublic]
    count: int


class HealthPublic(BaseModel):
    status: str = Field(examples=["ok"])
    checks: dict[str, str] = Field(default_factory=dict, examples=[{"database": "ok", "redis": "ok"}])


class FieldErrorPublic(BaseModel):
    field: str = Field(examples=["workload.batch_size"])
    reason: str = Field(examples=["Input should be greater than or equal to 1"])


class ErrorPublic(BaseModel):
    """Every error the API answers, whatever its status."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "detail": "workload.batch_size: Input should be greater than or equal to 1",
        "errors": [{"field": "workload.batch_size", "reason": "Input should be greater than or equal to 1"}]}]})

    detail: str
    errors: list[FieldErrorPublic] | None = None


# The error answers every resource route documents, beside its own 404/409.
COMMON_ERRORS: dict[int | str, dict[str, object]] = {
    422: {"model": ErrorPublic, "description": "a field is invalid (named in errors[].field)"},
    401: {"model": ErrorPublic, "description": "no API key, or an unknown one"},
    503: {"model": ErrorPublic, "description": "the database or Redis is unreachable"},
}


# --- from rows --------------------------------------------------------------------------------------------------


def prediction_public(row: Prediction, cached: bool = False, coverage: float = DEFAULT_COVERAGE) -> PredictionPublic:
    """A row as the API shows it: while it waits for its measurement with an estimate in hand, status estimated and
    the estimate's numbers; once final, its own numbers and the estimate beside them."""
    details, band, memory = split_details(row.details)
    estimate = Estimate.model_validate(row.estimate) if row.estimate else None
    status = shown_status(Status(row.status), estimate is not None)
    setting = None
    if row.host_setting:
        base = HostSetting.model_validate(row.host_setting)
        setting = HostSettingPublic(**base.model_dump(), summary=base.describe())
    latency_ms, median_ms, spread_ms, samples_per_s = row.latency_ms, row.median_ms, row.spread_ms, row.samples_per_s
    if status == Status.estimated and estimate is not None:
        band, memory = estimate.band, estimate.memory
        latency_ms, median_ms, spread_ms = estimate.latency_ms, estimate.median_ms, estimate.spread_ms
        samples_per_s = estimate.samples_per_s
    latency = None
    if latency_ms is not None:
        latency = LatencyPublic(min_ms=latency_ms, median_ms=median_ms, spread_ms=spread_ms)
    worker = worker_slot(row.worker_id)
    public = PredictionPublic(
        id=row.id,
        request_id=row.request_id,
        status=status,
        answer=answer_of(status),
        estimate=estimate_public(estimate, coverage) if estimate is not None else None,
        cached=cached,
        model=row.model,
        workload=row.workload,
        workload_digest=row.workload_digest,
        target_id=row.target_id,
        target_name=(row.target or {}).get("name"),
        estimator=row.estimator,
        estimator_version=row.estimator_version,
        latency=latency,
        **_band_fields(band, latency_ms, coverage),
        memory=_memory_public(memory),
        samples_per_s=samples_per_s,
        host_setting=setting,
        timing_mode=row.timing_mode,
        host=PredictionHost(host_class=row.host_class, fingerprint=row.host_fingerprint, gpu_name=row.host_name,
                            worker=worker),
        error=row.error,
        details=details,
        attempts=row.attempts,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )
    public._band = band
    return public


# What a worker's heartbeat says about its process that only an admin sees: a PID, the Redis key of its GPU lock and
# the token that names it (with which a caller could impersonate its liveness).
HOST_INTERNALS = ("pid", "lock", "lock_token")


def host_public(host: Host, alive: bool, queues: dict[str, int] | None, internals: bool = False) -> HostPublic:
    info = dict(host.info or {})
    if not internals:
        info = {key: value for key, value in info.items() if key not in HOST_INTERNALS}
    return HostPublic(
        id=host.id, host_class=host.host_class, gpu_name=host.gpu_name, fingerprint=host.fingerprint,
        last_heartbeat=host.last_heartbeat, alive=alive,
        queue_depth=queues.get(host.host_class) if queues is not None else None, queues=queues, info=info,
    )


# --- populations (POST /v1/populations) -------------------------------------------------------------------------

PopulationStatus = Literal["queued", "running", "estimated", "done", "failed"]
KValue = Annotated[int, Field(ge=1, le=1_000_000)]


class PopulationWorkload(Workload):
    """A population's workload: as in POST /v1/predictions, but trained in fp32 unless it says otherwise, as FL
    frameworks train (FedScale, FLGo, APPFL and Flower's examples all run fp32 steps)."""

    precision: Precision = Field(default="fp32", description="fp32 (the default for populations: FL clients train "
                                                             "in fp32), amp-fp16, amp-bf16, fp16 or bf16")


class PopulationDeviceCreate(BaseModel):
    """One kind of device in the population: a target and how much of the population it is."""

    model_config = ConfigDict(extra="forbid")

    target: TargetRef = Field(description="a catalog id or name, or an inline spec")
    weight: float | None = Field(default=None, gt=0, le=1e12, allow_inf_nan=False,
                                 description="its share (any positive scale; shares are normalised)")
    count: int | None = Field(default=None, ge=1, le=1_000_000_000_000, description="how many such devices")

    @model_validator(mode="after")
    def _weight_or_count(self) -> PopulationDeviceCreate:
        if (self.weight is None) == (self.count is None):
            raise ValueError("give either a weight or a count for each device (exactly one of them)")
        return self


class PopulationMeasurementCreate(BaseModel):
    """A step time measured on a catalog GPU, a device of the population or any other."""

    model_config = ConfigDict(extra="forbid")

    target: CatalogTarget = Field(description="the catalog GPU it was measured on (id or name)")
    measured_ms: MeasuredMs
    workload: PopulationWorkload | None = Field(default=None, description="what was measured (precision fp32 unless "
                                                                          "given); default: the population's workload")


class PopulationCreate(BaseModel):
    """A workload and a device population: each device kind with a weight or a count, and optionally step times
    measured on some of the GPUs, which calibrate every device's prediction. The workload's precision defaults to
    fp32 here."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{
            "workload": {"model": "resnet18", "mode": "train", "batch_size": 32, "resolution": 32},
            "devices": [{"target": "rtx-3090", "count": 120}, {"target": "t4", "count": 300},
                        {"target": {"name": "Phone-class GPU", "sm_count": 8, "boost_clock_mhz": 1000,
                                    "memory_bandwidth_gbps": 50, "memory_size_gb": 4}, "count": 80}],
            "k": [10, 50], "estimator": "analytic"}]},
    )

    workload: PopulationWorkload = Field(description="the step every device runs; precision fp32 unless given")
    devices: list[PopulationDeviceCreate] = Field(
        min_length=1, max_length=MAX_TARGETS_IN_SCHEMA,
        description="[{target, weight} or {target, count}]; one target listed twice adds up",
    )
    k: list[KValue] = Field(default_factory=lambda: [10], min_length=1, max_length=20,
                            description="clients per round: the expected round time is given for each K")
    slowest: int = Field(default=5, ge=1, le=100, description="how many of the slowest devices to list")
    estimator: EstimatorName | None = Field(default=None, description="as in POST /v1/predictions; with "
                                                                      "measurements, the base they calibrate")
    host: str | None = Field(default=None, min_length=1, max_length=200, description="as in POST /v1/predictions")
    measurements: list[PopulationMeasurementCreate] = Field(
        default_factory=list, max_length=MAX_CALIBRATION_POINTS,
        description="step times measured on catalog GPUs (an FL round's clients, a lab card): every device is then "
                    "predicted by the calibrated estimator over `estimator`, a measured device as measured and the "
                    "others carrying what the measurements say of the workload",
    )

    @field_validator("k", mode="before")
    @classmethod
    def _one_k(cls, value: Any) -> Any:
        return [value] if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("devices")
    @classmethod
    def _one_weighting(cls, value: list[PopulationDeviceCreate]) -> list[PopulationDeviceCreate]:
        if len({device.weight is None for device in value}) > 1:
            raise ValueError("give every device a weight, or every device a count, not a mix")
        return value

    @field_validator("measurements")
    @classmethod
    def _measurements_name_the_base(cls, value: list[PopulationMeasurementCreate],
                                    info: ValidationInfo) -> list[PopulationMeasurementCreate]:
        if value and info.data.get("estimator") == CALIBRATED_ESTIMATOR:
            raise ValueError("measurements calibrate the population's estimator: give the base they correct as "
                             "`estimator` (analytic, hostaware, ...) or leave it out for the default")
        return value

    @property
    def weighting(self) -> str:
        return "count" if self.devices[0].count is not None else "weight"

    def measured_points(self) -> list[tuple[str, CalibrationPoint]]:
        """Each measurement as (the catalog id it was measured on, the point of it)."""
        return [(m.target, CalibrationPoint(workload=m.workload or self.workload, measured_ms=m.measured_ms))
                for m in self.measurements]


class PopulationDevicePublic(BaseModel):
    target_id: str
    target_name: str | None = None
    weight: float = Field(description="as given: a weight or a count")
    share: float = Field(description="its share of the population's weight")
    prediction_id: str
    status: Status = Field(description="its prediction's status, as GET /v1/predictions/{id} shows it")
    answer: Answer | None = Field(default=None, description="which answer latency_ms is: estimate (the GPU-free "
                                                            "estimate, while status is estimated) or final")
    latency_ms: float | None = None
    spread_ms: float | None = None
    host_setting: str | None = Field(default=None, description="the host setting it was measured under, in words")
    calibration_id: str | None = Field(default=None, description="with measurements: the calibration made from "
                                                                 "them for this device")
    error: str | None = None


class PopulationPublic(BaseModel):
    id: str
    status: PopulationStatus = Field(description="queued or running until every prediction is final; estimated "
                                                 "while every device not final yet has a GPU-free estimate (the "
                                                 "summary is then provisional, from those estimates); done when "
                                                 "every prediction is final and at least one device ran; failed "
                                                 "when none could")
    workload: dict[str, Any]
    workload_digest: str
    model: str
    estimator: str
    weighting: str = Field(description='"weight" or "count": how the devices were given')
    k: list[int]
    slowest: int
    measurements: list[dict[str, Any]] = Field(default_factory=list, description="the step times the request gave")
    devices: list[PopulationDevicePublic]
    summary: PopulationSummary | None = Field(default=None, description="present once status is done; while "
                                                                        "status is estimated, the provisional one")
    error: str | None = None
    created_at: datetime
    finished_at: datetime | None = None


class PopulationsPublic(BaseModel):
    data: list[PopulationPublic]
    count: int


def population_public(population: Population, rows: dict[str, Prediction]) -> PopulationPublic:
    total = sum(float(member["weight"]) for member in population.members) or 1.0
    devices = []
    for member in population.members:
        row = rows.get(member["prediction_id"])
        setting = HostSetting.model_validate(row.host_setting).describe() if row and row.host_setting else None
        estimate = Estimate.model_validate(row.estimate) if row and row.estimate else None
        status = shown_status(Status(row.status), estimate is not None) if row else Status.failed
        shown = estimate if status == Status.estimated else row
        devices.append(PopulationDevicePublic(
            target_id=member["target_id"], target_name=member.get("target_name"), weight=member["weight"],
            share=float(member["weight"]) / total, prediction_id=member["prediction_id"], status=status,
            answer=answer_of(status),
            latency_ms=shown.latency_ms if shown else None, spread_ms=shown.spread_ms if shown else None,
            host_setting=setting, calibration_id=member.get("calibration_id"),
            error=(row.error if row else "the prediction row is gone"),
        ))
    error = None
    if population.status == "failed":
        error = "no device in the population could run the workload: " + "; ".join(
            f"{d.target_id}: {d.status.value}{f' ({d.error})' if d.error else ''}" for d in devices)
    summary = PopulationSummary.model_validate(population.summary) if population.summary else None
    return PopulationPublic(
        id=population.id, status=population.status,
        workload=population.workload, workload_digest=population.workload_digest, model=population.model,
        estimator=population.estimator, weighting=population.weighting, k=list(population.ks),
        slowest=population.slowest, measurements=list(population.measurements or []), devices=devices,
        summary=summary, error=error,
        created_at=population.created_at, finished_at=population.finished_at,
    )


# --- a population's rounds and traces (GET /v1/populations/{id}/rounds and /trace) --------------------------------


def _link(text: str) -> tuple[str, Link]:
    key, _, rates = text.partition("=")
    down, _, up = rates.partition("/")
    try:
        return key.strip(), Link(down_mbps=float(down), up_mbps=float(up))
    except ValueError:
        raise ValueError(f"{text!r}: write TARGET=DOWN/UP or KIND=DOWN/UP in Mbit/s (kinds: consumer, edge, "
                         "datacenter), e.g. rtx-3090=100/20") from None


class RoundQuery(RoundParameters):
    """The round model's parameters as query parameters; links as TARGET=DOWN/UP (Mbit/s)."""

    link: list[str] = Field(default_factory=list, max_length=100,
                            description="TARGET=DOWN/UP or KIND=DOWN/UP in Mbit/s, repeatable (kinds: consumer, "
                                        "edge, datacenter); the rest get their kind's default")

    @field_validator("link")
    @classmethod
    def _links(cls, value: list[str]) -> list[str]:
        for item in value:
            _link(item)
        return value

    def round_config(self) -> RoundConfig:
        return RoundConfig(**self.model_dump(include=set(RoundParameters.model_fields)),
                           links=dict(_link(item) for item in self.link))


class RoundsQuery(RoundQuery):
    k: list[Annotated[int, Field(ge=1, le=1000)]] = Field(default_factory=lambda: [10], min_length=1, max_length=20,
                                                          description="clients per round (repeatable)")
    deadline_s: float | None = Field(default=None, gt=0, le=1e9, allow_inf_nan=False,
                                     description="a round deadline: the chance that K finish by it")


class TraceQuery(RoundQuery):
    clients: int = Field(default=100, ge=1, le=10_000, description="clients drawn from the fleet's weights, each "
                                                                   "a device of its own")
    rounds: int = Field(default=10, ge=1, le=1000)
    k: int | None = Field(default=None, ge=1, le=10_000,
                          description="clients a round waits for: each round draws ceil(overcommit x k) "
                                      "participants and closes at its k-th finisher (default: every client takes "
                                      "part and the round waits for all that finish)")
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description="the same seed gives the same trace")
    format: TraceFormat = Field(default="json", description="fedscale (FedScale's --device_conf_file, a pickle), "
                                "fedscale_avail (its --device_avail_file, a pickle), oort, flgo, appfl, csv or json")
    oort_threshold: float = Field(default=DEFAULT_OORT_THRESHOLD, gt=0, le=100,
                                  description="oort: the percentile of durations its pacer prefers")

    @model_validator(mode="after")
    def _bounded(self) -> TraceQuery:
        if self.clients * self.rounds > MAX_TRACE_CELLS:
            raise ValueError(f"clients x rounds is at most {MAX_TRACE_CELLS:,} per trace")
        return self


class ClientKindPublic(BaseModel):
    """A device kind's nominal (median device's) round: download + local compute + upload, in seconds."""

    target_id: str
    target_name: str | None = None
    device_kind: DeviceKind = Field(description="consumer, edge or datacenter (from the catalog's data): it chooses "
                                                "the default link and the spreads")
    share: float
    step_ms: float = Field(description="the wall-clock step: the larger of gpu_ms and launch_ms")
    gpu_ms: float = Field(description="the predicted GPU time of a step")
    launch_ms: float = Field(description="the CPU's time to issue the step's ops (understudy/steps.py)")
    step_low_ms: float | None = Field(default=None, description="the step's 80 % interval from the prediction's "
                                                                "error band (null: no band)")
    step_high_ms: float | None = None
    down_mbps: float
    up_mbps: float
    download_s: float
    compute_s: float
    upload_s: float
    nominal_s: float
    sigma: float = Field(description="the lognormal sigma of its round time from round to round")
    compute_sigma: float = Field(description="the lognormal sigma of one device's compute around the kind's")
    link_sigma: float = Field(description="the lognormal sigma of one device's link around the kind's")


class RoundOutcomePublic(BaseModel):
    k: int
    sampled: int = Field(description="clients sampled: ceil(overcommit x K)")
    p_complete: float = Field(description="the chance that K of them finish at all")
    expected_round_s: float | None = Field(description="the expected round time when K finish (null: never)")
    p_deadline: float | None = Field(default=None, description="the chance that K finish by deadline_s")
    expected_finishers: float | None = Field(default=None, description="sampled clients finished by deadline_s")


class DeadlineCurvePublic(BaseModel):
    k: int
    deadline_s: list[float]
    p_complete: list[float] = Field(description="the chance that K finish by each deadline")


class PopulationRoundsPublic(BaseModel):
    """A population's FL rounds under the round model (understudy/rounds.py)."""

    population_id: str
    local_steps: int
    batch_size: int
    update_bytes: float
    config: RoundConfig
    deadline_s: float | None = None
    kinds: list[ClientKindPublic]
    rounds: list[RoundOutcomePublic]
    deadline_curves: list[DeadlineCurvePublic]


# --- calibrations (POST /v1/targets/{id}/calibrations) -----------------------------------------------------------


def _not_calibrated_itself(value: str | None) -> str | None:
    if value == CALIBRATED_ESTIMATOR:
        raise ValueError("the base estimator is the one the calibration corrects; it cannot be 'calibrated' itself")
    return value


class CalibrationPointCreate(BaseModel):
    """One measurement as a request gives it."""

    model_config = ConfigDict(extra="forbid")

    workload: Workload
    measured_ms: MeasuredMs
    measured_on: CatalogTarget | None = Field(
        default=None,
        description="a catalog target this point was measured on, when not the calibrated one: its residual there "
                    "carries to predictions of the same workload here")

    def point(self) -> CalibrationPoint:
        return CalibrationPoint(workload=self.workload, measured_ms=self.measured_ms, measured_on=self.measured_on)


class CalibrationCreate(BaseModel):
    """A few real measurements of one target: workloads and their measured step times."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{
            "points": [{"workload": {"model": "resnet50", "mode": "train", "batch_size": 64}, "measured_ms": 182.0},
                       {"workload": {"model": "vit_base_patch16_224", "mode": "infer", "batch_size": 32},
                        "measured_ms": 41.5}],
            "base_estimator": "analytic"}]},
    )

    points: list[CalibrationPointCreate] = Field(
        min_length=1, max_length=MAX_CALIBRATION_POINTS,
        description="measured step times of workloads on this target (the minimum over timed windows, in ms)",
    )
    base_estimator: Annotated[EstimatorName | None, AfterValidator(_not_calibrated_itself)] = Field(
        default=None,
        description="the estimator the correction is fitted to; default: hostaware when a GPU worker is registered, "
                    "otherwise analytic",
    )


class CalibrationPublic(BaseModel):
    id: str
    target_id: str
    base_estimator: str
    k: int = Field(description="how many points")
    digest: str = Field(description="the points' sha256; the calibrated estimator's version is made from it")
    points: list[dict[str, Any]]
    created_at: datetime


class CalibrationsPublic(BaseModel):
    data: list[CalibrationPublic] = Field(description="latest first; predictions use the latest")
    count: int


def calibration_public(row: Calibration) -> CalibrationPublic:
    points = list((row.points or {}).get("points") or [])
    return CalibrationPublic(id=row.id, target_id=row.target_id, base_estimator=row.base_estimator, k=len(points),
                             digest=str((row.parameters or {}).get("digest", "")), points=points,
                             created_at=row.created_at)


# --- API keys (admin) -------------------------------------------------------------------------------------------


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=120, description="who or what uses the key")
    admin: bool = Field(default=False, description="an admin key sees every owner's rows and manages keys")


class ApiKeyPublic(BaseModel):
    id: str
    name: str
    prefix: str = Field(description="the token's first characters, to recognise it by")
    admin: bool
    created_at: datetime
    revoked_at: datetime | None = None


class ApiKeyCreatedPublic(ApiKeyPublic):
    token: str = Field(description="the key itself, shown only in this answer: send it as X-API-Key")


class ApiKeysPublic(BaseModel):
    data: list[ApiKeyPublic]
    count: int
