"""Per-client FL traces from the round model, in the formats FL simulators read as they are.

`sample_trace` draws N clients from the fleet's weights and, for R rounds, whether each client is available, whether
it drops out, and its lognormal factor (understudy/rounds.py); a client's times in a round are its device kind's
nominal download, compute and upload times, each times that round's factor. One seed gives the same trace.

The formats, each checked against the code of the tool that reads it (tests/traces):

- `fedscale`: FedScale's device-capacity pickle, `{client_id: {"computation": ms per sample, "communication": kbps}}`
  (fedscale/cloud/aggregation/aggregator.py `load_client_profile`). FedScale's ClientMetadata computes a round as
  computation = 3 x batch x local steps x ms per sample / 1000 and communication = (upload + download kbits) /
  kbps, with the update's size in kbits as bytes x 8 / 1024; the values here make both equal the nominal round.
  FedScale maps its client i to the profile with key i mod N, so the keys are 0..N-1. It holds no per-round
  variability (a FedScale profile is fixed).
- `oort`: Oort's feedbacks, `{"clients": {id: {"reward", "duration"}}, "rounds": [{id: {"reward", "duration",
  "time_stamp", "status"}}], "round_threshold", "round_prefer_duration"}`: durations in seconds, the preferred round
  duration as Oort's pacer takes it (the round_threshold-th percentile of the clients' durations).
- `flgo`: FLGo's simulator variables per client (`prob_available`, `prob_unavailable`, `prob_drop`,
  `working_amount`, `capacity`) and, per round, each client's `latency` in whole time units (ms), set with
  `simulator.set_variable(ids, "latency", ...)`.
- `appfl`: APPFL vsim's ClientProfile per client (`compute_factor`, `bandwidth` in Mbps) with
  `compute_second_per_step`, `num_local_steps` and `model_bytes`; per round, the profile that reproduces the sampled
  time (both the compute factor and the link slowed by the round's factor).
- `csv` and `json`: every client's times in every round.
"""

from __future__ import annotations

import csv
import io
import json
import pickle
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from understudy.rounds import RoundModel

TraceFormat = Literal["fedscale", "oort", "flgo", "appfl", "csv", "json"]
TRACE_FORMATS: tuple[str, ...] = ("fedscale", "oort", "flgo", "appfl", "csv", "json")
# FedScale's model_update_size: bytes / 1024 x 8 ("kbits", aggregator.py).
_FEDSCALE_KBITS_PER_BYTE = 8 / 1024
# FedScale's augmentation_factor: a training step is taken as 3 x a forward pass per sample.
_FEDSCALE_AUGMENTATION = 3.0
DEFAULT_OORT_THRESHOLD = 30.0
# clients x rounds in one trace: a JSON trace of this many rows is about 40 MB.
MAX_TRACE_CELLS = 200_000


@dataclass(frozen=True)
class Trace:
    """N clients over R rounds: their device kinds and, per round, availability, dropout and the lognormal factor."""

    model: RoundModel
    seed: int
    kinds: np.ndarray  # (N,): index into model.kinds
    available: np.ndarray  # (R, N) bool
    dropped: np.ndarray  # (R, N) bool: dropped out of the round (only where available)
    factor: np.ndarray  # (R, N)

    @property
    def clients(self) -> int:
        return len(self.kinds)

    @property
    def rounds(self) -> int:
        return len(self.factor)

    def nominal(self, part: str) -> np.ndarray:
        """(N,): each client's nominal download_s, compute_s, upload_s or nominal_s."""
        return np.array([getattr(self.model.kinds[i], part) for i in self.kinds])

    def times(self, part: str) -> np.ndarray:
        """(R, N): each client's time in each round for one part (download_s, compute_s, upload_s, nominal_s)."""
        return self.factor * self.nominal(part)[None, :]

    def finished(self) -> np.ndarray:
        return self.available & ~self.dropped


def sample_trace(model: RoundModel, clients: int, rounds: int, seed: int) -> Trace:
    """Draw the clients from the fleet's weights and their rounds (seeded: one seed, one trace)."""
    rng = np.random.default_rng(seed)
    shares = np.array([kind.share for kind in model.kinds])
    kinds = rng.choice(len(model.kinds), size=clients, p=shares)
    sigma = np.array([model.kinds[i].sigma for i in kinds])
    factor = np.exp(sigma[None, :] * rng.standard_normal((rounds, clients)))
    available = rng.random((rounds, clients)) < model.config.availability
    dropped = available & (rng.random((rounds, clients)) < model.config.dropout)
    return Trace(model=model, seed=seed, kinds=kinds, available=available, dropped=dropped, factor=factor)


# --- the formats ------------------------------------------------------------------------------------------------


def fedscale_profiles(trace: Trace) -> dict[int, dict[str, float]]:
    """FedScale's device-capacity dict (nominal times; see the module's docstring)."""
    model = trace.model
    kbits = model.update_bytes * _FEDSCALE_KBITS_PER_BYTE
    out = {}
    for client, index in enumerate(trace.kinds):
        kind = model.kinds[index]
        ms_per_sample = kind.compute_s * 1000 / (_FEDSCALE_AUGMENTATION * model.batch_size * model.steps)
        out[client] = {"computation": ms_per_sample, "communication": 2 * kbits / (kind.download_s + kind.upload_s)}
    return out


def oort_feedbacks(trace: Trace, round_threshold: float = DEFAULT_OORT_THRESHOLD) -> dict[str, Any]:
    """Oort's per-client feedbacks: durations in seconds; the reward is the samples of a round (steps x batch, what
    FedScale registers a client with when it holds enough data)."""
    reward = trace.model.steps * trace.model.batch_size
    nominal = trace.nominal("nominal_s")
    durations = trace.times("nominal_s")
    finished = trace.finished()
    ordered = sorted(float(value) for value in nominal)
    # Oort's pacer: the preferred duration is sortedDuration[min(int(n * round_threshold / 100), n - 1)].
    prefer = ordered[min(int(len(ordered) * round_threshold / 100.0), len(ordered) - 1)]
    return {
        "format": "oort", "unit": "s", "seed": trace.seed, "round_threshold": round_threshold,
        "round_prefer_duration": prefer,
        "clients": {str(c): {"reward": reward, "duration": float(nominal[c])} for c in range(trace.clients)},
        "rounds": [{str(c): {"reward": reward, "duration": float(durations[r, c]), "time_stamp": r + 1,
                             "status": bool(finished[r, c])} for c in range(trace.clients)}
                   for r in range(trace.rounds)],
    }


def flgo_variables(trace: Trace) -> dict[str, Any]:
    """FLGo's simulator variables per client and each round's latencies in milliseconds."""
    config = trace.model.config
    latency_ms = np.rint(trace.times("nominal_s") * 1000).astype(int)
    return {
        "format": "flgo", "time_unit": "ms", "seed": trace.seed,
        "variables": {str(c): {"prob_available": config.availability, "prob_unavailable": 1.0 - config.availability,
                               "prob_drop": config.dropout, "working_amount": trace.model.steps, "capacity": 1.0}
                      for c in range(trace.clients)},
        "rounds": [{"latency": {str(c): int(latency_ms[r, c]) for c in range(trace.clients)},
                    "available": [str(c) for c in np.flatnonzero(trace.available[r])],
                    "dropped": [str(c) for c in np.flatnonzero(trace.dropped[r])]}
                   for r in range(trace.rounds)],
    }


def appfl_profiles(trace: Trace) -> dict[str, Any]:
    """APPFL vsim's ClientProfile fields: duration = compute_second_per_step x steps x compute_factor + 2 x model
    bytes x 8 / (bandwidth x 10^6); the one bandwidth is the link's harmonic mean, so the nominal round is kept."""
    model = trace.model
    clients: dict[str, Any] = {}
    for c, index in enumerate(trace.kinds):
        kind = model.kinds[index]
        clients[str(c)] = {"target_id": kind.target_id, "compute_second_per_step": kind.step_ms / 1000,
                           "compute_factor": 1.0, "bandwidth": kind.link.symmetric_mbps}
    rounds = []
    for r in range(trace.rounds):
        this_round = {}
        for c in range(trace.clients):
            factor = float(trace.factor[r, c])
            # Slowing compute and link alike by the round's factor scales APPFL's whole duration by it.
            this_round[str(c)] = {"compute_factor": factor, "bandwidth": clients[str(c)]["bandwidth"] / factor,
                                  "available": bool(trace.available[r, c]), "dropped": bool(trace.dropped[r, c])}
        rounds.append(this_round)
    return {"format": "appfl", "seed": trace.seed, "model_bytes": model.update_bytes,
            "num_local_steps": model.steps, "clients": clients, "rounds": rounds}


def trace_rows(trace: Trace) -> list[dict[str, Any]]:
    """One row per client per round."""
    parts = {part: trace.times(part) for part in ("download_s", "compute_s", "upload_s", "nominal_s")}
    rows = []
    for r in range(trace.rounds):
        for c, index in enumerate(trace.kinds):
            rows.append({"round": r, "client_id": c, "target_id": trace.model.kinds[index].target_id,
                         "available": bool(trace.available[r, c]), "dropped": bool(trace.dropped[r, c]),
                         "download_s": float(parts["download_s"][r, c]), "compute_s": float(parts["compute_s"][r, c]),
                         "upload_s": float(parts["upload_s"][r, c]), "total_s": float(parts["nominal_s"][r, c])})
    return rows


def trace_json(trace: Trace) -> dict[str, Any]:
    model = trace.model
    return {
        "format": "json", "seed": trace.seed, "clients": trace.clients, "rounds": trace.rounds,
        "local_steps": model.steps, "batch_size": model.batch_size, "update_bytes": model.update_bytes,
        "config": model.config.model_dump(mode="json"),
        "kinds": [{"target_id": k.target_id, "target_name": k.target_name, "share": k.share, "step_ms": k.step_ms,
                   "down_mbps": k.link.down_mbps, "up_mbps": k.link.up_mbps, "download_s": k.download_s,
                   "compute_s": k.compute_s, "upload_s": k.upload_s, "nominal_s": k.nominal_s, "sigma": k.sigma}
                  for k in model.kinds],
        "client_targets": [model.kinds[i].target_id for i in trace.kinds],
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


def render(trace: Trace, fmt: str, *, name: str = "trace", oort_threshold: float = DEFAULT_OORT_THRESHOLD) -> Rendered:
    """The trace as a file in one of TRACE_FORMATS."""
    def as_json(data: dict[str, Any]) -> bytes:
        return json.dumps(data, allow_nan=False, separators=(",", ":")).encode()

    if fmt == "fedscale":
        # Protocol 4 reads on every Python 3 FedScale runs on.
        return Rendered(pickle.dumps(fedscale_profiles(trace), protocol=4), "application/octet-stream",
                        f"{name}.fedscale.pkl")
    if fmt == "csv":
        return Rendered(_csv(trace).encode(), "text/csv", f"{name}.csv")
    writers = {"oort": lambda: oort_feedbacks(trace, oort_threshold), "flgo": lambda: flgo_variables(trace),
               "appfl": lambda: appfl_profiles(trace), "json": lambda: trace_json(trace)}
    if fmt not in writers:
        raise ValueError(f"unknown trace format {fmt!r}: one of {', '.join(TRACE_FORMATS)}")
    return Rendered(as_json(writers[fmt]()), "application/json", f"{name}.{fmt}.json")

