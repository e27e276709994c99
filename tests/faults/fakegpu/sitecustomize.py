"""Loaded by every process of a worker started by tests/faults with this folder on PYTHONPATH.

With UNDERSTUDY_TEST_GPU_JOB_S set, each job, once it has claimed its rows, does what a GPU measurement does first:
locks the core clock through NVML (the fake pynvml beside this file) and starts an MPS daemon of its own (through
UNDERSTUDY_MPS_CONTROL, a fake), then sleeps that long before predicting: the window in which a test kills the worker
and so leaves both behind. With UNDERSTUDY_TEST_PREDICT_DELAY_S set, it only sleeps (as tests/service/slowjob does).
"""

import os

_gpu_job_s = float(os.environ.get("UNDERSTUDY_TEST_GPU_JOB_S") or 0)
_delay_s = float(os.environ.get("UNDERSTUDY_TEST_PREDICT_DELAY_S") or 0)
if _gpu_job_s > 0 or _delay_s > 0:
    import time

    import worker.tasks

    _predict_rows = worker.tasks.predict_rows
    _held = []

    def _held_gpu_predict_rows(rows, settings):  # type: ignore[no-untyped-def]
        if _gpu_job_s > 0:
            from engine import restrict
            from engine.probe import load_nvml

            nvml = load_nvml()
            held = restrict.clock_lock(nvml, nvml.nvmlDeviceGetHandleByIndex(0), 1005.0)
            held.__enter__()  # never left (kept referenced: a collected generator would run its reset)
            _held.append(held)
            restrict.MpsDaemon(settings.mps_control).start()  # never stopped
        time.sleep(_gpu_job_s or _delay_s)
        return _predict_rows(rows, settings)

    worker.tasks.predict_rows = _held_gpu_predict_rows
