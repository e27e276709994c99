"""The service's settings: the one pydantic-settings object of understudy.settings (environment variables)."""

from understudy.settings import Settings, get_settings

__all__ = ["Settings", "get_settings"]
