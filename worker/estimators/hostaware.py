"""`hostaware`: the host's real step, split by what limits each kernel, each part scaled to the target.

The host runs the workload unrestricted and profiles one step, splitting device time into tensor-core math, SIMT
convolution and everything else (worker.timing.kernel_class). Each part is scaled by how much longer the same
kernels take on the target than on the host under the roofline (worker.estimators.roofline), computed from both
GPUs' specifications. The host measurement carries what a spec sheet cannot (kernel choice, launch gaps, real
achieved efficiency); the roofline ratio carries the architecture difference, per class. One measurement serves
every target.
"""

from __future__ import annotations

from understudy.catalog import TargetSpec
from understudy.results import HostInfo, HostSetting, Measurement
from understudy.workload import Workload
from worker.estimators.analytic import counts_for
from worker.estimators.base import Estimate, Estimator, host_spec, scaled, unusable
from worker.estimators.roofline import Efficiency, roofline_ms

EFFICIENCY = Efficiency(tensor=0.6, simt=0.5, memory=0.7, launch_us=3.0)


def class_ratios(workload: Workload, target: TargetSpec, host: TargetSpec, eff: Efficiency) -> dict[str, float]:
    counts = counts_for(workload)
    on_target = roofline_ms(counts, target, workload.precision, eff)
    on_host = roofline_ms(counts, host, workload.precision, eff)
    overall = sum(on_target.values()) / max(sum(on_host.values()), 1e-12)
    return {name: (on_target[name] / on_host[name] if on_host[name] > 0 else overall) for name in on_target}


def scale_factor(kernel_ms: dict[str, float], ratios: dict[str, float]) -> float:
    """The measured time's multiplier: the class ratios weighted by each class's share of host device time."""
    total = sum(kernel_ms.values())
    if total <= 0:
        return sum(ratios.values()) / len(ratios)
    return sum(kernel_ms.get(name, 0.0) / total * ratio for name, ratio in ratios.items())


class HostAwareEstimator(Estimator):
    name = "hostaware"
    version = "1"

    def plan(self, workload: Workload, target: TargetSpec, host: HostInfo) -> HostSetting:
        return HostSetting(profile=True)

    def estimate(self, workload: Workload, target: TargetSpec, host: HostInfo,
                 measurement: Measurement | None) -> Estimate:
        if (bad := unusable(measurement, target)) is not None:
            return bad
        assert measurement is not None
        ratios = class_ratios(workload, target, host_spec(host), EFFICIENCY)
        factor = scale_factor(measurement.kernel_ms, ratios)
        return scaled(measurement, factor, {"class_ratio": ratios, "host_kernel_ms": measurement.kernel_ms})
