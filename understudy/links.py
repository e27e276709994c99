"""Network links of FL clients: the download and upload bandwidth a device kind gets, by default or as given, and
how much the links of one kind's devices differ.

A client's round moves the model down and its update up, so its device needs a link as well as a GPU. A request can
give a link per target id or per kind; otherwise the device's kind chooses one of the defaults below. The kind comes
from the catalog's data on the target (`device_kind`): an inline spec is a device the catalog lacks (a phone, a
board, a laptop part); a catalog GPU is consumer or data-center by its product segment, the brand its catalog name
carries (GeForce and TITAN cards, and the RTX and Quadro workstation cards, sit in homes and offices on fixed
broadband; Tesla, A-, L- and H-series boards in data centers). The defaults are each kind's median client, down / up
in Mbit/s:

- consumer, 84.33 / 44.10: Ookla Speedtest Global Index, August 2020, global fixed-broadband averages (TelecomTalk,
  2020-09-16, https://telecomtalk.info/india-gains-four-spots-fixed-broadband-index-drops/297716/).
- edge, 55.07 / 21.08: Speedtest Global Index, July 2021, global median mobile download (Telecompetitor,
  https://www.telecompetitor.com/global-mobile-and-fixed-speeds-accelerating-u-s-not-in-top-10-globally/); Ookla,
  Q3 2021, global median 5G upload ("Growing and Slowing: The State of 5G Worldwide in 2021").
- datacenter, 1000 / 1000: an assumption, not a measurement: a 1 Gbit/s link between institutions (cross-silo FL).

Links of one kind differ by device: each client's link is its kind's times exp(sigma Z), one Z for both directions (a
fiber line is fast both ways). LINK_SIGMA per kind:

- consumer and edge, 1.22: the spread of U.S. fixed-broadband Speedtest results, 2022: the slowest tenth of users
  measured 30.49 Mbit/s or less and the fastest tenth 698.62 or more (Ookla's Mark Giles, quoted at
  https://forums.rwusers.com/t/thats-it-im-moving-to-iceland/919), a median near their geometric mean (146; Ookla,
  Q1 2022: 151.46, https://www.tvtechnology.com/news/verizon-tops-ooklas-fixed-broadband-speed-tests), so lognormal
  with sigma = ln(698.62 / 30.49) / (2 x 1.2816). No percentile spread of mobile speeds was found: edge devices
  take the fixed-broadband one.
- datacenter, 0: the assumed institutional link is the same for every silo.

Megabits are decimal (10^6 bits), as in networking and in APPFL's simulator.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from understudy.catalog import TargetSpec

DeviceKind = Literal["consumer", "edge", "datacenter"]

# The z-score of the 90th percentile: a p10-p90 range spans 2 x 1.2816 standard deviations.
_Z90 = 1.2816
LINK_SIGMA: dict[DeviceKind, float] = {
    "consumer": math.log(698.62 / 30.49) / (2 * _Z90),
    "edge": math.log(698.62 / 30.49) / (2 * _Z90),
    "datacenter": 0.0,
}
# Words of a catalog name that mark a card for desks (homes, offices), whatever its brand prefix.
_DESK_BRANDS = ("geforce", "titan", "rtx", "quadro")


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


def device_kind(target: TargetSpec) -> DeviceKind:
    """consumer, edge or datacenter, from the catalog's data on the target (see the module's docstring)."""
    if target.origin == "inline":
        return "edge"
    words = target.name.lower().replace("-", " ").split()
    return "consumer" if any(word in _DESK_BRANDS for word in words) else "datacenter"


def link_for(target_id: str, kind: DeviceKind, given: dict[str, Link] | None = None) -> Link:
    """The link given for this target id, else the one given for its kind, else its kind's default."""
    given = given or {}
    return given.get(target_id) or given.get(kind) or DEFAULT_LINKS[kind]
