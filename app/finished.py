"""Finished predictions, remembered by each API process: a cache hit asked again is answered without the database.

A prediction that is done or oom never changes again (only a failed one runs again: ledger.predictions), and a key
that has a prediction in its history keeps it (the service deletes neither rows nor owners). So each process keeps
the public form of the finished rows it has read, by id and by cache key, and which keys it has seen own them: a
GET of one of them, or a POST whose every result is one of them and already in the caller's history, needs no
query, no connection and no thread (benchmarks/load/REPORT.md). Only what the database said is remembered; a row
not finished, or not yet in a key's history, is asked for every time.
"""

from __future__ import annotations

from app.schemas import PredictionPublic
from understudy.results import Status

CACHED_STATES = frozenset({Status.done, Status.oom})
MAX_ROWS = 20_000
MAX_OWNED = 200_000


class FinishedPredictions:
    """The finished rows this process has read (their public form) and the (key, prediction) pairs it has seen."""

    def __init__(self, max_rows: int = MAX_ROWS, max_owned: int = MAX_OWNED) -> None:
        self.max_rows = max_rows
        self.max_owned = max_owned
        self._by_id: dict[str, PredictionPublic] = {}
        self._by_key: dict[str, PredictionPublic] = {}  # cache key -> the row
        self._owned: set[tuple[str, str]] = set()  # (API key id, prediction id)

    def remember(self, public: PredictionPublic, cache_key: str, owner: str | None) -> None:
        """Keep a row read from the database (if it is finished), and that `owner` (None: nobody) has it in its
        history (which the caller has just read or written)."""
        if public.status not in CACHED_STATES:
            return
        if len(self._by_id) >= self.max_rows:
            self.clear()  # no unbounded growth; the rows come back from the database as they are asked for
        if len(self._owned) >= self.max_owned:
            self._owned.clear()
        self._by_id[public.id] = public
        self._by_key[cache_key] = public
        if owner is not None:
            self._owned.add((owner, public.id))

    def get(self, prediction_id: str, owner: str | None) -> PredictionPublic | None:
        """The finished row with this id if it is remembered and `owner` (None: anyone) is known to have it."""
        public = self._by_id.get(prediction_id)
        if public is None or (owner is not None and (owner, prediction_id) not in self._owned):
            return None
        return public

    def by_keys(self, cache_keys: list[str], owner: str | None) -> list[PredictionPublic] | None:
        """The rows of these cache keys, in order, when every one is remembered and known to be in `owner`'s
        history (None: nobody's history to check); else None."""
        rows = []
        for key in cache_keys:
            public = self._by_key.get(key)
            if public is None or (owner is not None and (owner, public.id) not in self._owned):
                return None
            rows.append(public)
        return rows

    def clear(self) -> None:
        self._by_id.clear()
        self._by_key.clear()
        self._owned.clear()


# One per process. Emptied when the app starts (app.main): a test's truncated tables start with a fresh app.
finished = FinishedPredictions()
