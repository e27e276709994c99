"""Queue names, Redis keys and the job functions' dotted names: the one place the API and the worker agree on them.

Redis only transports: everything here can vanish (FLUSHALL, a restart) and the reconciler rebuilds the queues from
the ledger. Nothing here imports torch.
"""

from __future__ import annotations

# rq queues, one per host class (host_queue): "cpu" serves estimators that never touch a GPU; "gpu:<fingerprint>"
# serves the GPU estimators whose cache keys name that host fingerprint.
CPU_QUEUE = "cpu"
GPU_QUEUE_PREFIX = "gpu:"

# The job functions, enqueued by name so that the API never imports the worker (or torch): the one that runs a
# group of rows, and the one that gives rows waiting for a GPU measurement their GPU-free estimate (on CPU_QUEUE).
RUN_PREDICTIONS = "worker.tasks.run_predictions"
ESTIMATE_PREDICTIONS = "worker.tasks.estimate_predictions"

# Our own keys; rq keeps its own under "rq:".
KEY_PREFIX = "understudy:"

# The environment variable in which a worker tells its measuring process the token it claims rows under.
ENV_WORKER_TOKEN = "UNDERSTUDY_WORKER_TOKEN"


def gpu_queue(fingerprint: str) -> str:
    return f"{GPU_QUEUE_PREFIX}{fingerprint}"


def host_queue(has_gpu: bool, fingerprint: str) -> str:
    """The queue a host serves (its host class): CPU_QUEUE, or its GPU's queue so jobs reach the host their cache key
    names."""
    return gpu_queue(fingerprint) if has_gpu else CPU_QUEUE


def is_gpu_queue(name: str) -> bool:
    return name.startswith(GPU_QUEUE_PREFIX)


def host_id(host_name: str, gpu_index: int) -> str:
    """A worker's slot: one machine's GPU N. At most one worker holds a slot at a time."""
    return f"{host_name}:gpu{gpu_index}"


def gpu_lock_key(slot: str) -> str:
    """The exclusive lock on one GPU of one machine; its value is the holding worker's token."""
    return f"{KEY_PREFIX}lock:{slot}"


def alive_key(worker_token: str) -> str:
    """Exists while the worker with this token is alive (refreshed with its lock, expires with it)."""
    return f"{KEY_PREFIX}alive:{worker_token}"
