"""The target catalog: GPU specifications with sources, lookup by id, alias or words of a name, a power limit set on
a catalog GPU (`rtx-4090@300w`), and user-defined targets (priced at a power limit of their own against their chip's
catalog products)."""

from __future__ import annotations

import csv
import difflib
import re
from collections.abc import Iterator
from functools import lru_cache
from importlib import resources
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from understudy.errors import UnknownTarget
from understudy.power import (ChipReference, HeldClocks, chip_references, dram_watts, held_clocks, power_at_budget,
                              product_budget, tensor_per_sm_cycle)
from understudy.workload import sha256_of

# Dense FLOP per clock per SM assumed for a user-defined target that gives no throughputs: a GeForce Ampere/Ada
# SM (128 FP32 lanes; fp16 tensor with fp32 accumulate at 512/clk), the most common consumer design.
DEFAULT_FP32_FLOP_PER_CLK_SM = 256.0
DEFAULT_TENSOR_FLOP_PER_CLK_SM = 512.0
# An ambiguous name lists at most this many candidates: the error is read by a person, and a request may hold many.
MAX_CANDIDATES = 8
# A catalog GPU under a power limit the user sets: "rtx4090@300w", "RTX 4090 @ 300 W".
POWER_LIMIT = re.compile(r"^(?P<target>.+?)\s*@\s*(?P<watts>[0-9]+(?:\.[0-9]+)?)\s*w$", re.IGNORECASE)
# The power limits taken, as shares of the GPU's rated TDP. Below a quarter the cube rule is far outside anything it
# was checked on (the catalog's products span 0.45, the A10 and T4, to 1 of their chip's best budget); above the
# rating the clock only rises to the boost clock, and twice the rating is beyond any board's.
POWER_LIMIT_SHARES = (0.25, 2.0)
# The least power budget a user-defined part may have, as a share of its chip's best-supplied product's (a clock of
# 0.63 of its boost): a laptop part at its lowest TGP has about 0.35-0.8 of it, and below a quarter the rule is as far
# outside what it was checked on as a catalog power limit under a quarter of the rating.
INLINE_BUDGET_FLOOR = 0.25


class TargetSpec(BaseModel):
    """One GPU as the estimators see it. Throughputs are dense peak figures at the boost clock."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # A catalog id, "inline-<hash>", or a catalog id with the power limit a user set on it ("rtx-4090@300w").
    id: str = Field(min_length=1, max_length=80, pattern=r"^[a-z0-9][a-z0-9._-]*(@[0-9]+(\.[0-9]+)?w)?$",
                    examples=["rtx-3090"])
    name: str = Field(min_length=1, max_length=120, examples=["GeForce RTX 3090"])
    architecture: str = Field(default="unknown", max_length=60)
    compute_capability: str = Field(default="", max_length=8)
    sm_count: int = Field(ge=1, le=1024)
    boost_clock_mhz: float = Field(ge=100, le=5000)
    memory_size_gb: float = Field(gt=0.25, le=4096)
    memory_bandwidth_gbps: float = Field(ge=10, le=100_000)
    # Lower bounds a real GPU clears by far: a rate of 5e-324 TFLOPS would make a prediction infinite.
    l2_cache_mb: float = Field(default=4.0, ge=0.01, le=4096)
    fp32_tflops: float | None = Field(default=None, ge=0.01, le=10_000)
    fp16_tensor_tflops: float | None = Field(default=None, ge=0.01, le=100_000)
    bf16_tensor_tflops: float | None = Field(default=None, ge=0.01, le=100_000)
    tf32_tensor_tflops: float | None = Field(default=None, ge=0.01, le=100_000)
    # The clock held under a sustained deep-learning load: below the boost clock where the power limit binds
    # (understudy/power.py derives it from TDP, SM count and the chip's other products). None: the boost clock.
    sustained_clock_mhz: float | None = Field(default=None, ge=100, le=5000)
    # The clock held while the tensor cores run at full rate in each precision: lower than the sustained clock where
    # the part does more tensor work per SM and cycle than its chip's best-supplied product (a workstation part of a
    # GeForce chip) and the power limit binds (understudy/power.py). None: the sustained clock.
    fp16_tensor_clock_mhz: float | None = Field(default=None, ge=100, le=5000)
    bf16_tensor_clock_mhz: float | None = Field(default=None, ge=100, le=5000)
    tf32_tensor_clock_mhz: float | None = Field(default=None, ge=100, le=5000)
    # The chip, the power limit and the DRAM technology the held clocks were derived from (catalog GPUs; a power limit
    # set with `id@<W>w`). The estimators read only the clocks, so none is in the digest.
    gpu_chip: str = Field(default="", max_length=40)
    tdp_w: float | None = Field(default=None, gt=0, le=10_000)
    memory_type: str = Field(default="", max_length=20)
    source: str = Field(default="user-defined", max_length=2000)
    tensor_source: str = Field(default="user-defined", max_length=2000)
    origin: Literal["catalog", "inline"] = "inline"

    @model_validator(mode="after")
    def _fill_throughputs(self) -> TargetSpec:
        # A spec without throughputs gets the common consumer design's rates, so every target can be estimated.
        per_clock = self.sm_count * self.boost_clock_mhz / 1e6
        defaults = {
            "fp32_tflops": per_clock * DEFAULT_FP32_FLOP_PER_CLK_SM,
            "fp16_tensor_tflops": per_clock * DEFAULT_TENSOR_FLOP_PER_CLK_SM,
            "bf16_tensor_tflops": per_clock * DEFAULT_TENSOR_FLOP_PER_CLK_SM,
            "tf32_tensor_tflops": per_clock * DEFAULT_TENSOR_FLOP_PER_CLK_SM / 2,
        }
        for key, value in defaults.items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, round(value, 3))
        return self

    def digest(self) -> str:
        """A hash of everything an estimator reads, so an edited spec never hits a stale cache entry."""
        return sha256_of(self.model_dump(mode="json", exclude={"source", "tensor_source", "origin", "gpu_chip",
                                                               "tdp_w", "memory_type"}))

    def sustained_clock(self) -> float:
        """MHz under a sustained load: the power-limited clock where known, never above the boost clock."""
        return min(self.sustained_clock_mhz or self.boost_clock_mhz, self.boost_clock_mhz)

    def tensor_clock(self, precision: str) -> float:
        """MHz held while the tensor cores run at full rate in `precision`, never above the sustained clock."""
        held = {"amp-bf16": self.bf16_tensor_clock_mhz, "bf16": self.bf16_tensor_clock_mhz,
                "fp32": self.tf32_tensor_clock_mhz}.get(precision, self.fp16_tensor_clock_mhz)
        return min(held or self.sustained_clock(), self.sustained_clock())

    def sustained_tensor_tflops(self, precision: str) -> float:
        """The tensor rate at the clock held under tensor work (the peak rates are quoted at the boost clock)."""
        return self.tensor_tflops(precision) * self.tensor_clock(precision) / self.boost_clock_mhz

    def sustained_fp32_tflops(self) -> float:
        return float(self.fp32_tflops or 0) * self.sustained_clock() / self.boost_clock_mhz

    def fp32_share_beside_int32(self) -> float:
        """The share of the FP32 peak a kernel that mixes integer index arithmetic with its FMAs (a depthwise
        convolution) can issue. Where the FP32 lanes also do the integer work (Maxwell and Pascal; and the consumer
        chips since Ampere, GA10x, AD10x and GB20x, whose FP32 peak counts the half of the lanes that double as INT32)
        the integer work takes lanes the peak counts: half. Where INT32 has lanes of its own (Volta, Turing, GA100,
        Hopper): all (NVIDIA's Volta, Turing and GA102 architecture whitepapers: Volta and Turing issue FP32 and
        INT32 concurrently; a GA10x SM partition has one FP32 datapath and one of FP32 or INT32). An unknown chip is
        taken to be of the common consumer design."""
        major, _, minor = self.compute_capability.partition(".")
        if not major.isdigit():
            return 0.5
        shared = int(major) < 7 or (major == "8" and minor != "0") or int(major) >= 11
        return 0.5 if shared else 1.0

    def tensor_rates(self) -> dict[str, float]:
        """Peak dense tensor TFLOPS at the boost clock by understudy.power.TENSOR_PRECISIONS."""
        return {"fp16": float(self.fp16_tensor_tflops or 0), "bf16": float(self.bf16_tensor_tflops or 0),
                "tf32": float(self.tf32_tensor_tflops or 0)}

    def with_clocks(self, clocks: HeldClocks) -> dict[str, float]:
        """The fields that hold `clocks`, to update a spec with."""
        return {"sustained_clock_mhz": clocks.sustained_mhz,
                **{f"{precision}_tensor_clock_mhz": mhz for precision, mhz in clocks.tensor_mhz.items()}}

    def tensor_tflops(self, precision: str) -> float:
        """Peak tensor-core rate for the matrix math of a precision (fp32 convolutions may use TF32)."""
        if precision in ("amp-bf16", "bf16"):
            return float(self.bf16_tensor_tflops or 0)
        if precision == "fp32":
            return float(self.tf32_tensor_tflops or 0)
        return float(self.fp16_tensor_tflops or 0)


def _normalise(text: str) -> str:
    # Vendor and brand words, in any combination: NVML says 'NVIDIA GeForce RTX 4090', the catalog 'GeForce RTX 4090'.
    text = re.sub(r"^(?:(?:geforce|nvidia|tesla)\s+)+", "", text.strip().lower())
    return re.sub(r"[^a-z0-9]+", "", text)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _base(name: str) -> str:
    """The name without its parenthesised variant: 'GeForce RTX 3060 (12 GB)' -> 'rtx3060'."""
    return _normalise(re.sub(r"\(.*?\)", "", name))


class Catalog:
    """Targets by id, with case- and punctuation-insensitive lookup by name or alias."""

    def __init__(self, targets: list[TargetSpec]) -> None:
        self._targets = {target.id: target for target in targets}
        # Each chip's best-supplied product holds its boost clock (understudy.power).
        self._references = chip_references(
            (t.gpu_chip, product_budget(t.tdp_w, t.sm_count, t.boost_clock_mhz, t.memory_type, t.memory_bandwidth_gbps),
             tensor_per_sm_cycle(t.tensor_rates(), t.sm_count, t.boost_clock_mhz), t.memory_type)
            for t in targets if t.gpu_chip and t.tdp_w)
        # Normal forms computed once: a request may name many targets, each looked up on the API's event loop.
        self._forms = {t.id: (_normalise(t.id), _normalise(t.name), _base(t.name)) for t in targets}
        self._words = {t.id: _words(t.id) | _words(t.name) for t in targets}

    def __iter__(self) -> Iterator[TargetSpec]:
        return iter(self._targets.values())

    def __len__(self) -> int:
        return len(self._targets)

    def ids(self) -> list[str]:
        return list(self._targets)

    def get(self, query: str) -> TargetSpec:
        """The one target a name means; UnknownTarget lists the candidates when none or several match."""
        if query in self._targets:
            return self._targets[query]
        if (limited := POWER_LIMIT.match(query.strip())) is not None:
            return self.at_power_limit(self.get(limited["target"]), float(limited["watts"]))
        key = _normalise(query)
        if not key:
            raise UnknownTarget("empty target name")
        forms, words = self._forms, _words(query)
        numbered = any(char.isdigit() for char in "".join(words))
        stages = (
            lambda t: forms[t.id][0] == key or forms[t.id][1] == key,
            lambda t: forms[t.id][2] == key,
            lambda t: forms[t.id][1].startswith(key) or forms[t.id][0].startswith(key),
            # Words of the name in any order, some left out: "A6000", "quadro 8000", "RTX PRO 6000 Max-Q". One of them
            # must hold the model number, so that a word many GPUs could answer to ("blackwell") names none.
            lambda t: numbered and words <= self._words[t.id],
        )
        for matches in stages:
            found = [target for target in self._targets.values() if matches(target)]
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                names = [f"{t.id} ({t.name})" for t in found]
                shown = ", ".join(names[:MAX_CANDIDATES]) + (f" and {len(names) - MAX_CANDIDATES} more"
                                                             if len(names) > MAX_CANDIDATES else "")
                raise UnknownTarget(f"target {query[:120]!r} is ambiguous; candidates: {shown}", names)
        close = difflib.get_close_matches(key, [forms[t.id][1] for t in self._targets.values()], n=5, cutoff=0.5)
        names = [f"{t.id} ({t.name})" for t in self._targets.values() if forms[t.id][1] in close]
        hint = f"; did you mean: {', '.join(names)}" if names else "; `understudy targets` lists the catalog"
        raise UnknownTarget(f"unknown target {query[:120]!r}{hint}", names)

    def at_power_limit(self, target: TargetSpec, watts: float) -> TargetSpec:
        """`target` with its power limit set to `watts` (id "<id>@<W>w"): the clock it holds then comes from
        understudy.power against its chip's best-supplied product, so at its rated TDP it is the catalog's own."""
        if "@" in target.id:
            raise UnknownTarget(f"{target.id} already has a power limit; set one on {target.id.split('@')[0]}")
        if target.tdp_w is None or target.gpu_chip not in self._references:
            raise UnknownTarget(f"{target.id} has no rated TDP in the catalog, so no power limit can be set on it")
        low, high = (share * target.tdp_w for share in POWER_LIMIT_SHARES)
        if not low <= watts <= high:
            raise UnknownTarget(f"a power limit on {target.name} (rated {target.tdp_w:g} W) must lie between "
                                f"{low:g} and {high:g} W; got {watts:g} W")
        limit = f"{watts:g}"
        return TargetSpec.model_validate({**target.model_dump(), "id": f"{target.id}@{limit}w",
                                          "name": f"{target.name} at {limit} W", "tdp_w": watts,
                                          **target.with_clocks(self.held_clocks(target, watts))})

    def chips(self) -> list[str]:
        """The chips whose products the catalog holds with a rated TDP, so that a power rule has a reference."""
        return sorted(self._references)

    def held_clocks(self, part: TargetSpec, watts: float) -> HeldClocks:
        """The clocks `part` (its chip, SMs, boost clock, DRAM and tensor rates) holds at `watts`: understudy.power
        against its chip's best-supplied catalog product, to 0.1 MHz. A part whose DRAM technology is not given is
        taken to have its chip's reference's."""
        reference = self._reference(part.gpu_chip)
        memory_type = part.memory_type or reference.memory_type
        budget = product_budget(watts, part.sm_count, part.boost_clock_mhz, memory_type, part.memory_bandwidth_gbps)
        return held_clocks(part.boost_clock_mhz, budget, reference,
                           tensor_per_sm_cycle(part.tensor_rates(), part.sm_count, part.boost_clock_mhz))

    def least_power(self, part: TargetSpec) -> float:
        """The lowest power limit a user-defined part may be priced at (INLINE_BUDGET_FLOOR)."""
        reference = self._reference(part.gpu_chip)
        return power_at_budget(INLINE_BUDGET_FLOOR * reference.budget, part.sm_count, part.boost_clock_mhz,
                               dram_watts(part.memory_type or reference.memory_type, part.memory_bandwidth_gbps))

    def _reference(self, chip: str) -> ChipReference:
        if chip not in self._references:
            raise UnknownTarget(f"no catalog GPU is built on the chip {chip[:40]!r}, so none sets the power its clock "
                                f"needs; the chips it knows: {', '.join(self.chips())}")
        return self._references[chip]

    def find_by_device_name(self, device_name: str, memory_gb: float | None = None) -> TargetSpec | None:
        """The catalog entry for a host GPU as NVML names it ('NVIDIA H200', 'NVIDIA GeForce RTX 4090')."""
        key = _normalise(device_name)
        found = [t for t in self._targets.values() if _normalise(t.name).startswith(key) or _base(t.name) == key]
        if not found:
            # NVML appends memory and packaging ('NVIDIA H100 80GB HBM3'): fall back to the words before them.
            words = re.sub(r"\b\d+\s*GB\b.*$", "", device_name, flags=re.IGNORECASE)
            stem = _normalise(words)
            found = [t for t in self._targets.values() if stem and _normalise(t.name).startswith(stem)]
        if len(found) > 1 and memory_gb is not None:
            found.sort(key=lambda t: abs(t.memory_size_gb - memory_gb))
        return found[0] if found else None


@lru_cache(maxsize=1)
def catalog() -> Catalog:
    """The packaged catalog (understudy/data/gpus.csv, built by scripts/build_catalog.py)."""
    text = resources.files("understudy.data").joinpath("gpus.csv").read_text()
    targets = []
    for row in csv.DictReader(text.splitlines()):
        targets.append(
            TargetSpec(
                id=row["id"],
                name=row["name"],
                architecture=row["architecture"],
                compute_capability=row["compute_capability"],
                sm_count=int(row["sm_count"]),
                boost_clock_mhz=float(row["boost_clock_mhz"]),
                memory_size_gb=float(row["memory_size_gb"]),
                memory_bandwidth_gbps=float(row["memory_bandwidth_gbps"]),
                l2_cache_mb=float(row["l2_cache_mb"]),
                fp32_tflops=float(row["fp32_tflops_boost"]),
                fp16_tensor_tflops=float(row["fp16_tensor_tflops"]),
                bf16_tensor_tflops=float(row["bf16_tensor_tflops"]),
                tf32_tensor_tflops=float(row["tf32_tensor_tflops"]),
                sustained_clock_mhz=float(row["sustained_clock_mhz"]),
                fp16_tensor_clock_mhz=float(row["fp16_tensor_clock_mhz"]),
                bf16_tensor_clock_mhz=float(row["bf16_tensor_clock_mhz"]),
                tf32_tensor_clock_mhz=float(row["tf32_tensor_clock_mhz"]),
                gpu_chip=row["gpu_chip"],
                tdp_w=float(row["tdp_w"]),
                memory_type=row["memory_type"],
                source=row["source"],
                tensor_source=row["tensor_source"],
                origin="catalog",
            )
        )
    return Catalog(targets)


def catalog_id(name: str) -> str:
    """The catalog id a name means, for a validator: its ValueError names the candidates for an unknown name."""
    try:
        return catalog().get(name).id
    except UnknownTarget as exc:
        raise ValueError(str(exc)) from None


# A catalog GPU as a request or a calibration point names it, validated to its id.
CatalogTarget = Annotated[str, StringConstraints(min_length=1, max_length=120), AfterValidator(catalog_id)]


class InlineTarget(BaseModel):
    """A user-defined target: at least SM count, boost clock, memory bandwidth and memory size."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=120, examples=["My RTX 3060 laptop"])
    sm_count: int = Field(ge=1, le=1024)
    boost_clock_mhz: float = Field(ge=100, le=5000)
    memory_bandwidth_gbps: float = Field(ge=10, le=100_000)
    memory_size_gb: float = Field(gt=0.25, le=4096)
    # Lower bounds a real GPU clears by far: a rate of 5e-324 TFLOPS would make a prediction infinite.
    l2_cache_mb: float = Field(default=4.0, ge=0.01, le=4096)
    architecture: str = Field(default="unknown", max_length=60)
    compute_capability: str = Field(
        default="", pattern=r"^([0-9]{1,2}\.[0-9])?$", examples=["8.6"],
        description="says whether the FP32 lanes also do the integer work (the consumer chips since Ampere: 8.6, 8.9, "
        "12.0) or INT32 has lanes of its own (7.0, 7.5, 8.0, 9.0), which sets the depthwise convolutions' rate; a "
        "consumer chip when left out")
    fp32_tflops: float | None = Field(default=None, ge=0.01, le=10_000)
    fp16_tensor_tflops: float | None = Field(default=None, ge=0.01, le=100_000)
    bf16_tensor_tflops: float | None = Field(default=None, ge=0.01, le=100_000)
    tf32_tensor_tflops: float | None = Field(default=None, ge=0.01, le=100_000)
    sustained_clock_mhz: float | None = Field(
        default=None, ge=100, le=5000,
        description="the clock it holds under a sustained load, if its power limit keeps it below the boost clock "
        "(a laptop, Max-Q or low-power part); the boost clock when left out, or derived from tdp_w")
    gpu_chip: str = Field(default="", max_length=40, examples=["AD103"],
                          description="the chip it is built on, as the catalog names chips (`understudy targets "
                          "--json`): with tdp_w, its catalog products set the power its clock needs")
    tdp_w: float | None = Field(
        default=None, ge=1, le=2000, examples=[150],
        description="the power limit it runs at (a laptop's TGP, a Max-Q or low-power part's TDP): with gpu_chip, "
        "sets the clock it holds under load by the catalog's power rule; give this or sustained_clock_mhz")
    memory_type: str = Field(
        default="", max_length=20, examples=["GDDR6"],
        description="its DRAM technology (GDDR6, GDDR6X, GDDR7, HBM2e, HBM3...), whose energy per bit the power "
        "rule takes out of tdp_w; its chip's best-supplied catalog product's when left out")

    @field_validator("gpu_chip")
    @classmethod
    def _chip_as_the_catalog_spells_it(cls, value: str) -> str:
        return value.strip().upper()

    @model_validator(mode="after")
    def _one_clock(self) -> InlineTarget:
        if self.tdp_w is None:
            return self
        if self.sustained_clock_mhz is not None:
            raise ValueError("give tdp_w or sustained_clock_mhz, not both: tdp_w sets the clock held under load")
        if not self.gpu_chip:
            raise ValueError("tdp_w needs gpu_chip, the chip the part is built on (an RTX 4090 Laptop GPU is an "
                             "AD103): the chip's catalog products set the power its clock needs")
        try:
            least = catalog().least_power(self._provisional())
        except UnknownTarget as exc:
            raise ValueError(str(exc)) from None
        if self.tdp_w < least:
            raise ValueError(f"tdp_w {self.tdp_w:g} W is below the {least:.0f} W the power rule prices a part of "
                             f"{self.sm_count} SMs at {self.boost_clock_mhz:g} MHz on {self.gpu_chip} down to")
        return self

    def _provisional(self) -> TargetSpec:
        return TargetSpec(id="inline", origin="inline", **self.model_dump())

    def to_spec(self) -> TargetSpec:
        spec = self._provisional()
        if self.tdp_w is not None:
            spec = spec.model_copy(update=spec.with_clocks(catalog().held_clocks(spec, self.tdp_w)))
        return spec.model_copy(update={"id": "inline-" + spec.digest()[:12]})


def resolve_target(item: str | InlineTarget | TargetSpec) -> TargetSpec:
    """A catalog id/alias or an inline spec, as a TargetSpec."""
    if isinstance(item, TargetSpec):
        return item
    if isinstance(item, InlineTarget):
        return item.to_spec()
    return catalog().get(item)
