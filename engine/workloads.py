"""Building a workload: the timm (or torchvision) model, its inputs and one step (training or inference) on a device."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from understudy.workload import Workload, model_source


@dataclass(frozen=True)
class Precision:
    """How a precision name runs: the autocast dtype (or None) and the dtype of the weights and inputs."""

    amp_dtype: torch.dtype | None
    model_dtype: torch.dtype

    @property
    def compute_dtype(self) -> torch.dtype:
        return self.amp_dtype or self.model_dtype


def resolve_precision(name: str) -> Precision:
    return {
        "fp32": Precision(None, torch.float32),
        "amp-fp16": Precision(torch.float16, torch.float32),
        "amp-bf16": Precision(torch.bfloat16, torch.float32),
        "fp16": Precision(None, torch.float16),
        "bf16": Precision(None, torch.bfloat16),
    }[name]


# In-place writes that change a tensor's values and nothing else: not its shape, strides or dtype.
_VALUE_WRITES = frozenset(getattr(torch.ops.aten, name) for name in (
    "uniform_", "normal_", "zero_", "fill_", "copy_", "add_", "sub_", "mul_", "div_", "erfinv_", "clamp_",
))


class _NoMetaInit(TorchDispatchMode):
    """Skips the writes that initialise a model's weights on the meta device, where there are no values to write.
    Each one runs a meta kernel written in Python, op by op: they were most of building a ViT there (0.6 of 0.7 s
    for a ViT-L), on every prediction that counts a workload."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]  # torch's protocol
        if func._overloadpacket in _VALUE_WRITES and args[0].device.type == "meta":
            return args[0]
        return func(*args, **(kwargs or {}))


@contextmanager
def _attention(fused: bool) -> Iterator[None]:
    """timm's attention layers as the workload's PyTorch runs them: each layer reads timm's global switch when it is
    built, so the switch is set around model creation and put back after."""
    from timm.layers import set_fused_attn, use_fused_attn

    before = use_fused_attn()
    set_fused_attn(fused)
    try:
        yield
    finally:
        set_fused_attn(before)


def _create(workload: Workload) -> torch.nn.Module:
    """The model, untrained, from the library its name belongs to (understudy.workload.model_source)."""
    if model_source(workload.model) == "torchvision":
        import torchvision

        # GoogLeNet's auxiliary classifiers make its training forward return three outputs; a training step (and an
        # FL client's) uses the main one.
        extra = {"aux_logits": False} if workload.model == "googlenet" else {}
        return torchvision.models.get_model(workload.model, weights=None, num_classes=workload.num_classes, **extra)
    import timm

    return timm.create_model(workload.model, pretrained=False, num_classes=workload.num_classes,
                             in_chans=workload.in_chans)


def build_model(workload: Workload, device: torch.device | str, dtype: torch.dtype | None = None) -> torch.nn.Module:
    meta = torch.device(device).type == "meta"
    # Folding branches reads their weights, so a model to reparameterize for the meta device is built on the CPU with
    # real ones and moved to the meta device folded.
    build_on = "cpu" if meta and workload.reparam else device
    skip_init = torch.device(build_on).type == "meta"
    try:
        with torch.device(build_on), _NoMetaInit() if skip_init else nullcontext(), \
                _attention(workload.torch_major >= 2):
            model = _create(workload)
    except NotImplementedError:
        if not skip_init:
            raise
        # A constructor that computes its layout with tensors on the default device meets ops without a meta kernel
        # (timm 1.0.29's RegNet: torch.unique of its stage widths): such a model is built on the CPU and moved.
        with _attention(workload.torch_major >= 2):
            model = _create(workload).to(device)
    if workload.reparam:
        from timm.utils import reparameterize_model

        model = reparameterize_model(model.eval(), inplace=True).to(device)
    model = model.to(dtype=dtype or resolve_precision(workload.precision).model_dtype)
    if workload.memory_format == "nhwc":
        model = model.to(memory_format=torch.channels_last)
    return model.train(workload.mode == "train")


def make_optimizer(workload: Workload, params: Any, capturable: bool = False) -> torch.optim.Optimizer | None:
    if workload.optimizer == "none" or workload.mode != "train":
        return None
    if workload.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=workload.lr, weight_decay=workload.weight_decay, capturable=capturable)
    return torch.optim.SGD(
        params,
        lr=workload.lr,
        momentum=workload.momentum or 0.0,
        weight_decay=workload.weight_decay or 0.0,
        nesterov=workload.optimizer == "sgd-nesterov",
    )


def make_inputs(
    workload: Workload, device: torch.device | str, dtype: torch.dtype | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    h, w = workload.resolution
    dtype = dtype or resolve_precision(workload.precision).model_dtype
    x = torch.randn(workload.batch_size, workload.in_chans, h, w, device=device, dtype=dtype)
    if workload.memory_format == "nhwc":
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, workload.num_classes, (workload.batch_size,), device=device)
    return x, y


@dataclass
class Step:
    """One step of a workload, ready to call repeatedly on fixed inputs (so it can be captured in a CUDA graph)."""

    model: torch.nn.Module
    run: Callable[[], Any]


def _compiled(model: torch.nn.Module) -> Any:
    """The model under torch.compile (inductor, default mode), as timm's `benchmark.py --torchcompile` runs it.

    Dynamo's compiled code is dropped first: it keeps code per Python function, and the timm models of one class
    share their forward's, so a process measuring several in turn would pass its recompile limit (and run the
    rest eagerly, saying nothing) by the ninth. Inductor's on-disk caches stay, so a model compiled before, in any
    process, compiles again in seconds."""
    torch._dynamo.reset()
    return torch.compile(model)


def make_step(workload: Workload, device: torch.device | str, graph_safe: bool = False,
              mixed_precision: Callable[[torch.dtype], AbstractContextManager[Any]] | None = None) -> Step:
    """The step: inference is a forward under no_grad; training is forward, cross-entropy, backward, optimizer.

    graph_safe keeps gradients allocated between steps (zeroed in place, not freed) and turns off autocast's weight
    cache, both needed for CUDA-graph capture. mixed_precision, given the autocast dtype, makes the context an AMP
    step's forward runs in instead of torch.autocast (the meta-device trace emulates it: engine.counting).
    A compiled workload's model runs through torch.compile, which compiles it on the step's first call; the loss and
    the optimizer stay eager, as timm's benchmark runs them.
    """
    precision = resolve_precision(workload.precision)
    device_type = torch.device(device).type
    model = build_model(workload, device)
    x, y = make_inputs(workload, device)
    forward = _compiled(model) if workload.compile else model

    def autocast() -> Any:
        if precision.amp_dtype is None:
            return nullcontext()
        if mixed_precision is not None:
            return mixed_precision(precision.amp_dtype)
        return torch.autocast(device_type=device_type, dtype=precision.amp_dtype, cache_enabled=not graph_safe)

    if workload.mode == "infer":

        def infer() -> Any:
            with torch.no_grad(), autocast():
                return forward(x)

        return Step(model, infer)

    optimizer = make_optimizer(workload, model.parameters(), capturable=graph_safe and device_type == "cuda")
    loss_fn = torch.nn.CrossEntropyLoss()

    def train() -> Any:
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=not graph_safe)
        else:
            model.zero_grad(set_to_none=not graph_safe)
        with autocast():
            loss = loss_fn(forward(x), y)
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        return loss

    return Step(model, train)
