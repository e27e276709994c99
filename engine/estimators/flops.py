"""`flops`: the paper's baseline. The host's unrestricted time x host FP32 TFLOPS / target FP32 TFLOPS."""

from __future__ import annotations

from understudy.catalog import TargetSpec
from understudy.estimator_info import estimator_info
from understudy.results import HostInfo, HostSetting, Measurement
from understudy.workload import Workload
from engine.estimators.base import Estimate, Estimator, host_spec, scaled, unusable


class FlopsEstimator(Estimator):
    name = "flops"
    version = estimator_info("flops").version

    def plan(self, workload: Workload, target: TargetSpec, host: HostInfo) -> HostSetting:
        return HostSetting()

    def estimate(self, workload: Workload, target: TargetSpec, host: HostInfo,
                 measurement: Measurement | None) -> Estimate:
        if (bad := unusable(measurement, target, workload)) is not None:
            return bad
        assert measurement is not None
        ratio = float(host_spec(host).fp32_tflops or 0) / float(target.fp32_tflops or 1)
        return scaled(measurement, ratio, {})
