"""`spec`: the paper's mapping. SMs = the target's SM count, core clock = the target's boost clock.

The SM share is applied by a green context or MPS; the clock is locked through NVML where the operator allows it,
otherwise emulated by scaling the measured time by host clock / target clock. A target with more SMs than the
host runs on all of them; any difference between the SMs given and the target's (a green context on Hopper
comes in steps of 8) is emulated by scaling the time by SMs given / target SMs. The result records both.
"""

from __future__ import annotations

from understudy.catalog import TargetSpec
from understudy.estimator_info import estimator_info, estimator_version
from understudy.results import HostInfo, HostSetting, Measurement
from understudy.settings import Settings, get_settings
from understudy.workload import Workload
from engine.estimators.base import Estimate, Estimator, scaled, unusable
from engine.mapping import green_context_sms, mps_percentage, nearest_clock


class SpecEstimator(Estimator):
    name = "spec"
    version = estimator_info("spec").version

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()
        self.version = estimator_version(self.name, self.settings)

    def plan(self, workload: Workload, target: TargetSpec, host: HostInfo) -> HostSetting:
        host_sms = host.sm_count or target.sm_count
        if self.settings.sm_mechanism == "mps":
            _, sms = mps_percentage(target.sm_count, host_sms)
        else:
            sms = green_context_sms(target.sm_count, host_sms, host.compute_capability)
        mechanism = self.settings.sm_mechanism if sms < host_sms else "none"
        if self.settings.allow_clock_lock and host.supported_clocks_mhz:
            clock, mode = nearest_clock(target.boost_clock_mhz, host.supported_clocks_mhz), "locked"
        else:
            clock, mode = target.boost_clock_mhz, "emulated"
        return HostSetting(
            sm_count=sms if mechanism != "none" else None,
            sm_mechanism=mechanism,
            clock_mhz=clock,
            clock_mode=mode,
            memory_cap_gb=target.memory_size_gb,
        )

    def estimate(self, workload: Workload, target: TargetSpec, host: HostInfo,
                 measurement: Measurement | None) -> Estimate:
        if (bad := unusable(measurement, target, workload)) is not None:
            return bad
        assert measurement is not None
        setting = self.plan(workload, target, host)
        factor = 1.0
        details: dict[str, object] = {}
        # The clock the time was measured at: the locked clock (which falls short of a target faster than the
        # host's top clock), or whatever the host ran at when the clock is emulated.
        if setting.clock_mode == "locked" and setting.clock_mhz is not None:
            host_clock = setting.clock_mhz
        else:
            host_clock = measurement.observed_clock_mhz or host.max_sm_clock_mhz or target.boost_clock_mhz
        factor *= host_clock / target.boost_clock_mhz
        details["host_clock_mhz"] = host_clock
        given = setting.sm_count or host.sm_count or target.sm_count
        if target.sm_count != given:
            # The host could not give exactly the target's SMs (partition granularity, or a bigger target):
            # the difference is emulated by linear scaling, as the clock is.
            factor *= given / target.sm_count
            details["sm_emulated"] = f"{given} host SMs scaled to the target's {target.sm_count}"
        return scaled(measurement, factor, details)
