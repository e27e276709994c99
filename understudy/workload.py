"""The workload spec: what to time (a timm or torchvision model's training step or forward pass), its canonical form and
digest."""

from __future__ import annotations

import difflib
import hashlib
import json
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from understudy.errors import InvalidWorkload

Mode = Literal["train", "infer"]
Precision = Literal["fp32", "amp-fp16", "amp-bf16", "fp16", "bf16"]
MemoryFormat = Literal["nchw", "nhwc"]
OptimizerName = Literal["none", "sgd", "sgd-nesterov", "adamw"]

# Hyper-parameters each optimizer gets when the user leaves them out. They matter for the canonical form (a
# workload written with or without the defaults is the same workload) and barely for timing.
OPTIMIZER_DEFAULTS: dict[str, dict[str, float]] = {
    "none": {},
    "sgd": {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4},
    "sgd-nesterov": {"lr": 1e-4, "momentum": 0.9, "weight_decay": 0.0},
    "adamw": {"lr": 1e-3, "weight_decay": 0.05},
}

MAX_PIXELS_SIDE = 4096


@lru_cache(maxsize=1)
def timm_model_names() -> frozenset[str]:
    """Names in timm's registry, read from a list generated from timm so that validation needs no torch."""
    text = resources.files("understudy.data").joinpath("timm_models.txt").read_text()
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


@lru_cache(maxsize=1)
def torchvision_model_names() -> frozenset[str]:
    """torchvision's classification models that timm's registry lacks (FedScale's shufflenet_v2_x2_0, mobilenet_v2,
    the regnet_x_*/regnet_y_* and vit_b_16 families), read from a list scripts/build_torchvision_models.py generates:
    a name both have is timm's."""
    text = resources.files("understudy.data").joinpath("torchvision_models.txt").read_text()
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


ModelSource = Literal["timm", "torchvision"]


def model_source(name: str) -> ModelSource:
    """Which library builds a (checked) model name."""
    return "torchvision" if name in torchvision_model_names() else "timm"


@lru_cache(maxsize=1)
def reparameterizable_models() -> frozenset[str]:
    """The models timm.utils.reparameterize_model changes (scripts/build_reparam_models.py generates the list)."""
    text = resources.files("understudy.data").joinpath("timm_reparam_models.txt").read_text()
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


def check_model_name(name: str) -> str:
    names = timm_model_names() | torchvision_model_names()
    if name in names:
        return name
    close = difflib.get_close_matches(name, sorted(names), n=5, cutoff=0.6)
    hint = f"; close matches: {', '.join(close)}" if close else ""
    raise InvalidWorkload(f"unknown timm model {name!r}{hint}", field="model")


class Workload(BaseModel):
    """One step of a timm (or torchvision classification) model: a training step (forward, cross-entropy, backward,
    optimizer) or a forward pass."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(max_length=120, examples=["resnet50"],
                       description="a name in timm.list_models(), or a torchvision classification model timm lacks "
                                   "(shufflenet_v2_x2_0, mobilenet_v2, ...)")
    mode: Mode = "train"
    # strict: JSON's true is not a batch of 1, nor "32" a number
    batch_size: int = Field(default=32, ge=1, le=4096, strict=True)
    resolution: tuple[int, int] = Field(default=(224, 224), description="square side or [height, width]")
    in_chans: int = Field(default=3, ge=1, le=64, strict=True)
    num_classes: int = Field(default=1000, ge=1, le=100_000, strict=True)
    precision: Precision = "amp-fp16"
    memory_format: MemoryFormat = "nchw"
    optimizer: OptimizerName = "sgd"
    lr: float | None = Field(default=None, gt=0, le=100)
    momentum: float | None = Field(default=None, ge=0, lt=1)
    weight_decay: float | None = Field(default=None, ge=0, le=10)
    # The target's PyTorch generation, where it changes the kernels a step runs. 1.x had no
    # scaled_dot_product_attention (timm's attention runs as two matmuls and a softmax over a materialised score
    # matrix) and its optimizers stepped one weight at a time (2.x's default on CUDA steps them all with a few
    # multi-tensor kernels per update).
    torch_major: int = Field(default=2, ge=1, le=2, strict=True,
                             description="1 when the target runs PyTorch 1.x (no fused attention, "
                             "optimizers step one weight at a time)")
    # Inference of the deployed form: the train-time branches that RepVGG, MobileOne, FastViT, RepGhost, LeViT and
    # their kin keep beside each convolution (parallel 1x1 and identity branches, BatchNorms) folded into it, as
    # timm.utils.reparameterize_model does and timm's benchmark.py --reparam runs. A model with nothing to fold runs
    # unchanged.
    reparam: bool = Field(default=False, strict=True,
                          description="inference with the model's train-time branches folded into its convolutions "
                          "(timm.utils.reparameterize_model)")
    # The model as torch.compile runs it (inductor, default mode): the step's pointwise chains fused into fewer
    # kernels, convolutions and matmuls left to cuDNN and cuBLAS. Compiling takes seconds to minutes once per
    # process and is no part of the step time.
    compile: bool = Field(default=False, strict=True,
                          description="the model compiled with torch.compile (inductor, default mode); compile time "
                          "is not in the step time")

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        try:
            return check_model_name(value)
        except InvalidWorkload as exc:
            raise ValueError(str(exc)) from None

    @field_validator("resolution", mode="before")
    @classmethod
    def _square(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = (value, value)
        if isinstance(value, (list, tuple)) and len(value) == 2:
            for side in value:
                if not isinstance(side, int) or isinstance(side, bool) or not 8 <= side <= MAX_PIXELS_SIDE:
                    raise ValueError(f"each side of the resolution must be an integer from 8 to {MAX_PIXELS_SIDE}")
        return value

    @model_validator(mode="after")
    def _fill_optimizer(self) -> Workload:
        # Inference has no optimizer; training fills the optimizer's defaults so the canonical form is unique.
        optimizer = self.optimizer if self.mode == "train" else "none"
        defaults = OPTIMIZER_DEFAULTS[optimizer]
        given = {"lr": self.lr, "momentum": self.momentum, "weight_decay": self.weight_decay}
        if optimizer in ("none", "adamw") and self.momentum is not None and self.mode == "train":
            raise ValueError(f"optimizer {optimizer!r} takes no momentum")
        filled = {key: (given[key] if given[key] is not None else defaults.get(key)) for key in given}
        if optimizer == "none":
            filled = {key: None for key in given}
        object.__setattr__(self, "optimizer", optimizer)
        for key, value in filled.items():
            object.__setattr__(self, key, value)
        if self.reparam and self.mode == "train":
            raise ValueError("reparam is for inference: training needs the branches that reparameterizing folds away")
        if self.reparam and self.model not in reparameterizable_models():
            object.__setattr__(self, "reparam", False)  # nothing to fold: the plain workload, with its digest
        if self.compile and self.torch_major == 1:
            raise ValueError("compile needs PyTorch 2: torch.compile came with it")
        if self.in_chans != 3 and model_source(self.model) == "torchvision":
            raise ValueError(f"{self.model} is a torchvision model, which takes 3 input channels; in_chans must be 3")
        return self

    def canonical(self) -> dict[str, Any]:
        """The workload as a plain dict with every default spelled out and nothing optional left as None."""
        data = self.model_dump(mode="json")
        data["resolution"] = list(self.resolution)
        if self.torch_major == 2:
            # Left out at its default, so a workload keeps the digest it had before the field existed.
            del data["torch_major"]
        if not self.reparam:
            del data["reparam"]
        if not self.compile:
            del data["compile"]
        return {key: value for key, value in data.items() if value is not None}

    def digest(self) -> str:
        return sha256_of(self.canonical())

    @property
    def label(self) -> str:
        h, w = self.resolution
        side = str(h) if h == w else f"{h}x{w}"
        folded = " reparam" if self.reparam else ""
        compiled = " compiled" if self.compile else ""
        return f"{self.model} {self.mode} {self.precision} b{self.batch_size} {side}px{folded}{compiled}"


def sha256_of(data: Any) -> str:
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def workload_from_row(row: dict[str, str]) -> Workload:
    """A workload from one ground-truth row (../shared/groundtruth format, plus optional `reparam` and `compile`
    columns: "true" for a row measured folded or compiled; without them, the software column says, as
    `_timm_reparam_run` and `_compiled_run` read it)."""
    return Workload(
        model=row["model"],
        mode=row["mode"],
        batch_size=int(row["batch_size"]),
        resolution=int(row["resolution"]),
        precision=row["precision"],
        memory_format=row.get("memory_format") or "nchw",
        optimizer=row.get("optimizer") or "none",
        torch_major=1 if _before_torch_2(row.get("software") or "") else 2,
        reparam=row["mode"] == "infer" and (row.get("reparam") == "true" or _timm_reparam_run(row)),
        compile=row.get("compile") == "true" or _compiled_run(row.get("software") or ""),
    )


def _compiled_run(software: str) -> bool:
    """Whether a ground-truth row's software column says the model ran compiled: timm's `benchmark.py
    --torchcompile` rows read "torch 2.9.1 cu128 torch.compile (inductor)"."""
    return "torch.compile" in software.lower()


def _timm_reparam_run(row: dict[str, str]) -> bool:
    """Whether a ground-truth row comes from timm's benchmark CSVs recorded with `--reparam`: those of PyTorch 2.9
    on. No column says so; the RTX 4090's PyTorch 2.9.1 file shows it. There the reparameterizable families (RepVGG,
    MobileOne, FastViT, RepGhost, RepViT, LeViT, EfficientViT-M) run 1.4x faster on average against the same models
    in the RTX 3090's PyTorch 2.4 file than the other 635 models do (1.03x), each by about the factor its folded form
    counts (benchmarks/accuracy/README.md, "Reparameterized inference")."""
    release = _torch_release(row.get("software") or "")
    return "pytorch-image-models" in (row.get("source") or "") and release is not None and release >= (2, 9)


def _torch_release(software: str) -> tuple[int, int] | None:
    """(major, minor) of "torch X.Y..." in a ground-truth row's software column, if it names one."""
    words = software.lower().split()
    if "torch" not in words or words.index("torch") + 1 >= len(words):
        return None
    parts = words[words.index("torch") + 1].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return None


def _before_torch_2(software: str) -> bool:
    """Whether a ground-truth row's software column ("torch 1.12 cu113", "NGC PyTorch 22.09/22.10") names PyTorch
    1.x. NGC containers before 23.05 carry PyTorch 1.x."""
    release = _torch_release(software)
    if release is not None:
        return release[0] == 1
    words = software.lower().split()
    if "ngc" in words and "pytorch" in words and words.index("pytorch") + 1 < len(words):
        container = words[words.index("pytorch") + 1].split("/")[0]
        return container < "23.05"
    return False
