"""Finished predictions, remembered by each API process: a cache hit asked again is answered without the database.

A prediction that is done or oom never changes again (only a failed one runs again: ledger.predictions), and a key
that has a prediction in its history keeps it (the service deletes neither rows nor owners). So each process keeps
the public form of the finished rows it has read, by id and by cache key, and which keys it has seen own them: a
GET of one of them, or a POST whose every result is one of them and already in the caller's history, needs no
query, no connection and no thread (benchmarks/load/REPORT.md). Only what the database said is remembered; a row
not finished, or not yet in a key's history, is asked for every time. What is remembered is trusted for
UNDERSTUDY_REMEMBER_FINISHED_S (0: never), which bounds how long rows deleted behind the service's back (by hand, or
a test emptying its tables under a running API) can still be shown.
"""

from __future__ import annotations

import time

from app.schemas import PredictionPublic
from understudy.results import Status

CACHED_STATES = frozenset({Status.done, Status.oom})
MAX_ROWS = 20_000
MAX_OWNED = 200_000


class FinishedPredictions:
    """The finished rows this process has read (their public form) and the (key, prediction) pairs it has seen,
    each with when it was read (time.monotonic())."""

    def __init__(self, max_rows: int = MAX_ROWS, max_owned: int = MAX_OWNED) -> None:
        self.max_rows = max_rows
        self.max_owned = max_owned
        self._by_id: dict[str, tuple[float, PredictionPublic]] = {}
        self._by_key: dict[str, tuple[float, PredictionPublic]] = {}  # cache key -> the row
        self._owned: dict[tuple[str, str], float] = {}  # (API key id, prediction id) -> when

    def remember(self, public: PredictionPublic, cache_key: str, owner: str | None) -> None:
        """Keep a row just read from the database (if it is finished), and that `owner` (None: nobody) has it in
        its history (which the caller has just read or written)."""
        if public.status not in CACHED_STATES:
            return
        if len(self._by_id) >= self.max_rows:
            self.clear()  # no unbounded growth; the rows come back from the database as they are asked for
        if len(self._owned) >= self.max_owned:
            self._owned.clear()
        now = time.monotonic()
        self._by_id[public.id] = self._by_key[cache_key] = (now, public)
        if owner is not None:
            self._owned[(owner, public.id)] = now

    def _known(self, entry: tuple[float, PredictionPublic] | None, owner: str | None,
               max_age_s: float) -> PredictionPublic | None:
        if entry is None:
            return None
        oldest = time.monotonic() - max_age_s
        public = entry[1]
        if entry[0] <= oldest or (owner is not None and self._owned.get((owner, public.id), oldest) <= oldest):
            return None
        return public

    def get(self, prediction_id: str, owner: str | None, max_age_s: float) -> PredictionPublic | None:
        """The finished row with this id if it was read less than max_age_s ago, and `owner` (None: anyone) was
        seen to have it that recently."""
        return self._known(self._by_id.get(prediction_id), owner, max_age_s)

    def by_keys(self, cache_keys: list[str], owner: str | None, max_age_s: float) -> list[PredictionPublic] | None:
        """The rows of these cache keys, in order, when every one would be given by get(); else None."""
        rows = []
        for key in cache_keys:
            public = self._known(self._by_key.get(key), owner, max_age_s)
            if public is None:
                return None
            rows.append(public)
        return rows

    def clear(self) -> None:
        self._by_id.clear()
        self._by_key.clear()
        self._owned.clear()


# One per process. Emptied when the app starts (app.main): a test's truncated tables start with a fresh app.
finished = FinishedPredictions()
