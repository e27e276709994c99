"""Cache identity: what a prediction records about how it was made, and the key that makes it unique in the store.

`cache_identity` is the one place the estimator, version and host of a prediction are decided. The API calls it when
it files a request (app.crud), the engine when it predicts (engine.engine, and so the CLI's cache), so a result
lands under the key its own run names. `cache_key` hashes an identity with the workload and the target.
"""

from __future__ import annotations

from dataclasses import dataclass

from understudy.catalog import TargetSpec
from understudy.estimator_info import CALIBRATED_ESTIMATOR, calibrated_version
from understudy.workload import Workload, sha256_of

# Estimators that never touch a GPU give the same answer on every host.
ANY_HOST = "any"


@dataclass(frozen=True)
class CacheIdentity:
    estimator: str
    version: str
    host_key: str  # the measuring GPU host's fingerprint, or ANY_HOST


def cache_identity(estimator: str, version: str, gpu_fingerprint: str | None,
                   calibration_digest: str | None = None) -> CacheIdentity:
    """The identity of a prediction by `estimator`@`version`, measured on the GPU host with `gpu_fingerprint` (None
    for an estimator that touches no GPU: any host gives the same answer).

    For the calibrated estimator, pass its base's name, version and host and the digest of the target's
    calibration: the identity is the calibrated estimator's, its version naming the base and the points (a new
    calibration or another base is a new cache entry), its host the base's."""
    host_key = gpu_fingerprint if gpu_fingerprint is not None else ANY_HOST
    if calibration_digest is None:
        return CacheIdentity(estimator, version, host_key)
    return CacheIdentity(CALIBRATED_ESTIMATOR, calibrated_version(estimator, version, calibration_digest), host_key)


def cache_key(workload: Workload, target: TargetSpec, identity: CacheIdentity) -> str:
    return sha256_of(
        {
            "workload": workload.canonical(),
            "target": target.digest(),
            "estimator": f"{identity.estimator}@{identity.version}",
            "host": identity.host_key,
        }
    )
