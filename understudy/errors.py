"""Exceptions with messages a user can act on. The API maps them to JSON errors in one place (app/errors.py)."""


class UnderstudyError(Exception):
    """Base class: every error the engine raises on purpose."""


class InvalidWorkload(UnderstudyError, ValueError):
    """The workload cannot be run as written (unknown model, bad size...)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class UnknownTarget(UnderstudyError, LookupError):
    """No catalog GPU matches a name, or several do."""

    def __init__(self, message: str, candidates: list[str] | None = None) -> None:
        super().__init__(message)
        self.candidates = candidates or []


class UnknownEstimator(UnderstudyError, LookupError):
    """An estimator name that is not registered."""


class NoGpu(UnderstudyError, RuntimeError):
    """A GPU estimator was asked for on a machine without an NVIDIA GPU."""


class RestrictionError(UnderstudyError, RuntimeError):
    """A restriction (green context, MPS, clock lock) could not be applied."""


class NotCalibrated(UnderstudyError, LookupError):
    """The calibrated estimator was asked for a target with no stored calibration."""
