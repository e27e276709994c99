"""Network links of FL clients: the download and upload bandwidth a device kind gets, by default or as given.

A client's round moves the model down and its update up, so its device kind needs a link as well as a GPU. A request
can give a link per target id or per kind; otherwise the device's kind chooses one of the defaults below. The kind is
read from the target: a catalog data-center GPU, any other catalog GPU (desktops, laptops, workstations) or an inline
spec (the phone- and board-class devices the catalog lacks). The defaults, down / up in Mbit/s, and their sources:

- consumer, 84.33 / 44.10: Ookla Speedtest Global Index, August 2020, global fixed-broadband averages (TelecomTalk,
  2020-09-16, https://telecomtalk.info/india-gains-four-spots-fixed-broadband-index-drops/297716/).
- edge, 55.07 / 21.08: Speedtest Global Index, July 2021, global median mobile download (Telecompetitor,
  https://www.telecompetitor.com/global-mobile-and-fixed-speeds-accelerating-u-s-not-in-top-10-globally/); Ookla,
  Q3 2021, global median 5G upload ("Growing and Slowing: The State of 5G Worldwide in 2021").
- datacenter, 1000 / 1000: an assumption, not a measurement: a 1 Gbit/s link between institutions (cross-silo FL).

Megabits are decimal (10^6 bits), as in networking and in APPFL's simulator.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DeviceKind = Literal["consumer", "edge", "datacenter"]

# Catalog ids of data-center GPUs start with one of these (understudy/data/gpus.csv).
_DATACENTER_PREFIXES = ("t4", "v100", "a10", "l4", "a100", "h100", "h200")


class Link(BaseModel):
    """A client's network link: download and upload bandwidth in decimal megabits per second."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    down_mbps: float = Field(gt=0, le=1e6, allow_inf_nan=False, description="download bandwidth, Mbit/s")
    up_mbps: float = Field(gt=0, le=1e6, allow_inf_nan=False, description="upload bandwidth, Mbit/s")

    def download_s(self, size_bytes: float) -> float:
        return size_bytes * 8 / (self.down_mbps * 1e6)

    def upload_s(self, size_bytes: float) -> float:
        return size_bytes * 8 / (self.up_mbps * 1e6)

    @property
    def symmetric_mbps(self) -> float:
        """The one bandwidth that moves the same bytes down and up in the same total time (the harmonic mean):
        what tools with a single bandwidth per client (FedScale, APPFL) need to reproduce this link's round."""
        return 2.0 / (1.0 / self.down_mbps + 1.0 / self.up_mbps)


DEFAULT_LINKS: dict[DeviceKind, Link] = {
    "consumer": Link(down_mbps=84.33, up_mbps=44.10),
    "edge": Link(down_mbps=55.07, up_mbps=21.08),
    "datacenter": Link(down_mbps=1000.0, up_mbps=1000.0),
}


def device_kind(target_id: str) -> DeviceKind:
    """consumer, edge or datacenter, from the target's id (inline specs have ids that start with "inline-")."""
    if target_id.startswith("inline-"):
        return "edge"
    if target_id.startswith(_DATACENTER_PREFIXES):
        return "datacenter"
    return "consumer"


def link_for(target_id: str, given: dict[str, Link] | None = None) -> Link:
    """The link given for this target id, else the one given for its kind (consumer, edge, datacenter), else its
    kind's default."""
    kind = device_kind(target_id)
    given = given or {}
    return given.get(target_id) or given.get(kind) or DEFAULT_LINKS[kind]
