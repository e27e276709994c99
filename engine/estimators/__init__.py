"""The estimators by name. Each records its name and version on every prediction it makes."""

from __future__ import annotations

from understudy.errors import UnknownEstimator
from understudy.settings import Settings
from engine.estimators.analytic import AnalyticEstimator
from engine.estimators.base import Estimator
from engine.estimators.calibrated import CalibratedEstimator
from engine.estimators.flops import FlopsEstimator
from engine.estimators.hostaware import HostAwareEstimator
from engine.estimators.spec import SpecEstimator

ESTIMATORS: dict[str, type[Estimator]] = {
    cls.name: cls
    for cls in (SpecEstimator, FlopsEstimator, AnalyticEstimator, HostAwareEstimator, CalibratedEstimator)
}



def get_estimator(name: str, settings: Settings | None = None) -> Estimator:
    if name not in ESTIMATORS:
        raise UnknownEstimator(f"unknown estimator {name!r}; choose from {', '.join(ESTIMATORS)}")
    if name == SpecEstimator.name:
        return SpecEstimator(settings)
    return ESTIMATORS[name]()
