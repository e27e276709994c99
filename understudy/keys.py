"""Cache keys: one per (workload, target, estimator@version, host), unique in the store."""

from __future__ import annotations

from understudy.catalog import TargetSpec
from understudy.workload import Workload, sha256_of

# Estimators that never touch a GPU give the same answer on every host.
ANY_HOST = "any"


def cache_key(workload: Workload, target: TargetSpec, estimator: str, version: str, host_key: str) -> str:
    return sha256_of(
        {
            "workload": workload.canonical(),
            "target": target.digest(),
            "estimator": f"{estimator}@{version}",
            "host": host_key,
        }
    )
