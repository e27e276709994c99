"""The shipped count table: the counts of timm's models (and the torchvision models Understudy adds) at their default
workload, training and inference, for any batch size, read without torch.

A step's counts are affine in its batch size. The kernels a step launches do not change with the batch, and each
kernel's FLOPs and bytes are a part that does not depend on it (weights) plus a part per sample (activations). So two
traces, at batch 32 and 256, give every batch's counts, and a third, at 8, checks that when the table is made: a
workload that fails the check is left out, and is counted as before. The step's peak of live bytes is the largest
of the trace's live bytes over time, each of them affine in the batch; the table keeps the few of those lines that
are the largest at some batch size from 2 to 4096.

The table holds amp-fp16 and fp32 steps in NCHW and in channels-last, and amp-bf16 ones where they differ
from amp-fp16 (thin grouped convolutions, a softmax into fp32: `bf16_twin`); any other amp-bf16 step launches its
amp-fp16 twin's kernels, and is read from the twin's entry (of the same memory format). An fp32 step is not read
from another: its bytes and the kernels its matmuls and convolutions run on are its own. Counts depend on timm's
model code, so the table is used only under the timm version it was made with (read from the installed package's
metadata, not imported).
scripts/build_count_table.py makes it.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from importlib.resources import files
from pathlib import Path
from typing import Any

from understudy.workload import Workload, sha256_of
from engine.counts import WorkloadCounts

BATCHES = (32, 256)  # the two traced batch sizes every other batch's counts are read off
CHECK_BATCH = 8  # the batch size a made entry is checked at
SMALLEST, LARGEST = 2, 4096  # the batch sizes the table answers (a batch of one is counted: some models branch on it)
TABLE_FILE = "count-table.zip"
ABOUT = "table.json"  # the member saying which timm and torch made the table


def _family(workload: Workload) -> dict[str, Any]:
    """The workload with its batch size left out."""
    canonical = workload.canonical()
    del canonical["batch_size"]
    return canonical


def family_key(workload: Workload) -> str:
    """What the table files a workload under: the digest of its family."""
    return sha256_of(_family(workload))


def _between(first: float, second: float, batch: int) -> float:
    low, high = BATCHES
    return first + (second - first) * (batch - low) / (high - low)


@dataclass(frozen=True)
class AffineCounts:
    """A workload's counts at the two traced batch sizes, from which any batch size's are read."""

    # (kind, FLOPs, bytes at the first batch size, FLOPs, bytes at the second, how many such kernels)
    ops: tuple[tuple[str, float, float, float, float, int], ...]
    param_bytes: float
    param_count: int
    buffer_bytes: float
    input_bytes: tuple[float, float]
    # The live bytes at both batch sizes of each moment of the trace that is its peak at some batch size.
    peaks: tuple[tuple[float, float], ...]

    def at(self, batch: int) -> WorkloadCounts:
        ops = [(kind, _between(f1, f2, batch), _between(b1, b2, batch))
               for kind, f1, b1, f2, b2, number in self.ops for _ in range(number)]
        return WorkloadCounts.of_ops(ops, param_bytes=self.param_bytes, param_count=self.param_count,
                                     buffer_bytes=self.buffer_bytes, input_bytes=_between(*self.input_bytes, batch),
                                     peak_live_bytes=max((_between(p1, p2, batch) for p1, p2 in self.peaks),
                                                         default=0.0))

    @classmethod
    def of_traces(cls, first: WorkloadCounts, first_timeline: list[int], second: WorkloadCounts,
                  second_timeline: list[int]) -> AffineCounts:
        """From the counts and live-bytes timelines of two traces of one workload, at BATCHES. ValueError when the
        two traces launched different kernels or allocated differently (the model branches on the batch)."""
        if (len(first.ops) != len(second.ops) or len(first_timeline) != len(second_timeline)
                or any(a[0] != b[0] for a, b in zip(first.ops, second.ops, strict=True))):
            raise ValueError("the step's kernels change with the batch size")
        numbers: dict[tuple[str, float, float, float, float], int] = {}
        for (kind, f1, b1), (_, f2, b2) in zip(first.ops, second.ops, strict=True):
            numbers[(kind, f1, b1, f2, b2)] = numbers.get((kind, f1, b1, f2, b2), 0) + 1
        return cls(ops=tuple((*op, number) for op, number in numbers.items()), param_bytes=first.param_bytes,
                   param_count=first.param_count, buffer_bytes=first.buffer_bytes,
                   input_bytes=(first.input_bytes, second.input_bytes),
                   peaks=_upper_lines(list(zip(first_timeline, second_timeline, strict=True))))

    def to_json(self) -> dict[str, Any]:
        return {"ops": [list(op) for op in self.ops], "param_bytes": self.param_bytes,
                "param_count": self.param_count, "buffer_bytes": self.buffer_bytes,
                "input_bytes": list(self.input_bytes), "peaks": [list(peak) for peak in self.peaks]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AffineCounts:
        return cls(ops=tuple((str(k), float(f1), float(b1), float(f2), float(b2), int(n))
                             for k, f1, b1, f2, b2, n in data["ops"]),
                   param_bytes=float(data["param_bytes"]), param_count=int(data["param_count"]),
                   buffer_bytes=float(data["buffer_bytes"]),
                   input_bytes=(float(data["input_bytes"][0]), float(data["input_bytes"][1])),
                   peaks=tuple((float(p1), float(p2)) for p1, p2 in data["peaks"]))


def _upper_lines(points: list[tuple[int, int]]) -> tuple[tuple[float, float], ...]:
    """Of the lines through (BATCHES[0], a) and (BATCHES[1], b), those no other line is at or above over the whole
    range the table answers: a line is below another everywhere in a range when it is at both of its ends, so these
    include every line that is the largest at some batch size in it."""
    ends = sorted({(_between(a, b, SMALLEST), _between(a, b, LARGEST), a, b) for a, b in points}, reverse=True)
    kept: list[tuple[float, float]] = []
    best_at_largest = float("-inf")
    for _, at_largest, a, b in ends:
        if at_largest > best_at_largest:
            kept.append((float(a), float(b)))
            best_at_largest = at_largest
    return tuple(kept)


def count_affine(workload: Workload) -> AffineCounts:
    """Trace the workload at BATCHES (its own batch size is ignored) and check the result at CHECK_BATCH against a
    third trace. ValueError when the counts are not affine in the batch size."""
    from engine.counting import count_workload, traced_counts  # the table's maker needs torch; its reader does not

    traces = [traced_counts(workload.model_copy(update={"batch_size": batch})) for batch in BATCHES]
    affine = AffineCounts.of_traces(traces[0][0], traces[0][1], traces[1][0], traces[1][1])
    read, counted = affine.at(CHECK_BATCH), count_workload(workload.model_copy(update={"batch_size": CHECK_BATCH}))
    if not same_counts(read, counted):
        raise ValueError(f"the counts read at batch {CHECK_BATCH} are not the counted ones")
    return affine


def same_counts(read: WorkloadCounts, counted: WorkloadCounts, tolerance: float = 1e-9) -> bool:
    """Whether two counts launch the same kernels (in any order) with the same FLOPs and bytes, and have the same
    weights, input and peak, to a relative tolerance."""
    def close(a: float, b: float) -> bool:
        return abs(a - b) <= tolerance * max(abs(a), abs(b), 1.0)

    ops_read, ops_counted = sorted(read.ops), sorted(counted.ops)
    return (len(ops_read) == len(ops_counted)
            and all(a[0] == b[0] and close(a[1], b[1]) and close(a[2], b[2])
                    for a, b in zip(ops_read, ops_counted, strict=True))
            and all(close(getattr(read, name), getattr(counted, name))
                    for name in ("param_bytes", "buffer_bytes", "input_bytes", "peak_live_bytes")))


class CountTable:
    """A count table file: a zip of ABOUT and one JSON member per model, its families' entries by family_key. A
    model's entries (precisions, formats, modes, sizes) repeat one another's kernels, which compresses within a member
    and not across members (a member per family would make the table four times as large)."""

    def __init__(self, path: Path) -> None:
        self.archive = zipfile.ZipFile(path)
        self.about: dict[str, Any] = json.loads(self.archive.read(ABOUT))
        self.names = set(self.archive.namelist())

    def get(self, workload: Workload) -> AffineCounts | None:
        """The workload's family's counts; an amp-bf16 workload's may be its amp-fp16 twin's (`bf16_twin`), which is
        in the same member."""
        name = _member_name(workload.model)
        if name not in self.names:
            return None
        member = json.loads(self.archive.read(name))
        entry = member.get(family_key(workload))
        if entry is not None:
            return AffineCounts.from_json(entry["counts"])
        if workload.precision == "amp-bf16":
            twin = member.get(family_key(workload.model_copy(update={"precision": "amp-fp16"})))
            if twin is not None and bf16_twin(affine := AffineCounts.from_json(twin["counts"])):
                return affine
        return None

    def entries(self) -> Iterator[tuple[dict[str, Any], AffineCounts]]:
        """Every entry, model by model: its workload with the batch size left out, and its counts."""
        for name in sorted(self.names - {ABOUT}):
            member = json.loads(self.archive.read(name))
            for key in sorted(member):
                yield member[key]["workload"], AffineCounts.from_json(member[key]["counts"])


def _member_name(model: str) -> str:
    return f"models/{model}.json"


def bf16_twin(fp16: AffineCounts) -> bool:
    """Whether an amp-fp16 step's counts may also be its amp-bf16 step's. Autocast casts the same ops to 16 bits of
    either kind, of the same size, so the two traces differ only where PyTorch picks a kernel by dtype: a thin grouped
    convolution goes to cuDNN in fp16 and to PyTorch's own kernels in bf16 (engine.counting's `_native_depthwise`),
    which moves it between the 'grouped' and 'depthwise' kinds, and a softmax into fp32 is one kernel from fp16 but a
    cast and a softmax from bf16. The first shows in the counts: a step with neither kind has no such convolution. The
    second does not, so the table holds an amp-bf16 entry of its own wherever the traces differ
    (`bf16_counts_apart`), and get() reads that first."""
    return not any(op[0] in ("depthwise", "grouped") for op in fp16.ops)


def bf16_counts_apart(workload: Workload, fp16: AffineCounts) -> bool:
    """Whether an amp-fp16 family's amp-bf16 step needs an entry of its own: its trace at CHECK_BATCH is not what
    the amp-fp16 entry reads there (the reasons are bf16_twin's)."""
    from engine.counting import count_workload  # the table's maker needs torch; its reader does not

    if not bf16_twin(fp16):
        return True
    bf16 = count_workload(workload.model_copy(update={"precision": "amp-bf16", "batch_size": CHECK_BATCH}))
    return not same_counts(fp16.at(CHECK_BATCH), bf16)


def write_table(path: Path, entries: list[tuple[Workload, AffineCounts]], about: dict[str, Any]) -> None:
    """A table of these entries (each a workload of its family and its counts); `about` names the timm and torch
    that counted them."""
    members: dict[str, dict[str, Any]] = {}
    for workload, counts in entries:
        members.setdefault(workload.model, {})[family_key(workload)] = {"workload": _family(workload),
                                                                         "counts": counts.to_json()}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_LZMA) as archive:
        archive.writestr(ABOUT, json.dumps(about, sort_keys=True))
        for model in sorted(members):
            archive.writestr(_member_name(model), json.dumps(members[model], sort_keys=True, separators=(",", ":")))


def installed_timm() -> str | None:
    try:
        return metadata.version("timm")
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def shipped_table() -> CountTable | None:
    """The table shipped with the package, if there is one and it was made with the installed timm."""
    path = Path(str(files("engine.data").joinpath(TABLE_FILE)))
    if not path.is_file():
        return None
    table = CountTable(path)
    return table if table.about.get("timm") == installed_timm() else None


def shipped_counts(workload: Workload) -> WorkloadCounts | None:
    """The workload's counts from the shipped table; None when it does not hold them."""
    if not SMALLEST <= workload.batch_size <= LARGEST or (table := shipped_table()) is None:
        return None
    affine = table.get(workload)
    return affine.at(workload.batch_size) if affine is not None else None
