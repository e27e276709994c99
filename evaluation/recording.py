"""`understudy evaluate --measure-only`: measure what the estimators would need into the log, in-process or in a
child process per workload (evaluation.record_child) when each workload has a time limit.

Its own module so that neither side of the recording child imports the other: this one drives the child, the
child runs evaluation.evaluate.record_plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from engine.engine import Engine
from evaluation.evaluate import RUN_ORDER, Plan, record_plan
from evaluation.record_child import RecordingChild


def record(engine: Engine, plans: list[Plan], estimators: list[str], budget_s: float | None = None,
           progress: Callable[[str], None] | None = None, timeout_s: float | None = None) -> int:
    """Only measure, into the engine's log, what the estimators would need; estimate nothing. GPU time is what an
    evaluation on the GPU host runs short of, and estimating (counting a model's ops) costs seconds per workload
    that a replay anywhere else can spend instead. Returns how many workloads were measured or found in the log.

    With `timeout_s` the measuring runs in a child process (evaluation.record_child), one workload at a time: a
    workload past its limit is killed with the child and logged as failed, and the run goes on with a fresh child.
    (A model whose cuDNN autotuning runs for minutes cannot be stopped from inside the process that runs it.)"""
    started = time.monotonic()
    ordered = sorted(estimators, key=lambda name: RUN_ORDER.get(name, 9))
    child = RecordingChild(engine, ordered) if timeout_s is not None else None
    done = 0
    try:
        for index, plan in enumerate(plans):
            if budget_s is not None and time.monotonic() - started > budget_s:
                break
            if progress:
                progress(f"[{index + 1}/{len(plans)}] {plan.key}")
            if child is None:
                logged = record_plan(engine, plan, ordered)
            else:
                assert timeout_s is not None
                logged = child.record(plan, timeout_s)
            if logged:
                done += 1
    finally:
        if child is not None:
            child.close()
    return done
