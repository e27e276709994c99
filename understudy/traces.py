"""Per-client FL traces from the round model, in the formats FL simulators read as they are.

`sample_trace` draws N clients from the fleet's weights, each a device of its own: its compute and link factors
(understudy/steps.py, understudy/links.py) around its kind's nominal times. Then, for R rounds, which clients take part
(every client, or ceil(overcommit x K) of them drawn at random when the trace is for K clients a round), whether each
is available, whether it drops out, and its lognormal factor for the round (understudy/rounds.py). A client's times
in a round are its nominal download, compute and upload times, each times that round's factor. A round closes when
K of its participants have finished (every participant that finishes, without K); with fewer, at its last finisher,
as FedScale's aggregator closes it. One seed gives the same trace.

Each client carries its step's error band (understudy/bands.py, on the predicted GPU time; the CPU's issuing as it
is): the step's interval at 80 % and the lognormal sigma whose 80 % interval that is, for a simulator that
samples a step.

The formats, each read by the tool's own code in tests/rounds/test_frameworks.py:

- `fedscale`: FedScale's device-capacity pickle, `{client_id: {"computation": ms per sample, "communication": kbps}}`
  (--device_conf_file). FedScale's ClientMetadata computes a round as computation = 3 x batch x local steps x ms per
  sample / 1000 and communication = (upload + download kbits) / kbps, with the update's size in kbits as bytes x 8 /
  1024; the values here make both equal the client's nominal times. FedScale maps its client i to the profile with
  key i mod N, so the keys are 0..N-1. A FedScale profile is fixed: its rounds are the trace's nominal rounds.
- `fedscale_avail`: FedScale's availability pickle (--device_avail_file), `{client_id: {"duration", "inactive",
  "finish_time", "active", "model"}}`: each client is online over the rounds it is available for and does not drop
  out of, on the trace's own clock of nominal rounds (FedScale's ClientMetadata.is_active; a client offline when it
  would complete is lost to the round, so one that drops out of a round is offline for it). A FedScale run that
  samples the trace's participants keeps in step with that clock; one that samples others drifts from it; times past
  its end wrap around, as FedScale's own behaviour trace does.
- `oort`: Oort's training selector's feedbacks: per client `{"client_id", "reward", "duration"}` to register it with
  (FedScale's registration reward: the samples of a round), and per round only the participants that finished, each
  with the statistical utility FedScale passes as its reward (results["utility"] = trained samples x sqrt(mean
  per-sample loss^2), at the loss of an untrained model over the workload's classes, ln(classes): the trace knows
  devices, not data), its duration, the round's time stamp and status; with `round_prefer_duration` at Oort's
  `round_threshold` percentile. Durations in seconds; client ids are integers, as Oort's getTopK compares them.
- `flgo`: FLGo's simulator variables per client (`prob_available`, `prob_unavailable`, `prob_drop`, `capacity`; FLGo
  keeps its own `num_steps`) and, per round, the participants, who is available and who drops out, each client's
  `latency` in whole time units (ms) and `tolerance_for_latency`, the round's closing time: FLGo's synchronous
  server waits that long for a round with a dropped or overdue client, which is when the trace's round closes.
  examples/flgo_trace_simulator.py replays it as an FLGo Simulator.
- `appfl`: APPFL vsim's ClientProfile per client (`compute_factor`, `bandwidth` in Mbps: `ClientProfile(**entry)`)
  against `base_step_time` (the driver's fixed step in seconds), with `num_local_steps` and `model_bytes`; per round,
  the profiles of the participants that finish (APPFL's vsim models neither availability nor dropout) with the
  round's factor in both, and `min_responses`, the clients the round waits for.
- `csv` and `json`: every client's times in every round, with its device, band, availability and dropout.
"""

from __future__ import annotations

import csv
import io
import json
import math
import pickle
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from understudy.rounds import ClientKind, RoundModel

TraceFormat = Literal["fedscale", "fedscale_avail", "oort", "flgo", "appfl", "csv", "json"]
TRACE_FORMATS: tuple[str, ...] = ("fedscale", "fedscale_avail", "oort", "flgo", "appfl", "csv", "json")
# FedScale's model_update_size: bytes / 1024 x 8 ("kbits", aggregator.py).
_FEDSCALE_KBITS_PER_BYTE = 8 / 1024
# FedScale's augmentation_factor: a training step is taken as 3 x a forward pass per sample.
_FEDSCALE_AUGMENTATION = 3.0
# FedScale's clock and the trace's differ by float rounding: online windows are this much wider (relative).
_FEDSCALE_SLACK = 1e-9
DEFAULT_OORT_THRESHOLD = 30.0
# The band's interval a trace carries.
BAND_COVERAGE = 0.8
# clients x rounds in one trace: a JSON trace of this many rows is about 60 MB.
MAX_TRACE_CELLS = 200_000


@dataclass(frozen=True)
class Trace:
    """N clients over R rounds: their devices and, per round, participation, availability, dropout and factor."""

    model: RoundModel
    seed: int
    k: int | None  # the finishers a round waits for; None: every participant that finishes
    kinds: np.ndarray  # (N,): index into model.kinds
    compute_factor: np.ndarray  # (N,): the device's compute against its kind's
    link_factor: np.ndarray  # (N,): the device's link against its kind's
    participants: np.ndarray  # (R, N) bool
    available: np.ndarray  # (R, N) bool
    dropped: np.ndarray  # (R, N) bool: dropped out of the round (only where available)
    factor: np.ndarray  # (R, N)

    @property
    def clients(self) -> int:
        return len(self.kinds)

    @property
    def rounds(self) -> int:
        return len(self.factor)

    def kind(self, client: int) -> ClientKind:
        return self.model.kinds[self.kinds[client]]

    def nominal(self, part: str) -> np.ndarray:
        """(N,): each client's nominal download_s, compute_s, upload_s or nominal_s, its device factors applied."""
        if part == "nominal_s":
            return self.nominal("download_s") + self.nominal("compute_s") + self.nominal("upload_s")
        base = np.array([getattr(self.model.kinds[i], part) for i in self.kinds])
        return base * self.compute_factor if part == "compute_s" else base / self.link_factor

    def times(self, part: str) -> np.ndarray:
        """(R, N): each client's time in each round for one part (download_s, compute_s, upload_s, nominal_s)."""
        return self.factor * self.nominal(part)[None, :]

    def finished(self) -> np.ndarray:
        """(R, N): took part, was available and did not drop out."""
        return self.participants & self.available & ~self.dropped

    def round_times(self, nominal: bool = False) -> np.ndarray:
        """(R,): when each round closes (its K-th finisher, else its last), NaN where nobody finished; `nominal`: on
        the clients' nominal times, as FedScale's fixed profiles run it."""
        times = np.broadcast_to(self.nominal("nominal_s"), self.factor.shape) if nominal else self.times("nominal_s")
        out = np.full(self.rounds, np.nan)
        for r, (row, done) in enumerate(zip(times, self.finished(), strict=True)):
            finishers = np.sort(row[done])
            if len(finishers):
                out[r] = finishers[min(self.k or len(finishers), len(finishers)) - 1]
        return out

    def step_ms(self) -> np.ndarray:
        """(N,): each client's nominal wall-clock step."""
        return np.array([self.kind(c).step_ms for c in range(self.clients)]) * self.compute_factor


def sample_trace(model: RoundModel, clients: int, rounds: int, seed: int, k: int | None = None) -> Trace:
    """Draw the clients from the fleet's weights, their devices and their rounds (seeded: one seed, one trace)."""
    rng = np.random.default_rng(seed)
    shares = np.array([kind.share for kind in model.kinds])
    kinds = rng.choice(len(model.kinds), size=clients, p=shares)
    compute, link = model.device_factors(kinds, rng)
    sigma = np.array([model.kinds[i].sigma for i in kinds])
    factor = np.exp(sigma[None, :] * rng.standard_normal((rounds, clients)))
    available = rng.random((rounds, clients)) < model.config.availability
    dropped = available & (rng.random((rounds, clients)) < model.config.dropout)
    participants = np.ones((rounds, clients), dtype=bool)
    if k is not None and model.config.sampled(k) < clients:
        participants[:] = False
        for r in range(rounds):
            participants[r, rng.choice(clients, size=model.config.sampled(k), replace=False)] = True
    return Trace(model=model, seed=seed, k=k, kinds=kinds, compute_factor=compute, link_factor=link,
                 participants=participants, available=available, dropped=dropped, factor=factor)


# --- the formats ------------------------------------------------------------------------------------------------


def fedscale_profiles(trace: Trace) -> dict[int, dict[str, float]]:
    """FedScale's device-capacity dict (nominal times; see the module's docstring)."""
    model = trace.model
    kbits = model.update_bytes * _FEDSCALE_KBITS_PER_BYTE
    compute, comm = trace.nominal("compute_s"), trace.nominal("download_s") + trace.nominal("upload_s")
    per_sample = _FEDSCALE_AUGMENTATION * model.batch_size * model.steps
    return {c: {"computation": float(compute[c] * 1000 / per_sample), "communication": float(2 * kbits / comm[c])}
            for c in range(trace.clients)}


def fedscale_availability(trace: Trace) -> dict[int, dict[str, Any]]:
    """FedScale's availability dict: each client online over the rounds it is available for and does not drop out
    of, on the trace's clock of nominal rounds (see the module's docstring)."""
    durations = np.nan_to_num(trace.round_times(nominal=True), nan=0.0)
    starts = np.concatenate([[0.0], np.cumsum(durations)])
    # Past the last round's slowest completion, so that no check of the trace's rounds wraps around.
    finish = float(starts[-1] + trace.nominal("nominal_s").max()) * (1 + _FEDSCALE_SLACK) + 1.0
    slack = finish * _FEDSCALE_SLACK
    # Online whether or not the trace drew it for a round: FedScale samples its own participants.
    finished = trace.available & ~trace.dropped
    out: dict[int, dict[str, Any]] = {}
    for c in range(trace.clients):
        active: list[float] = []
        inactive: list[float] = []
        for r in range(trace.rounds):
            if not finished[r, c]:
                continue
            if inactive and inactive[-1] >= starts[r] - slack:
                inactive[-1] = float(starts[r + 1] + slack)  # the previous window runs on
            else:
                active.append(float(max(starts[r] - slack, 0.0)))
                inactive.append(float(starts[r + 1] + slack))
        if not active:
            # Never online: a window of no length at the wrap point, which FedScale's clock never reads.
            active, inactive = [finish], [finish]
        out[c] = {"duration": finish, "inactive": inactive, "finish_time": finish, "active": active,
                  "model": trace.kind(c).target_name or trace.kind(c).target_id}
    return out


def oort_feedbacks(trace: Trace, round_threshold: float = DEFAULT_OORT_THRESHOLD,
                   num_classes: int = 1000) -> dict[str, Any]:
    """Oort's per-client registrations and per-round feedbacks (see the module's docstring)."""
    samples = trace.model.steps * trace.model.batch_size
    # A one-class head has no cross-entropy to weigh the samples by: they stand alone.
    utility = samples * math.log(num_classes) if num_classes > 1 else float(samples)
    nominal = trace.nominal("nominal_s")
    durations = trace.times("nominal_s")
    finished = trace.finished()
    ordered = sorted(float(value) for value in nominal)
    # Oort's pacer: the preferred duration is sortedDuration[min(int(n * round_threshold / 100), n - 1)].
    prefer = ordered[min(int(len(ordered) * round_threshold / 100.0), len(ordered) - 1)]
    return {
        "format": "oort", "unit": "s", "seed": trace.seed, "round_threshold": round_threshold,
        "round_prefer_duration": prefer, "utility_basis": f"{samples} samples x ln({num_classes})",
        "clients": [{"client_id": c, "reward": samples, "duration": float(nominal[c])} for c in range(trace.clients)],
        "rounds": [[{"client_id": int(c), "reward": utility, "duration": float(durations[r, c]), "time_stamp": r + 1,
                     "status": True} for c in np.flatnonzero(finished[r])]
                   for r in range(trace.rounds)],
    }


def _ms(seconds: np.ndarray) -> np.ndarray:
    return np.rint(seconds * 1000).astype(int)


def flgo_variables(trace: Trace) -> dict[str, Any]:
    """FLGo's simulator variables per client and each round's participants, availability, dropouts, latencies and
    closing time in milliseconds."""
    config = trace.model.config
    latency_ms = _ms(trace.times("nominal_s"))
    closes = trace.round_times()

    def ids(mask: np.ndarray) -> list[int]:
        return [int(c) for c in np.flatnonzero(mask)]

    return {
        "format": "flgo", "time_unit": "ms", "seed": trace.seed, "clients": trace.clients,
        "variables": [{"client_id": c, "prob_available": config.availability,
                       "prob_unavailable": 1.0 - config.availability, "prob_drop": config.dropout, "capacity": 1.0}
                      for c in range(trace.clients)],
        "rounds": [{"round": r + 1, "participants": ids(trace.participants[r]),
                    "available": ids(trace.participants[r] & trace.available[r]),
                    "dropped": ids(trace.participants[r] & trace.dropped[r]),
                    "latency": latency_ms[r].tolist(),
                    "tolerance_for_latency": int(_ms(np.nan_to_num(closes[r:r + 1], nan=0.0))[0])}
                   for r in range(trace.rounds)],
    }


def appfl_profiles(trace: Trace) -> dict[str, Any]:
    """APPFL vsim's ClientProfile fields: duration = base_step_time x steps x compute_factor + 2 x model bytes x 8
    / (bandwidth x 10^6); the one bandwidth is the link's harmonic mean, so the nominal round is kept."""
    model = trace.model
    step_s = trace.step_ms() / 1000.0
    base = float(np.median(step_s))
    bandwidth = np.array([trace.kind(c).link.symmetric_mbps for c in range(trace.clients)]) * trace.link_factor
    finished = trace.finished()
    rounds = []
    for r in range(trace.rounds):
        # Slowing compute and link alike by the round's factor scales APPFL's whole duration by it.
        profiles = {str(c): {"compute_factor": float(step_s[c] / base * trace.factor[r, c]),
                             "bandwidth": float(bandwidth[c] / trace.factor[r, c])}
                    for c in np.flatnonzero(finished[r])}
        rounds.append({"round": r + 1, "min_responses": min(trace.k or len(profiles), len(profiles)),
                       "profiles": profiles})
    return {"format": "appfl", "seed": trace.seed, "model_bytes": model.update_bytes, "num_local_steps": model.steps,
            "base_step_time": base,
            "profiles": {str(c): {"compute_factor": float(step_s[c] / base), "bandwidth": float(bandwidth[c])}
                         for c in range(trace.clients)},
            "rounds": rounds}


def client_rows(trace: Trace) -> list[dict[str, Any]]:
    """One row per client: its device, its nominal times and its step's band."""
    rows = []
    parts = {part: trace.nominal(part) for part in ("download_s", "compute_s", "upload_s", "nominal_s")}
    for c in range(trace.clients):
        kind = trace.kind(c)
        scale = float(trace.compute_factor[c])
        interval = kind.step_interval_ms(BAND_COVERAGE)
        sigma = kind.step_band_sigma()
        rows.append({
            "client_id": c, "target_id": kind.target_id, "device_kind": kind.kind,
            "compute_factor": scale, "link_factor": float(trace.link_factor[c]),
            "step_ms": kind.step_ms * scale, "gpu_ms": kind.gpu_ms * scale, "launch_ms": kind.launch_ms * scale,
            "step_low_ms": interval[0] * scale if interval else None,
            "step_high_ms": interval[1] * scale if interval else None, "step_sigma": sigma,
            "down_mbps": kind.link.down_mbps * float(trace.link_factor[c]),
            "up_mbps": kind.link.up_mbps * float(trace.link_factor[c]),
            **{part: float(values[c]) for part, values in parts.items()}})
    return rows


def trace_rows(trace: Trace) -> list[dict[str, Any]]:
    """One row per client per round, with the client's device and band."""
    clients = client_rows(trace)
    parts = {part: trace.times(part) for part in ("download_s", "compute_s", "upload_s", "nominal_s")}
    rows = []
    for r in range(trace.rounds):
        for c, client in enumerate(clients):
            rows.append({"round": r, "client_id": c, "target_id": client["target_id"],
                         "device_kind": client["device_kind"], "participant": bool(trace.participants[r, c]),
                         "available": bool(trace.available[r, c]), "dropped": bool(trace.dropped[r, c]),
                         "step_ms": client["step_ms"], "step_low_ms": client["step_low_ms"],
                         "step_high_ms": client["step_high_ms"], "step_sigma": client["step_sigma"],
                         "download_s": float(parts["download_s"][r, c]), "compute_s": float(parts["compute_s"][r, c]),
                         "upload_s": float(parts["upload_s"][r, c]), "total_s": float(parts["nominal_s"][r, c])})
    return rows


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def trace_json(trace: Trace) -> dict[str, Any]:
    model = trace.model
    closes, nominal_closes = trace.round_times(), trace.round_times(nominal=True)
    finished = trace.finished().sum(axis=1)
    return {
        "format": "json", "seed": trace.seed, "clients": trace.clients, "rounds": trace.rounds, "k": trace.k,
        "local_steps": model.steps, "batch_size": model.batch_size, "update_bytes": model.update_bytes,
        "band_coverage": BAND_COVERAGE, "config": model.config.model_dump(mode="json"),
        "kinds": [{"target_id": k.target_id, "target_name": k.target_name, "device_kind": k.kind, "share": k.share,
                   "step_ms": k.step_ms, "gpu_ms": k.gpu_ms, "launch_ms": k.launch_ms, "down_mbps": k.link.down_mbps,
                   "up_mbps": k.link.up_mbps, "download_s": k.download_s, "compute_s": k.compute_s,
                   "upload_s": k.upload_s, "nominal_s": k.nominal_s, "sigma": k.sigma,
                   "compute_sigma": k.compute_sigma, "link_sigma": k.link_sigma} for k in model.kinds],
        "devices": client_rows(trace),
        "round_times": [{"round": r, "round_s": _finite(float(closes[r])),
                        "nominal_round_s": _finite(float(nominal_closes[r])), "finished": int(finished[r]),
                        "complete": bool(finished[r] >= (trace.k or 1))} for r in range(trace.rounds)],
        "trace": trace_rows(trace),
    }


def _csv(trace: Trace) -> str:
    buffer = io.StringIO()
    rows = trace_rows(trace)
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


@dataclass(frozen=True)
class Rendered:
    body: bytes
    media_type: str
    filename: str


def render(trace: Trace, fmt: str, *, name: str = "trace", oort_threshold: float = DEFAULT_OORT_THRESHOLD,
           num_classes: int = 1000) -> Rendered:
    """The trace as a file in one of TRACE_FORMATS."""
    def as_json(data: dict[str, Any]) -> bytes:
        return json.dumps(data, allow_nan=False, separators=(",", ":")).encode()

    # Protocol 4 reads on every Python 3 FedScale runs on.
    if fmt == "fedscale":
        return Rendered(pickle.dumps(fedscale_profiles(trace), protocol=4), "application/octet-stream",
                        f"{name}.fedscale.pkl")
    if fmt == "fedscale_avail":
        return Rendered(pickle.dumps(fedscale_availability(trace), protocol=4), "application/octet-stream",
                        f"{name}.fedscale_avail.pkl")
    if fmt == "csv":
        return Rendered(_csv(trace).encode(), "text/csv", f"{name}.csv")
    writers = {"oort": lambda: oort_feedbacks(trace, oort_threshold, num_classes),
               "flgo": lambda: flgo_variables(trace), "appfl": lambda: appfl_profiles(trace),
               "json": lambda: trace_json(trace)}
    if fmt not in writers:
        raise ValueError(f"unknown trace format {fmt!r}: one of {', '.join(TRACE_FORMATS)}")
    return Rendered(as_json(writers[fmt]()), "application/json", f"{name}.{fmt}.json")
