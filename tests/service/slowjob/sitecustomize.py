"""Loaded by every Python process started with this folder on PYTHONPATH (a worker, its probe, its job processes).

With UNDERSTUDY_TEST_PREDICT_DELAY_S set, each job sleeps that long before predicting, after it has claimed its
rows: the window in which test_worker_process kills a worker mid-job. The job processes are fresh interpreters
(rq's SpawnWorker), so a patch made in the test process would not reach them; this file does.
"""

import os

_delay = float(os.environ.get("UNDERSTUDY_TEST_PREDICT_DELAY_S") or 0)
if _delay > 0:
    import time

    import worker.tasks

    _predict_rows = worker.tasks.predict_rows

    def _slow_predict_rows(rows, settings):  # type: ignore[no-untyped-def]
        time.sleep(_delay)
        return _predict_rows(rows, settings)

    worker.tasks.predict_rows = _slow_predict_rows
