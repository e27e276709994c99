"""Admission control of uncached work: what a job will cost a worker, each key's budget of it, and where a new job
goes in its queue. Shared by the API (which admits) and the worker (which says a job started); no torch.

A request's rate says little about its cost: one POST can ask for a huge model on 64 targets. So each job is priced
in estimated worker seconds before it is queued, from the workload alone (the API has no model to trace): a setup
cost that grows with the model's size class and resolution, plus, for the estimators that time the workload on a
GPU, a measurement per target that grows with the batch. Each key may queue `UNDERSTUDY_WORK_BUDGET_S` of it per
`UNDERSTUDY_WORK_WINDOW_S` and have `UNDERSTUDY_MAX_WAITING_JOBS_PER_KEY` jobs waiting; past either, 429 with
Retry-After. A queue with `UNDERSTUDY_MAX_QUEUE_DEPTH` jobs waiting takes no more from anyone (503). A job larger
than the whole budget is still admitted into an empty window, so any one request can run.

Fair scheduling is rq's concurrency limit per key (ledger.dispatch.enqueue): a key has at most
`UNDERSTUDY_MAX_ACTIVE_JOBS_PER_KEY` jobs queued or running in a queue, and rq holds the rest back until one of them
ends. The queue itself therefore takes the keys in turn, and a flood from one key waits behind itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from redis import Redis

from ledger.queues import KEY_PREFIX
from understudy.calibration import CalibrationSet
from understudy.workload import Workload

# Size classes by the words timm uses in model names; the default is a "base"-sized model.
SIZE_WORDS = {"tiny": 0.5, "small": 0.8, "medium": 1.2, "base": 1.5, "large": 3.0, "huge": 6.0, "giant": 10.0,
              "gigantic": 14.0, "enormous": 14.0}
DEFAULT_SIZE = 1.5
SETUP_S = 2.0  # building or tracing a base-sized model at 224 px
MEASURE_S = 1.5  # timing one host setting of a base-sized model at batch 32
GPU_ESTIMATORS = frozenset({"spec", "flops", "hostaware"})

_ADMIT = """
-- KEYS[1] the budget counter, KEYS[2] the key's waiting-jobs counter, KEYS[3] the queue's
-- ARGV: cost, budget (0: none), window ms, max waiting (0: none), waiting ttl ms, max queue depth (0: none)
local cost, budget, window, max_waiting = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local depth = tonumber(ARGV[6])
local queued = tonumber(redis.call('GET', KEYS[3]) or '0')
if depth > 0 and queued >= depth then
  return {'full', queued, 0}
end
local waiting = tonumber(redis.call('GET', KEYS[2]) or '0')
if max_waiting > 0 and waiting >= max_waiting then
  return {'waiting', waiting, redis.call('PTTL', KEYS[2])}
end
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
if budget > 0 and spent > 0 and spent + cost > budget then
  return {'budget', tostring(spent), redis.call('PTTL', KEYS[1])}
end
redis.call('INCRBYFLOAT', KEYS[1], cost)
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], window) end
for i = 2, 3 do
  redis.call('INCR', KEYS[i])
  redis.call('PEXPIRE', KEYS[i], ARGV[5])
end
return {'ok', waiting, 0}
"""

_STARTED = """
for i = 1, 2 do
  local n = tonumber(redis.call('GET', KEYS[i]) or '0')
  if n > 1 then redis.call('DECR', KEYS[i]) else redis.call('DEL', KEYS[i]) end
end
return 1
"""


def size_class(model: str) -> float:
    words = re.split(r"[_\-.]", model.lower())
    found = [SIZE_WORDS[word] for word in words if word in SIZE_WORDS]
    return max(found) if found else DEFAULT_SIZE


def estimate_seconds(workload: Workload, estimator: str, targets: int) -> float:
    """The worker seconds one job of `targets` uncached targets is expected to take (an upper-side guess)."""
    size = size_class(workload.model)
    height, width = workload.resolution
    pixels = max(1.0, height * width / 224**2)
    setup = SETUP_S * size * math.sqrt(pixels)
    if estimator not in GPU_ESTIMATORS:
        return setup + 0.01 * targets  # traced once, priced per target
    batch = max(0.25, workload.batch_size / 32)
    return setup + targets * MEASURE_S * size * batch * pixels


def calibrated_seconds(workload: Workload, base: str, targets: int,
                       unfitted: Sequence[tuple[str, CalibrationSet]]) -> float:
    """A calibrated job: its base's cost for the workload, and for each calibration not fitted yet, (target id, its
    points), the base's cost of every distinct point workload on the targets that measured it (the fit runs them)."""
    measured: dict[str, tuple[Workload, set[str]]] = {}
    for target_id, points in unfitted:
        for point in points.points:
            measured.setdefault(point.workload.digest(), (point.workload, set()))[1].add(point.measured_on or target_id)
    return estimate_seconds(workload, base, targets) + sum(estimate_seconds(point_workload, base, len(on))
                                                            for point_workload, on in measured.values())


def budget_key(owner: str) -> str:
    return f"{KEY_PREFIX}budget:{owner}"


def waiting_key(queue: str, owner: str | None = None) -> str:
    """The count of an owner's jobs waiting in a queue; without an owner, of every owner's."""
    return f"{KEY_PREFIX}waiting:{queue}" + (f":{owner}" if owner is not None else "")


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str = ""  # "full", "budget" or "waiting" when refused
    retry_after_s: int = 0


def admit(redis: Redis, *, owner: str, queue: str, cost_s: float, budget_s: float, window_s: float,
          max_waiting: int, waiting_ttl_s: float, max_depth: int) -> Admission:
    """Charge `cost_s` to the owner's budget and count one more waiting job, or say why not (atomically).

    Waiting jobs are counted here rather than read from rq's queue, which does not hold the jobs that rq's
    concurrency limit holds back."""
    reason, _, left_ms = redis.eval(
        _ADMIT, 3, budget_key(owner), waiting_key(queue, owner), waiting_key(queue), f"{cost_s:.3f}", budget_s,
        max(1, int(window_s * 1000)), max_waiting, max(1, int(waiting_ttl_s * 1000)), max_depth)
    reason = reason.decode() if isinstance(reason, bytes) else str(reason)
    if reason != "ok":
        return Admission(False, reason, max(1, math.ceil(int(left_ms) / 1000)))
    return Admission(True)


def job_started(redis: Redis, *, queue: str, owner: str) -> None:
    """A job of this owner left the queue: one fewer waiting."""
    redis.eval(_STARTED, 2, waiting_key(queue, owner), waiting_key(queue))
