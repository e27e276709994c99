"""One scored evaluation row (a measured workload on a target plus every estimator's answer) and model families."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from understudy.workload import Mode

Outcome = Literal["done", "oom", "failed", "skipped"]

# Leading name parts that say where a checkpoint came from (TensorFlow, Gluon, torchvision, DeepMind, JAX,
# semi-/weakly-supervised or Instagram pretraining, adversarial ensembles, older timm code), not which network it
# is: tf_efficientnet_b0 runs the efficientnet_b0 graph, so it belongs in the same latency family.
_WEIGHT_ORIGIN_PREFIXES = frozenset({"tf", "gluon", "legacy", "tv", "dm", "jx", "ssl", "swsl", "ig", "ens", "adv"})

# A depth or width code at the end of the first name part: digits, up to two letters, optional digits
# (50, 50d, 26ts, 102x2, 50x16). Digits right after a 'v' are a version (mobilenetv3, swinv2) and stay.
_SIZE_CODE = re.compile(r"(?<![v\d])\d+[a-z]{0,2}\d*$")

# Shorter leftovers come from names whose digits are part of the name (cs3se_edgenet -> 'cs'), not a size code.
_MIN_FAMILY_CHARS = 3


def model_family(name: str) -> str:
    """The architecture family of a timm model name, for grouping errors.

    Rule, applied to the lower-cased name:
      1. Drop leading weight-origin prefixes (tf, gluon, legacy, tv, dm, jx, ssl, swsl, ig, ens, adv) while another
         part follows: they name where the weights came from, not the network.
      2. Keep the text before the first '_'.
      3. Strip a trailing depth/width code (digits, up to two letters, optional digits), unless the digits follow a
         'v' (a version, which names a different family) or stripping would leave fewer than three characters.

    Examples: resnet50 -> resnet, resnet50d -> resnet, resnet50x16_clip -> resnet, resnetv2_50x1_bit -> resnetv2,
    vit_small_patch16_224 -> vit, efficientnet_b0 -> efficientnet, tf_efficientnet_b0 -> efficientnet,
    gluon_resnet50_v1b -> resnet, mobilenetv3_large_100 -> mobilenetv3, seresnext26ts -> seresnext,
    res2net50d -> res2net, deit3_small_patch16_224 -> deit, cs3darknet_m -> cs3darknet.
    """
    parts = name.lower().split("_")
    while len(parts) > 1 and parts[0] in _WEIGHT_ORIGIN_PREFIXES:
        parts = parts[1:]
    stem = parts[0]
    stripped = _SIZE_CODE.sub("", stem)
    return stripped if len(stripped) >= _MIN_FAMILY_CHARS else stem


class EvalRow(BaseModel):
    """A workload measured on a target GPU, with each estimator's prediction for it (None where it gave none).

    Family defaults to model_family(model). Predictions and outcomes are reconciled on construction (see
    _reconcile): every number left in predicted is positive and finite, and its outcome is 'done' or absent.
    """

    model_config = ConfigDict(extra="forbid")

    target: str = Field(description="GPU name")
    model: str = Field(description="timm model name")
    family: str = Field(description="model_family(model) unless given")
    resolution: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    mode: Mode
    precision: str
    workload_key: str = Field(description="the workload independent of the target, e.g. model|mode|precision|batch|res")
    measured_ms: float = Field(gt=0, allow_inf_nan=False)
    predicted: dict[str, float | None] = Field(default_factory=dict, description="estimator -> predicted ms")
    outcome: dict[str, Outcome] = Field(default_factory=dict, description="estimator -> how its run ended")
    note: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _fill_in(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if not data.get("family") and isinstance(data.get("model"), str):
            data["family"] = model_family(data["model"])
        return _reconcile(data)

    def prediction(self, estimator: str) -> float | None:
        return self.predicted.get(estimator)

    def outcome_of(self, estimator: str) -> Outcome:
        """How the estimator's run ended; an estimator the row never mentions was not run for it, i.e. skipped."""
        if self.predicted.get(estimator) is not None:
            return "done"
        return self.outcome.get(estimator, "skipped")


def _usable(value: Any) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(number) and number > 0


def _reconcile(data: dict[str, Any]) -> dict[str, Any]:
    """Make each estimator's prediction and outcome agree, so the metrics only ever see positive finite numbers.

    A prediction that is not a positive finite number, a 'done' outcome without a number, or a number beside an
    oom/failed/skipped outcome becomes predicted None with a non-done outcome, and the note says why. The row then
    shows in the report's list of rows not run instead of stopping a long evaluation at its last step.
    """
    predicted = data.get("predicted")
    outcome = data.get("outcome")
    if not isinstance(predicted, dict) or not isinstance(outcome, dict | None):
        return data
    predicted, outcome = dict(predicted), dict(outcome or {})
    reasons: list[str] = []
    for estimator, value in predicted.items():
        said = outcome.get(estimator)
        if value is None:
            if said == "done":
                outcome[estimator] = "failed"
                reasons.append(f"{estimator}: done without a prediction")
        elif not _usable(value):
            predicted[estimator] = None
            outcome[estimator] = "failed" if said in (None, "done") else said
            reasons.append(f"{estimator}: unusable prediction {value!r}")
        elif said not in (None, "done"):
            predicted[estimator] = None
            reasons.append(f"{estimator}: prediction {value!r} ignored, outcome {said}")
    if reasons:
        data["note"] = "; ".join([data["note"], *reasons] if data.get("note") else reasons)
    return {**data, "predicted": predicted, "outcome": outcome}
