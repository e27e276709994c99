"""`understudy evaluate`: run estimators over ground-truth measurements and score them side by side.

Rows are grouped by workload, so a model is built once per host setting and every estimator of the run shares
the measurements (through the measurement log, which also lets a run stopped by its time budget resume, and lets
the ratio-based estimators be re-scored without a GPU). Rows that cannot run are counted and listed, not dropped.
"""

from __future__ import annotations

import csv
import math
import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from understudy.catalog import TargetSpec, catalog
from understudy.errors import UnderstudyError
from evaluation.rows import EvalRow, model_family
from understudy.results import HostInfo, HostSetting
from understudy.workload import Workload, workload_from_row
from engine.engine import Engine
from engine.measurement_log import MeasurementLog

# Estimators that profile the full host go first, so later ones find a profiled measurement to share.
RUN_ORDER = {"hostaware": 0, "flops": 1}


@dataclass
class Plan:
    """The ground-truth rows of one workload."""

    key: str
    rows: list[dict[str, str]] = field(default_factory=list)


def workload_key(row: dict[str, str]) -> str:
    """The workload a row measured, as text: rows with one key are one plan, measured once and predicted once.
    What a row's columns do not say outright is spelled out from its workload, so a model timm's benchmark ran
    folded (an RTX 4090 file of PyTorch 2.9, `Workload.reparam`) and the same model run plain on another card (an
    RTX 3090 file of PyTorch 2.4) are two plans, not one priced as whichever row came first; so are a model run
    compiled (`Workload.compile`) and the same model run eagerly."""
    fields = ("model", "mode", "precision", "batch_size", "resolution", "memory_format", "optimizer")
    key = "|".join(row.get(name) or "" for name in fields)
    try:
        workload = workload_from_row(row)
    except (UnderstudyError, KeyError, ValueError):  # pydantic's ValidationError is a ValueError
        return key  # a row no workload can be made of is listed under its columns (its plan says why)
    return (key + ("|reparam" if workload.reparam else "") + ("|torch1" if workload.torch_major == 1 else "")
            + ("|compile" if workload.compile else ""))


def read_rows(paths: list[Path], max_measured_ms: float | None = None,
              skipped: list[str] | None = None) -> list[dict[str, str]]:
    """The rows of ground-truth files, each with its file's name. A row whose numbers cannot be read (an empty cell,
    a batch of 48.5) is left out, and said in `skipped` ("FILE line N: why") when given; a whole number written as a
    float ("48.0", as some of timm's result files write batch sizes) is read as that number."""
    rows = []
    for path in paths:
        with path.open(newline="") as handle:
            for line, row in enumerate(csv.DictReader(handle), start=2):
                try:
                    row = _readable(row)
                except ValueError as exc:
                    if skipped is not None:
                        skipped.append(f"{path.name} line {line}: {exc}")
                    continue
                if max_measured_ms is None or float(row["latency_ms"]) <= max_measured_ms:
                    rows.append({**row, "file": path.name})
    return rows


def _readable(row: dict[str, str]) -> dict[str, str]:
    """The row with its batch size and resolution as whole numbers; ValueError naming the cell that is not one, or
    a latency that is not a number of milliseconds."""
    out = dict(row)
    for column in ("batch_size", "resolution"):
        text = (row.get(column) or "").strip()
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{column} {text!r} is not a number") from None
        if not value.is_integer() or value < 1:
            raise ValueError(f"{column} {text!r} is not a whole number of at least 1")
        out[column] = str(int(value))
    latency = (row.get("latency_ms") or "").strip()
    try:
        measured = float(latency)
    except ValueError:
        raise ValueError(f"latency_ms {latency!r} is not a number") from None
    if not math.isfinite(measured) or measured < 0:
        raise ValueError(f"latency_ms {latency!r} is not a time in milliseconds")
    out["latency_ms"] = latency
    return out


def plan_sample(rows: list[dict[str, str]], per_mode: int | None, seed: int) -> list[Plan]:
    """At most `per_mode` workloads per mode, chosen at random with those measured on the most targets first,
    so that one measurement on the host serves as many target rows as possible."""
    plans: dict[str, Plan] = {}
    for row in rows:
        key = workload_key(row)  # builds the row's workload: once per row
        plans.setdefault(key, Plan(key)).rows.append(row)
    by_mode: dict[str, list[Plan]] = defaultdict(list)
    for key in sorted(plans):
        by_mode[plans[key].rows[0]["mode"]].append(plans[key])
    chosen: list[Plan] = []
    for mode in sorted(by_mode):
        group = by_mode[mode]
        # Each mode draws from its own generator, so its sample is the same whether or not files of the other mode
        # are given (a training run and a later run over every file pick the same training workloads).
        mode_rng = random.Random(seed)
        order = {plan.key: mode_rng.random() for plan in group}
        group.sort(key=lambda plan: (-len({r["target"] for r in plan.rows}), order[plan.key]))
        chosen.extend(group if per_mode is None else group[:per_mode])
    random.Random(seed).shuffle(chosen)
    return chosen


def take_shard(plans: list[Plan], shard: str) -> list[Plan]:
    """Shard "K/N" of a sample: every N-th plan from the K-th (0-based), so N processes on N GPUs split one
    sample between them without overlap."""
    try:
        index, count = (int(part) for part in shard.split("/"))
    except ValueError:
        index, count = -1, 0
    if not 0 <= index < count:
        raise ValueError(f"shard {shard!r}: expected K/N with 0 <= K < N, e.g. 0/2")
    return plans[index::count]


def measured_on_host(log: MeasurementLog, host: HostInfo, plan: Plan) -> bool:
    """Whether the log holds this plan's unrestricted, profiled host measurement (what flops/hostaware need)."""
    try:
        workload = workload_from_row(plan.rows[0])
    except (ValidationError, UnderstudyError):
        return False
    return log.get(host, workload, HostSetting(profile=True)) is not None


def evaluate(engine: Engine, plans: list[Plan], estimators: list[str], budget_s: float | None = None,
             progress: Callable[[str], None] | None = None) -> list[EvalRow]:
    started = time.monotonic()
    ordered = sorted(estimators, key=lambda name: RUN_ORDER.get(name, 9))
    out: list[EvalRow] = []
    for index, plan in enumerate(plans):
        if progress:
            progress(f"[{index + 1}/{len(plans)}] {plan.key}")
        over_budget = budget_s is not None and time.monotonic() - started > budget_s
        out.extend(_evaluate_plan(engine, plan, ordered, over_budget))
    return out


def record_plan(engine: Engine, plan: Plan, estimators: list[str]) -> bool:
    """Measure into the engine's log what `estimators` need for one workload. True once something of it is in the
    log: a workload whose model failed to build, or whose estimators need no measurement, is not there for a replay
    to find."""
    try:
        workload = workload_from_row(plan.rows[0])
    except (ValidationError, UnderstudyError):
        return False
    targets = list(known_targets(plan).values())
    logged = False
    for name in estimators:
        estimator = engine.estimator(name)
        if estimator.needs_gpu:
            try:
                engine.measure_plans(workload, gpu_settings(engine, workload, targets, [name]))
            except Exception:  # noqa: BLE001 - a model that fails to build is listed when the log is scored
                continue
            logged = True
    return logged


def gpu_settings(engine: Engine, workload: Workload, targets: list[TargetSpec],
                 estimators: list[str]) -> list[HostSetting | None]:
    """The host settings the GPU estimators among `estimators` plan for the workload on these targets."""
    return [engine.estimator(name).plan(workload, target, engine.host) for name in estimators
            if engine.estimator(name).needs_gpu for target in targets]


def known_targets(plan: Plan, notes: dict[str, str] | None = None) -> dict[str, TargetSpec]:
    """The catalog's spec of each of the plan's targets, by the name its rows give; one the catalog lacks is left
    out (and noted)."""
    targets = {}
    for row in plan.rows:
        try:
            targets[row["target"]] = catalog().get(row["target"])
        except UnderstudyError as exc:
            if notes is not None:
                notes[row["target"]] = str(exc)
    return targets


def _evaluate_plan(engine: Engine, plan: Plan, estimators: list[str], over_budget: bool) -> list[EvalRow]:
    predicted: dict[str, dict[str, float | None]] = defaultdict(dict)
    outcome: dict[str, dict[str, str]] = defaultdict(dict)
    notes: dict[str, str] = {}
    targets = known_targets(plan, notes)
    try:
        workload: Workload | None = workload_from_row(plan.rows[0])
    except (ValidationError, UnderstudyError) as exc:
        workload, reason = None, str(exc).splitlines()[0]
        notes.update({row["target"]: reason for row in plan.rows})
    for name in estimators:
        for target_name in targets:
            outcome[target_name][name] = "skipped"
        if workload is None or not targets or (over_budget and engine.estimator(name).needs_gpu
                                               and not engine.replay_only):
            if over_budget:
                notes.update({t: "not run: the evaluation's time budget was spent" for t in targets})
            continue
        try:
            results = engine.predict(workload, list(targets.values()), name)
        except Exception as exc:  # noqa: BLE001 - a model that fails to build is a listed row, not a crash
            notes.update({t: f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}" for t in targets})
            continue
        for target_name, result in zip(targets, results, strict=True):
            predicted[target_name][name] = result.latency_ms
            outcome[target_name][name] = result.status.value
            if result.error and result.status.value != "done":
                notes.setdefault(target_name, f"{name}: {result.error[:200]}")
    rows = []
    for row in plan.rows:
        target = row["target"]
        rows.append(
            EvalRow(
                target=target,
                model=row["model"],
                family=model_family(row["model"]),
                resolution=int(row["resolution"]),
                batch_size=int(row["batch_size"]),
                mode=row["mode"],
                precision=row["precision"],
                workload_key=plan.key,
                measured_ms=float(row["latency_ms"]),
                predicted={name: predicted[target].get(name) for name in estimators},
                outcome={name: outcome[target].get(name, "skipped") for name in estimators},
                note=notes.get(target),
            )
        )
    return rows
