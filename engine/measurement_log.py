"""A log of host measurements: record them on the GPU host, replay them anywhere.

Evaluations measure hundreds of workloads; the log lets every estimator of a run share one measurement per host
setting, lets a run stopped by its time budget resume where it stopped, and lets estimators that only rescale
host measurements (flops, hostaware) be re-scored on a machine without a GPU from the same measurements.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from understudy.results import HostInfo, HostSetting, Measurement
from understudy.workload import Workload


def _key(host: HostInfo, workload: Workload, setting: HostSetting) -> str:
    plain = setting.model_copy(update={"profile": False})
    return json.dumps([host.fingerprint, workload.digest(), list(plain.key)])


class MeasurementLog:
    """Measurements by (host, workload, setting), kept in a JSON-lines file. A profiled measurement also serves a
    request for the same setting without a profile."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.hosts: dict[str, HostInfo] = {}
        self._entries: dict[str, Measurement] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    self._load(json.loads(line))

    def _load(self, record: dict[str, Any]) -> None:
        if "host" in record:
            host = HostInfo.model_validate(record["host"])
            self.hosts[host.fingerprint] = host
        else:
            self._entries[record["key"]] = Measurement.model_validate(record["measurement"])

    def _append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as out:
            out.write(json.dumps(record) + "\n")

    def get(self, host: HostInfo, workload: Workload, setting: HostSetting) -> Measurement | None:
        found = self._entries.get(_key(host, workload, setting))
        if found is None or (setting.profile and not found.kernel_ms and found.status == "done"):
            return None
        return found

    def put(self, host: HostInfo, workload: Workload, setting: HostSetting, measurement: Measurement) -> None:
        if host.fingerprint not in self.hosts:
            self.hosts[host.fingerprint] = host
            self._append({"host": host.model_dump(mode="json")})
        key = _key(host, workload, setting)
        self._entries[key] = measurement
        self._append({"key": key, "workload": workload.canonical(), "setting": setting.model_dump(),
                      "measurement": measurement.model_dump(mode="json")})

    def only_host(self) -> HostInfo:
        """The single host this log was recorded on (what a replay stands in for)."""
        if len(self.hosts) != 1:
            raise ValueError(f"{self.path} holds measurements from {len(self.hosts)} hosts; expected one")
        return next(iter(self.hosts.values()))
