"""rq jobs as Understudy writes and runs them: JSON on the wire, and one allow-listed function.

rq's default serializer is pickle, and unpickling runs code: whoever could write to Redis could run anything on every
worker. Every queue, job and worker here uses rq's JSON serializer instead (a job is a function name and a list of
ledger row ids), and AllowListedJob refuses to run any function but those in ALLOWED_FUNCTIONS, so a job forged in
Redis can at most ask for a prediction, or an estimate, of rows that are already in the ledger.
"""

from __future__ import annotations

from typing import Any

from rq.job import Job
from rq.serializers import JSONSerializer

from ledger.queues import ESTIMATE_PREDICTIONS, RUN_PREDICTIONS

SERIALIZER = JSONSerializer
ALLOWED_FUNCTIONS = frozenset({RUN_PREDICTIONS, ESTIMATE_PREDICTIONS})


class ForbiddenJob(RuntimeError):
    """A job in the queue names a function that Understudy does not run."""


class AllowListedJob(Job):
    """An rq job that resolves only the allow-listed functions, never a method of a deserialised instance."""

    @property
    def func(self) -> Any:
        name = self.func_name
        if self.instance is not None or name not in ALLOWED_FUNCTIONS:
            raise ForbiddenJob(f"job {self.id} asks for {name!r}, which is not an Understudy job function; refused")
        return super().func
