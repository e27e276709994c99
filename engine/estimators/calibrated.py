"""The calibrated estimator's entry in the registry. The engine runs it (Engine._predict_calibrated): it needs its
base estimator's predictions for the workload and for each calibration point, which one plan/estimate per target
cannot give. This class only carries its name, version and needs_gpu, and refuses to be run on its own."""

from __future__ import annotations

from understudy.catalog import TargetSpec
from understudy.errors import UnderstudyError
from understudy.estimator_info import CALIBRATED_ESTIMATOR, estimator_info
from understudy.results import HostInfo, HostSetting, Measurement
from understudy.workload import Workload
from engine.estimators.base import Estimate, Estimator

_ONLY_THROUGH_THE_ENGINE = "the calibrated estimator runs through Engine.predict, which fits it over its base estimator"


class CalibratedEstimator(Estimator):
    name = CALIBRATED_ESTIMATOR
    version = estimator_info(CALIBRATED_ESTIMATOR).version
    # Where it runs is its base's business (the engine checks the base); on its own it touches no GPU.
    needs_gpu = False

    def plan(self, workload: Workload, target: TargetSpec, host: HostInfo) -> HostSetting | None:
        raise UnderstudyError(_ONLY_THROUGH_THE_ENGINE)

    def estimate(self, workload: Workload, target: TargetSpec, host: HostInfo,
                 measurement: Measurement | None) -> Estimate:
        raise UnderstudyError(_ONLY_THROUGH_THE_ENGINE)
