"""A Python client for the Understudy service (httpx): predictions, the history, the catalog and populations.

    from client import Client

    with Client("http://127.0.0.1:8000", api_key="us_...") as client:
        done = client.predict({"model": "resnet50", "batch_size": 64}, ["rtx-3090", "t4"], estimator="analytic")
        for prediction in done.data:
            print(prediction.target_id, prediction.status, prediction.latency_ms, prediction.interval_ms,
                  prediction.memory.verdict if prediction.memory else None)

`AsyncClient` has the same methods, as coroutines. `predict` and `population` wait for their results by default,
polling with a growing interval (Backoff) until `timeout` seconds have passed, when they raise `WaitTimeout`. An
error the server answers becomes an exception carrying its reason: a 422 raises `InvalidRequest`, whose message and
`fields` name the offending field ("workload.batch_size: Input should be greater than or equal to 1").

A prediction's `interval_ms` is where the measured step time should fall for `coverage` of workloads (0.8 unless
`coverage=` asks for another, from 0.5 to 0.95), and its `memory` whether the workload fits the target's memory
(fits, tight or oom).

A prediction that waits for a GPU measurement is first answered without a GPU: its status is `estimated` and its
numbers are the estimate's (`answer == "estimate"`) until the measured ones replace them (`answer == "final"`; the
estimate stays in `estimate`). Waiting returns final answers only; to see the estimate first, pass
`on_update=callback` (called with each prediction as first seen and again at each change of status while waiting),
or take `predict(..., wait=False)` as it is and poll `prediction(id)`:

    client.predict(workload, ["rtx-3090"], on_update=lambda p: print(p.status, p.answer, p.latency_ms))

The base URL and the key default to UNDERSTUDY_URL (else http://127.0.0.1:8000) and UNDERSTUDY_API_KEY. Nothing
here imports torch, the server or the database.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from understudy.errors import UnderstudyError
from understudy.populations import PopulationSummary
from understudy.results import Status

DEFAULT_URL = "http://127.0.0.1:8000"
FINAL_POPULATION = ("done", "failed")

# --- results (lenient: fields the server adds later are ignored) ------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", protected_namespaces=())


class Latency(_Model):
    min_ms: float | None = None
    median_ms: float | None = None
    spread_ms: float | None = None


class HostSetting(_Model):
    sm_count: int | None = None
    sm_mechanism: str = "none"
    clock_mhz: float | None = None
    clock_mode: str = "none"
    memory_cap_gb: float | None = None
    profile: bool = False
    summary: str | None = None


class Band(_Model):
    """The error band a prediction's interval is drawn from."""

    model: str
    basis: str
    multipliers: tuple[float, float]


class Memory(_Model):
    """Whether the workload fits the target's memory: fits, tight (it may or may not) or oom."""

    verdict: Literal["fits", "tight", "oom"]
    peak_gb: float
    low_gb: float
    high_gb: float
    capacity_gb: float
    parts_gb: dict[str, float] = Field(default_factory=dict)
    summary: str | None = None


class Estimate(_Model):
    """The GPU-free estimate of a prediction that waits (or waited) for its GPU measurement."""

    estimator: str
    estimator_version: str
    status: Literal["done", "oom"]
    latency_ms: float | None = None
    interval_ms: tuple[float, float] | None = Field(default=None, description="[low, high] ms at coverage")
    coverage: float | None = None
    band: Band | None = None
    samples_per_s: float | None = None
    memory: Memory | None = None


class PredictionHost(_Model):
    host_class: str
    fingerprint: str | None = None
    gpu_name: str | None = None
    worker: str | None = None


class Prediction(_Model):
    """One prediction: a workload on one target by one estimator."""

    id: str
    request_id: str | None = None
    status: Status
    answer: Literal["estimate", "final"] | None = Field(default=None, description="which answer the numbers are")
    estimate: Estimate | None = None
    cached: bool = False
    model: str
    workload: dict[str, Any]
    workload_digest: str | None = None
    target_id: str
    target_name: str | None = None
    estimator: str
    estimator_version: str
    latency: Latency | None = None
    interval_ms: tuple[float, float] | None = Field(default=None, description="[low, high] ms at coverage")
    coverage: float | None = None
    band: Band | None = None
    memory: Memory | None = None
    samples_per_s: float | None = None
    host_setting: HostSetting | None = None
    timing_mode: str | None = None
    host: PredictionHost
    error: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    attempts: int = 0
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def final(self) -> bool:
        return self.status.final

    @property
    def estimated(self) -> bool:
        """Whether the numbers are the GPU-free estimate, shown while the measurement is awaited."""
        return self.status == Status.estimated

    @property
    def latency_ms(self) -> float | None:
        """The predicted step time (the minimum over timed windows): the estimate's while estimated; None unless
        done or estimated."""
        return self.latency.min_ms if self.latency else None


class PredictionRequest(_Model):
    """The predictions of one POST, one per target in the order given."""

    request_id: str
    cached: bool = False
    data: list[Prediction]
    count: int

    @property
    def final(self) -> bool:
        return all(prediction.final for prediction in self.data)

    @property
    def by_target(self) -> dict[str, Prediction]:
        return {prediction.target_id: prediction for prediction in self.data}


class PredictionPage(_Model):
    data: list[Prediction]
    count: int = Field(description="rows matching the filters, over all pages")


class Target(_Model):
    id: str
    name: str
    architecture: str = "unknown"
    compute_capability: str = ""
    sm_count: int
    boost_clock_mhz: float
    memory_size_gb: float
    memory_bandwidth_gbps: float
    l2_cache_mb: float | None = None
    fp32_tflops: float | None = None
    fp16_tensor_tflops: float | None = None
    bf16_tensor_tflops: float | None = None
    tf32_tensor_tflops: float | None = None
    sustained_clock_mhz: float | None = None
    source: str | None = None
    tensor_source: str | None = None
    origin: str = "catalog"


class Host(_Model):
    id: str
    host_class: str
    gpu_name: str | None = None
    fingerprint: str
    last_heartbeat: datetime
    alive: bool
    queue_depth: int | None = None
    queues: dict[str, int] | None = None
    info: dict[str, Any] = Field(default_factory=dict)


class PopulationDevice(_Model):
    target_id: str
    target_name: str | None = None
    weight: float
    share: float
    prediction_id: str
    status: Status
    answer: Literal["estimate", "final"] | None = None
    latency_ms: float | None = None
    spread_ms: float | None = None
    host_setting: str | None = None
    calibration_id: str | None = None
    error: str | None = None


class Population(_Model):
    """A workload over a weighted device population; `summary` once every prediction is final, and a provisional
    one while status is estimated (every device not final yet has a GPU-free estimate)."""

    id: str
    status: Literal["queued", "running", "estimated", "done", "failed"]
    workload: dict[str, Any]
    workload_digest: str
    model: str
    estimator: str
    weighting: str
    k: list[int]
    slowest: int
    measurements: list[dict[str, Any]] = Field(default_factory=list)
    devices: list[PopulationDevice]
    summary: PopulationSummary | None = None
    error: str | None = None
    created_at: datetime
    finished_at: datetime | None = None

    @property
    def final(self) -> bool:
        return self.status in FINAL_POPULATION

    def expected_round_ms(self, k: int) -> float | None:
        """The expected round time with k clients, if the server computed it for that k."""
        for item in self.summary.round_time if self.summary else []:
            if item.k == k:
                return item.expected_max_ms
        return None


class RoundKind(_Model):
    """A device kind's nominal (median device's) round: download + local compute + upload, in seconds; the step is
    wall-clock (the GPU time or the CPU's issuing, whichever is longer), with the 80 % interval of the prediction's
    error band."""

    target_id: str
    target_name: str | None = None
    device_kind: str
    share: float
    step_ms: float
    gpu_ms: float
    launch_ms: float
    step_low_ms: float | None = None
    step_high_ms: float | None = None
    down_mbps: float
    up_mbps: float
    download_s: float
    compute_s: float
    upload_s: float
    nominal_s: float
    sigma: float
    compute_sigma: float
    link_sigma: float


class RoundOutcome(_Model):
    k: int
    sampled: int
    p_complete: float
    expected_round_s: float | None = None
    p_deadline: float | None = None
    expected_finishers: float | None = None


class DeadlineCurve(_Model):
    k: int
    deadline_s: list[float]
    p_complete: list[float]


class PopulationRounds(_Model):
    """A population's FL rounds under the round model (understudy/rounds.py)."""

    population_id: str
    local_steps: int
    batch_size: int
    update_bytes: float
    config: dict[str, Any]
    deadline_s: float | None = None
    kinds: list[RoundKind]
    rounds: list[RoundOutcome]
    deadline_curves: list[DeadlineCurve]

    def outcome(self, k: int) -> RoundOutcome | None:
        return next((item for item in self.rounds if item.k == k), None)


# --- errors -----------------------------------------------------------------------------------------------------


class ClientError(UnderstudyError):
    """Anything this client raises."""


@dataclass(frozen=True)
class FieldProblem:
    field: str
    reason: str


class ApiError(ClientError):
    """The service answered with an error; `detail` is its reason, `errors` the fields it names (422)."""

    status_code: int = 0

    def __init__(self, status_code: int, detail: str, errors: Sequence[FieldProblem] = (),
                 retry_after_s: float | None = None) -> None:
        super().__init__(f"{status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail
        self.errors = list(errors)
        self.retry_after_s = retry_after_s

    @property
    def fields(self) -> list[str]:
        return [problem.field for problem in self.errors]


class InvalidRequest(ApiError):
    """422: a field is invalid; the message and `fields` name it."""


class Unauthorized(ApiError):
    """401: no API key, or one the service does not know."""


class NotFound(ApiError):
    """404."""


class Conflict(ApiError):
    """409: e.g. a GPU estimator with no GPU worker registered."""


class PayloadTooLarge(ApiError):
    """413: the request body is over the service's limit."""


class RateLimited(ApiError):
    """429: too many writes; `retry_after_s` says when to try again."""


class ServiceUnavailable(ApiError):
    """502/503/504: the service, its database or its queue is down for now."""


class ConnectionFailed(ClientError):
    """The service could not be reached at all."""


class WaitTimeout(ClientError, TimeoutError):
    """The results were not final within the time given; `last` holds what was seen last."""

    def __init__(self, message: str, last: Any = None) -> None:
        super().__init__(message)
        self.last = last


_ERRORS: dict[int, type[ApiError]] = {401: Unauthorized, 404: NotFound, 409: Conflict, 413: PayloadTooLarge,
                                      422: InvalidRequest, 429: RateLimited, 502: ServiceUnavailable,
                                      503: ServiceUnavailable, 504: ServiceUnavailable}
# Worth another try while waiting for results: the service is busy or briefly unreachable.
_TRANSIENT = (RateLimited, ServiceUnavailable, ConnectionFailed)


def error_from(response: httpx.Response) -> ApiError:
    """The exception for an error answer, with the server's reason and the fields it names."""
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if not isinstance(detail, str):
        detail = response.text.strip()[:500] or response.reason_phrase
    problems = []
    if isinstance(body, dict) and isinstance(body.get("errors"), list):
        problems = [FieldProblem(str(item.get("field", "")), str(item.get("reason", "")))
                    for item in body["errors"] if isinstance(item, dict)]
    retry_after = None
    if response.headers.get("Retry-After", "").isdigit():
        retry_after = float(response.headers["Retry-After"])
    cls = _ERRORS.get(response.status_code, ServiceUnavailable if response.status_code >= 502 else ApiError)
    return cls(response.status_code, detail, problems, retry_after)


# --- polling ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backoff:
    """Poll after initial_s, then each interval `factor` times the last, up to max_s."""

    initial_s: float = 0.1
    factor: float = 1.6
    max_s: float = 2.0

    def delays(self) -> Iterator[float]:
        delay = self.initial_s
        while True:
            yield delay
            delay = min(self.max_s, delay * self.factor)


class _Poll:
    """One wait for final results, shared by both clients: its deadline, its growing delays and the server's
    Retry-After hint after a transient error. What is polled stays with the caller; the predictions' bookkeeping
    (which are pending, the request as last seen) is here because both clients keep it the same way."""

    def __init__(self, backoff: Backoff, deadline: float, timeout: float,
                 on_update: Callable[[Prediction], None] | None = None) -> None:
        self.deadline = deadline
        self.timeout = timeout
        self.on_update = on_update
        self._delays = backoff.delays()
        self._hint: float | None = None

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def next_sleep_s(self) -> float:
        """How long to sleep before the next poll: the next delay, or longer if the server asked, never past the
        deadline."""
        hint, self._hint = self._hint, None
        return max(0.0, min(max(next(self._delays), hint or 0.0), self.deadline - time.monotonic()))

    def transient(self, error: BaseException) -> None:
        """A poll failed in a way worth retrying: wait at least as long as the server asked before the next."""
        self._hint = getattr(error, "retry_after_s", None)

    def first_seen(self, request: PredictionRequest) -> dict[str, Prediction]:
        """The request's predictions by id, each told to on_update."""
        current: dict[str, Prediction] = {}
        for prediction in request.data:
            if prediction.id not in current:
                self.seen(current, prediction)
        return current

    def seen(self, current: dict[str, Prediction], prediction: Prediction) -> None:
        """Keep a prediction as polled; tell on_update when it is new or its status changed (queued, estimated,
        then final)."""
        before = current.get(prediction.id)
        current[prediction.id] = prediction
        if self.on_update is not None and (before is None or before.status != prediction.status):
            self.on_update(prediction)

    def pending_predictions(self, request: PredictionRequest, current: dict[str, Prediction]) -> list[str]:
        """The ids of the predictions not final yet; raises WaitTimeout once the deadline has passed with any."""
        pending = [pid for pid, prediction in current.items() if not prediction.final]
        if pending and self.expired():
            raise WaitTimeout(f"{len(pending)} of {len(current)} prediction(s) not final after {self.timeout:g} s "
                              f"(pending: {', '.join(pending)})", _as_seen(request, current))
        return pending

    def check_population(self, population: Population) -> None:
        if not population.final and self.expired():
            raise WaitTimeout(f"population {population.id} is still {population.status} after {self.timeout:g} s",
                              population)


def _as_seen(request: PredictionRequest, current: dict[str, Prediction]) -> PredictionRequest:
    return request.model_copy(update={"data": [current[prediction.id] for prediction in request.data]})


# --- request bodies ---------------------------------------------------------------------------------------------

def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        canonical = getattr(value, "canonical", None)
        return canonical() if callable(canonical) else value.model_dump(mode="json", exclude_none=True)
    return value


def _target(value: Any) -> Any:
    """A target as the API takes it: a catalog id or name, or an inline spec (from a dict, an InlineTarget, a
    TargetSpec or a Target this client returned)."""
    if isinstance(value, (str, Mapping)):
        return value
    if getattr(value, "origin", None) == "catalog" and getattr(value, "id", None):
        return value.id
    if isinstance(value, BaseModel):
        from understudy.catalog import InlineTarget

        data = value.model_dump(mode="json", exclude_none=True)
        return {key: item for key, item in data.items() if key in InlineTarget.model_fields}
    return value


def prediction_body(workload: Any, targets: Sequence[Any] | str, estimator: str | None,
                    host: str | None, coverage: float | None = None) -> dict[str, Any]:
    if isinstance(targets, (str, Mapping, BaseModel)):
        targets = [targets]
    body: dict[str, Any] = {"workload": _dump(workload), "targets": [_target(target) for target in targets]}
    if estimator is not None:
        body["estimator"] = estimator
    if host is not None:
        body["host"] = host
    if coverage is not None:
        body["coverage"] = coverage
    return body


Measurements = Sequence[Mapping[str, Any]] | Mapping[str, float]


def population_body(workload: Any, devices: Sequence[Mapping[str, Any]] | Mapping[str, float], k: int | Sequence[int],
                    estimator: str | None, host: str | None, slowest: int,
                    measurements: Measurements | None = None) -> dict[str, Any]:
    """devices: [{"target": ..., "count": n} or {"target": ..., "weight": w}], or {target id: amount} where whole
    numbers mean counts and any fraction makes them all weights. measurements: [{"target", "measured_ms",
    optionally "workload"}], or {catalog target: measured ms} of the population's workload."""
    if isinstance(devices, Mapping):
        as_counts = all(isinstance(v, int) and not isinstance(v, bool) for v in devices.values())
        items = [{"target": target, ("count" if as_counts else "weight"): amount}
                 for target, amount in devices.items()]
    else:
        items = [{**device, "target": _target(device["target"])} if "target" in device else dict(device)
                 for device in devices]
    body: dict[str, Any] = {"workload": _dump(workload), "devices": items,
                            "k": [k] if isinstance(k, int) else list(k), "slowest": slowest}
    if estimator is not None:
        body["estimator"] = estimator
    if host is not None:
        body["host"] = host
    if measurements:
        body["measurements"] = ([{"target": target, "measured_ms": ms} for target, ms in measurements.items()]
                                if isinstance(measurements, Mapping)
                                else [{**m, **({"workload": _dump(m["workload"])} if "workload" in m else {})}
                                      for m in measurements])
    return body


def _params(**values: Any) -> dict[str, Any]:
    out = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, datetime):
            value = value.isoformat()
        out["status" if key == "status_" else key] = value
    return out


def round_params(config: Any) -> dict[str, Any]:
    """A RoundConfig (or a dict of its fields) as the query parameters of /rounds and /trace: links become
    link=KEY=DOWN/UP."""
    if config is None:
        return {}
    data = config.model_dump(mode="json", exclude_none=True) if isinstance(config, BaseModel) else dict(config)
    links = data.pop("links", None) or {}
    out = {key: value for key, value in data.items() if value is not None}
    if links:
        out["link"] = [f"{key}={_rate(link, 'down_mbps')}/{_rate(link, 'up_mbps')}" for key, link in links.items()]
    return out


def trace_params(format: str, clients: int, rounds: int, seed: int, k: int | None, config: Any) -> dict[str, Any]:
    """The query parameters of /trace."""
    return _params(**round_params(config), format=format, clients=clients, rounds=rounds, seed=seed, k=k)


def _rate(link: Any, name: str) -> float:
    return float(link[name] if isinstance(link, Mapping) else getattr(link, name))


class _Base:
    def __init__(self, base_url: str | None, api_key: str | None, timeout_s: float, backoff: Backoff | None,
                 headers: Mapping[str, str] | None) -> None:
        self.base_url = (base_url or os.environ.get("UNDERSTUDY_URL") or DEFAULT_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("UNDERSTUDY_API_KEY")
        self.timeout_s = timeout_s
        self.backoff = backoff or Backoff()
        self.headers = {"Accept": "application/json", "User-Agent": "understudy-client/0.1", **(headers or {})}
        if self.api_key:
            self.headers["X-API-Key"] = self.api_key

    def _timeout(self, deadline: float | None) -> float:
        if deadline is None:
            return self.timeout_s
        return max(0.5, min(self.timeout_s, deadline - time.monotonic()))

    @staticmethod
    def _answer(response: httpx.Response, raw: bool = False) -> Any:
        """The answer's JSON, or its bytes with raw (a trace file)."""
        if response.is_error:
            raise error_from(response)
        return response.content if raw else response.json()


# --- the synchronous client -------------------------------------------------------------------------------------


class Client(_Base):
    """The service over HTTP, blocking. Use as a context manager, or call close()."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *, timeout_s: float = 30.0,
                 backoff: Backoff | None = None, headers: Mapping[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(base_url, api_key, timeout_s, backoff, headers)
        self._http = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout_s,
                                  transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None,
                 deadline: float | None = None, raw: bool = False) -> Any:
        try:
            response = self._http.request(method, path, json=json, params=params, timeout=self._timeout(deadline))
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"cannot reach the service at {self.base_url}: {exc}") from exc
        return self._answer(response, raw)

    # predictions

    def predict(self, workload: Any, targets: Sequence[Any] | str, estimator: str | None = None, *,
                host: str | None = None, wait: bool = True, timeout: float = 600.0,
                coverage: float | None = None,
                on_update: Callable[[Prediction], None] | None = None) -> PredictionRequest:
        """Predict the workload's step time on each target; with wait, poll until every prediction is final (an
        estimate is not). `coverage`: the share of measured times each interval_ms is to hold (the service's
        default: 0.8). `on_update`: called while waiting with each prediction as first seen and again whenever its
        status changes, so an estimate is seen before the final answer."""
        deadline = time.monotonic() + timeout
        body = prediction_body(workload, targets, estimator, host, coverage)
        created = PredictionRequest.model_validate(self._request("POST", "/v1/predictions", json=body,
                                                                 deadline=deadline))
        if not wait:
            return created
        return self._wait_predictions(created, deadline, timeout, coverage, on_update)

    def wait(self, request: PredictionRequest, timeout: float = 600.0, coverage: float | None = None,
             on_update: Callable[[Prediction], None] | None = None) -> PredictionRequest:
        """Poll a request's predictions until all are final (on_update: as in predict)."""
        return self._wait_predictions(request, time.monotonic() + timeout, timeout, coverage, on_update)

    def _wait_predictions(self, request: PredictionRequest, deadline: float, timeout: float,
                          coverage: float | None,
                          on_update: Callable[[Prediction], None] | None = None) -> PredictionRequest:
        poll = _Poll(self.backoff, deadline, timeout, on_update)
        current = poll.first_seen(request)
        while pending := poll.pending_predictions(request, current):
            time.sleep(poll.next_sleep_s())
            for pid in pending:
                try:
                    poll.seen(current, self.prediction(pid, coverage=coverage, _deadline=deadline))
                except _TRANSIENT as exc:
                    poll.transient(exc)
                    break
        return _as_seen(request, current)

    def prediction(self, prediction_id: str, *, coverage: float | None = None,
                   _deadline: float | None = None) -> Prediction:
        return Prediction.model_validate(self._request("GET", f"/v1/predictions/{prediction_id}",
                                                       params=_params(coverage=coverage), deadline=_deadline))

    def history(self, *, model: str | None = None, target: str | None = None, host: str | None = None,
                estimator: str | None = None, status: str | None = None, since: datetime | None = None,
                until: datetime | None = None, workload: str | None = None, request_id: str | None = None,
                q: str | None = None, sort: str | None = None, order: str | None = None, skip: int = 0,
                limit: int = 100, coverage: float | None = None) -> PredictionPage:
        """The history, newest first unless sorted otherwise; `workload` is a workload digest, `q` a search."""
        params = _params(model=model, target=target, host=host, estimator=estimator, status_=status, since=since,
                         until=until, workload=workload, request_id=request_id, q=q, sort=sort, order=order,
                         skip=skip, limit=limit, coverage=coverage)
        return PredictionPage.model_validate(self._request("GET", "/v1/predictions", params=params))

    # the catalog and the workers

    def targets(self) -> list[Target]:
        return [Target.model_validate(item) for item in self._request("GET", "/v1/targets")["data"]]

    def target(self, target_id: str) -> Target:
        return Target.model_validate(self._request("GET", f"/v1/targets/{target_id}"))

    def hosts(self) -> list[Host]:
        return [Host.model_validate(item) for item in self._request("GET", "/v1/hosts")["data"]]

    # populations

    def population(self, workload: Any, devices: Sequence[Mapping[str, Any]] | Mapping[str, float], *,
                   k: int | Sequence[int] = (10,), estimator: str | None = None, host: str | None = None,
                   slowest: int = 5, measurements: Measurements | None = None, wait: bool = True,
                   timeout: float = 600.0) -> Population:
        """Summarise the workload over a device population; with wait, poll until the summary is there. With
        measurements (step times measured on catalog GPUs), every device is predicted calibrated by them, over
        `estimator` as the base."""
        deadline = time.monotonic() + timeout
        body = population_body(workload, devices, k, estimator, host, slowest, measurements)
        created = Population.model_validate(self._request("POST", "/v1/populations", json=body, deadline=deadline))
        if not wait or created.final:
            return created
        poll = _Poll(self.backoff, deadline, timeout)
        current = created
        while not current.final:
            poll.check_population(current)
            time.sleep(poll.next_sleep_s())
            try:
                current = self.get_population(created.id, _deadline=deadline)
            except _TRANSIENT as exc:
                poll.transient(exc)
        return current

    def get_population(self, population_id: str, *, _deadline: float | None = None) -> Population:
        return Population.model_validate(self._request("GET", f"/v1/populations/{population_id}",
                                                       deadline=_deadline))

    def population_rounds(self, population_id: str, *, k: int | Sequence[int] = (10,), deadline_s: float | None = None,
                          config: Any = None) -> PopulationRounds:
        """The population's FL rounds for each K (config: a RoundConfig or a dict of its fields)."""
        params = {**round_params(config), "k": [k] if isinstance(k, int) else list(k), "deadline_s": deadline_s}
        return PopulationRounds.model_validate(self._request("GET", f"/v1/populations/{population_id}/rounds",
                                                             params=_params(**params)))

    def population_trace(self, population_id: str, *, format: str = "json", clients: int = 100, rounds: int = 10,
                         seed: int = 0, k: int | None = None, config: Any = None) -> bytes:
        """A trace file for an FL simulator (format: fedscale, fedscale_avail, oort, flgo, appfl, csv or json), as
        bytes; with k, each round draws ceil(overcommit x k) participants and closes at its k-th finisher."""
        return self._request("GET", f"/v1/populations/{population_id}/trace",
                             params=trace_params(format, clients, rounds, seed, k, config), raw=True)


# --- the asynchronous client ------------------------------------------------------------------------------------


class AsyncClient(_Base):
    """The service over HTTP, for asyncio. Use as an async context manager, or await aclose()."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *, timeout_s: float = 30.0,
                 backoff: Backoff | None = None, headers: Mapping[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(base_url, api_key, timeout_s, backoff, headers)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=self.headers, timeout=timeout_s,
                                       transport=transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None,
                       deadline: float | None = None, raw: bool = False) -> Any:
        try:
            response = await self._http.request(method, path, json=json, params=params,
                                                timeout=self._timeout(deadline))
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"cannot reach the service at {self.base_url}: {exc}") from exc
        return self._answer(response, raw)

    async def predict(self, workload: Any, targets: Sequence[Any] | str, estimator: str | None = None, *,
                      host: str | None = None, wait: bool = True, timeout: float = 600.0,
                      coverage: float | None = None,
                      on_update: Callable[[Prediction], None] | None = None) -> PredictionRequest:
        """Predict the workload's step time on each target; with wait, poll until every prediction is final
        (on_update: as in Client.predict)."""
        deadline = time.monotonic() + timeout
        body = prediction_body(workload, targets, estimator, host, coverage)
        created = PredictionRequest.model_validate(await self._request("POST", "/v1/predictions", json=body,
                                                                       deadline=deadline))
        if not wait:
            return created
        return await self._wait_predictions(created, deadline, timeout, coverage, on_update)

    async def wait(self, request: PredictionRequest, timeout: float = 600.0, coverage: float | None = None,
                   on_update: Callable[[Prediction], None] | None = None) -> PredictionRequest:
        return await self._wait_predictions(request, time.monotonic() + timeout, timeout, coverage, on_update)

    async def _wait_predictions(self, request: PredictionRequest, deadline: float, timeout: float,
                                coverage: float | None,
                                on_update: Callable[[Prediction], None] | None = None) -> PredictionRequest:
        poll = _Poll(self.backoff, deadline, timeout, on_update)
        current = poll.first_seen(request)
        while pending := poll.pending_predictions(request, current):
            await asyncio.sleep(poll.next_sleep_s())
            answers = await asyncio.gather(*(self.prediction(pid, coverage=coverage, _deadline=deadline)
                                             for pid in pending), return_exceptions=True)
            for answer in answers:
                if isinstance(answer, Prediction):
                    poll.seen(current, answer)
                elif isinstance(answer, _TRANSIENT):
                    poll.transient(answer)
                elif isinstance(answer, BaseException):
                    raise answer
        return _as_seen(request, current)

    async def prediction(self, prediction_id: str, *, coverage: float | None = None,
                         _deadline: float | None = None) -> Prediction:
        return Prediction.model_validate(await self._request("GET", f"/v1/predictions/{prediction_id}",
                                                             params=_params(coverage=coverage), deadline=_deadline))

    async def history(self, *, model: str | None = None, target: str | None = None, host: str | None = None,
                      estimator: str | None = None, status: str | None = None, since: datetime | None = None,
                      until: datetime | None = None, workload: str | None = None, request_id: str | None = None,
                      q: str | None = None, sort: str | None = None, order: str | None = None, skip: int = 0,
                      limit: int = 100, coverage: float | None = None) -> PredictionPage:
        params = _params(model=model, target=target, host=host, estimator=estimator, status_=status, since=since,
                         until=until, workload=workload, request_id=request_id, q=q, sort=sort, order=order,
                         skip=skip, limit=limit, coverage=coverage)
        return PredictionPage.model_validate(await self._request("GET", "/v1/predictions", params=params))

    async def targets(self) -> list[Target]:
        return [Target.model_validate(item) for item in (await self._request("GET", "/v1/targets"))["data"]]

    async def target(self, target_id: str) -> Target:
        return Target.model_validate(await self._request("GET", f"/v1/targets/{target_id}"))

    async def hosts(self) -> list[Host]:
        return [Host.model_validate(item) for item in (await self._request("GET", "/v1/hosts"))["data"]]

    async def population(self, workload: Any, devices: Sequence[Mapping[str, Any]] | Mapping[str, float], *,
                         k: int | Sequence[int] = (10,), estimator: str | None = None, host: str | None = None,
                         slowest: int = 5, measurements: Measurements | None = None, wait: bool = True,
                         timeout: float = 600.0) -> Population:
        deadline = time.monotonic() + timeout
        body = population_body(workload, devices, k, estimator, host, slowest, measurements)
        created = Population.model_validate(await self._request("POST", "/v1/populations", json=body,
                                                                deadline=deadline))
        if not wait or created.final:
            return created
        poll = _Poll(self.backoff, deadline, timeout)
        current = created
        while not current.final:
            poll.check_population(current)
            await asyncio.sleep(poll.next_sleep_s())
            try:
                current = await self.get_population(created.id, _deadline=deadline)
            except _TRANSIENT as exc:
                poll.transient(exc)
        return current

    async def get_population(self, population_id: str, *, _deadline: float | None = None) -> Population:
        return Population.model_validate(await self._request("GET", f"/v1/populations/{population_id}",
                                                             deadline=_deadline))

    async def population_rounds(self, population_id: str, *, k: int | Sequence[int] = (10,),
                                deadline_s: float | None = None, config: Any = None) -> PopulationRounds:
        params = {**round_params(config), "k": [k] if isinstance(k, int) else list(k), "deadline_s": deadline_s}
        return PopulationRounds.model_validate(await self._request(
            "GET", f"/v1/populations/{population_id}/rounds", params=_params(**params)))

    async def population_trace(self, population_id: str, *, format: str = "json", clients: int = 100,
                               rounds: int = 10, seed: int = 0, k: int | None = None, config: Any = None) -> bytes:
        return await self._request("GET", f"/v1/populations/{population_id}/trace",
                                   params=trace_params(format, clients, rounds, seed, k, config), raw=True)


__all__ = [
    "ApiError", "AsyncClient", "Backoff", "Band", "Client", "ClientError", "Conflict", "ConnectionFailed", "Estimate",
    "FieldProblem", "Host", "InvalidRequest", "Latency", "Memory", "NotFound", "PayloadTooLarge", "Population",
    "PopulationDevice", "PopulationRounds", "Prediction", "PredictionPage", "PredictionRequest", "RateLimited",
    "ServiceUnavailable", "Target", "Unauthorized", "WaitTimeout",
]
