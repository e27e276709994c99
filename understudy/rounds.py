"""The round model: how long one federated-learning round takes, from a population's predicted step times.

A client's round is download + local compute + upload:

- download and upload move the model update, `update_bytes` = parameter count x bytes per value of `update_dtype`
  (or `update_mb` as given), over the client's link (understudy/links.py: per target, or its device kind's default);
- local compute is the predicted training step time x local steps (`local_steps`, or `epochs` x `samples` / batch
  size, rounded up).

That sum is the client's *nominal* round time t_d for device kind d. Rounds vary: a client's time in one round is
t_d x exp(sigma_d Z), Z standard normal, so t_d is the median. sigma_d is `sigma` as given, else it is read from the
prediction's measured spread (max minus min over the timed windows): the range of a handful of normal draws averages
about 2.33 standard deviations (five draws: 2.326), so sigma_d = ln(1 + spread / step) / 2.33 (0 without a spread).

A round samples N = ceil(overcommit x K) clients at random (with replacement, by the fleet's weights). Each is
available with probability `availability` and, if available, finishes unless it drops out (`dropout`), so it finishes
with probability q = availability x (1 - dropout). The round closes when K clients have finished (FedScale's
over-commitment: sample 1.3 K, keep the first K); it is incomplete when fewer than K finish.

With F(t) = sum_d w_d Phi(ln(t / t_d) / sigma_d) the chance that a sampled client, if it finishes, takes at most t
(a step at t_d where sigma_d = 0), each sampled client finishes by t independently with probability q F(t), so

    G_K(t) = P(round closed by t) = P(Binomial(N, q F(t)) >= K)        (= F(t)^K when N = K and q = 1)
    P(complete) = P(Binomial(N, q) >= K)
    E[round time | complete] = integral_0^inf (P(complete) - G_K(t)) dt / P(complete)
                                                                          (= E[max of K] when N = K and q = 1)
    deadline d: P(K finish by d) = G_K(d), expected finishers by d = N q F(d)

All torch-free arithmetic (numpy), seeded where it samples (`simulate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from understudy.links import Link, link_for

UpdateDtype = Literal["fp32", "fp16", "bf16", "int8"]
BYTES_PER_VALUE: dict[str, int] = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}
DEFAULT_LOCAL_STEPS = 20
# The expected range of five standard normal draws: turns a measured spread (max - min) into a sigma.
_RANGE_OF_FIVE = 2.326
# The integral over t runs on this many log-spaced points between the fastest and slowest plausible client.
_GRID_POINTS = 3000
_TAIL_SIGMAS = 8.0


class RoundError(ValueError):
    """Round parameters that cannot be modelled (no parameter count for the update, an empty fleet...)."""


class RoundParameters(BaseModel):
    """What a round is, but for the links: local work, the update's size, variability, availability and
    over-commitment (the API takes these as query parameters, and the links apart)."""

    model_config = ConfigDict(extra="forbid")

    local_steps: int | None = Field(default=None, ge=1, le=1_000_000,
                                    description=f"local training steps per round (default {DEFAULT_LOCAL_STEPS})")
    epochs: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False,
                                 description="local epochs per round; with samples, instead of local_steps")
    samples: int | None = Field(default=None, ge=1, le=1_000_000_000, description="training samples per client")
    update_dtype: UpdateDtype = Field(default="fp32", description="the dtype of the update sent up and down")
    update_mb: float | None = Field(default=None, gt=0, le=1e6, allow_inf_nan=False,
                                    description="the update's size in MB (10^6 bytes), instead of parameters x dtype")
    sigma: float | None = Field(default=None, ge=0, le=3, allow_inf_nan=False,
                                description="lognormal sigma of a client's round time (default: from the spread)")
    availability: float = Field(default=1.0, gt=0, le=1, description="P(a sampled client is available)")
    dropout: float = Field(default=0.0, ge=0, lt=1, description="P(an available client drops out of the round)")
    overcommit: float = Field(default=1.0, ge=1, le=10, allow_inf_nan=False,
                              description="sample ceil(overcommit x K) clients, keep the first K to finish")

    @model_validator(mode="after")
    def _one_amount_of_work(self) -> RoundParameters:
        if self.local_steps is not None and (self.epochs is not None or self.samples is not None):
            raise ValueError("give local_steps, or epochs with samples, not both")
        if (self.epochs is None) != (self.samples is None):
            raise ValueError("epochs and samples go together: local steps = epochs x samples / batch size")
        return self

    def steps(self, batch_size: int) -> int:
        """Local steps per round for this batch size."""
        if self.epochs is not None and self.samples is not None:
            return max(1, math.ceil(self.epochs * self.samples / batch_size - 1e-9))
        return self.local_steps if self.local_steps is not None else DEFAULT_LOCAL_STEPS

    def update_bytes(self, param_count: int | None) -> float:
        if self.update_mb is not None:
            return self.update_mb * 1e6
        if param_count is None:
            raise RoundError("the model's parameter count is not known here: give update_mb")
        return float(param_count * BYTES_PER_VALUE[self.update_dtype])

    @property
    def finish_probability(self) -> float:
        return self.availability * (1.0 - self.dropout)

    def sampled(self, k: int) -> int:
        """N: how many clients a round of K samples."""
        return max(k, math.ceil(self.overcommit * k - 1e-9))


class RoundConfig(RoundParameters):
    """A round, with the clients' links."""

    links: dict[str, Link] = Field(default_factory=dict,
                                   description="{down_mbps, up_mbps} per target id or device kind (consumer, edge, "
                                               "datacenter); the rest get their kind's default (understudy/links.py)")


@dataclass(frozen=True)
class DeviceStep:
    """One device kind of a population as the round model takes it: its predicted step and its weight."""

    target_id: str
    step_ms: float
    weight: float
    spread_ms: float | None = None
    target_name: str | None = None


@dataclass(frozen=True)
class ClientKind:
    """A device kind's nominal (median) round, in seconds."""

    target_id: str
    target_name: str | None
    share: float
    step_ms: float
    steps: int
    link: Link
    download_s: float
    compute_s: float
    upload_s: float
    sigma: float

    @property
    def nominal_s(self) -> float:
        return self.download_s + self.compute_s + self.upload_s


def _sigma(device: DeviceStep, given: float | None) -> float:
    if given is not None:
        return given
    if not device.spread_ms or device.step_ms <= 0:
        return 0.0
    return math.log1p(device.spread_ms / device.step_ms) / _RANGE_OF_FIVE


_erf = np.vectorize(math.erf, otypes=[float])


def _phi(x: np.ndarray) -> np.ndarray:
    """The standard normal CDF, elementwise."""
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))


def _binomial_tail(n: int, k: int, p: np.ndarray) -> np.ndarray:
    """P(Binomial(n, p) >= k), elementwise over p; sums whichever side has fewer terms."""
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    if k <= 0:
        return np.ones_like(p)
    if k > n:
        return np.zeros_like(p)
    if k == n:
        return p**n
    upper = n - k + 1 <= k
    js = np.arange(k, n + 1) if upper else np.arange(0, k)
    log_choose = np.array([math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) for j in js])
    side = np.empty_like(p)
    # In slices of p, so that memory stays at a few MB whatever n is.
    step = max(1, 2_000_000 // len(js))
    with np.errstate(divide="ignore", invalid="ignore"):
        for start in range(0, len(p), step):
            part = p[start:start + step]
            log_p, log_q = np.log(part)[:, None], np.log1p(-part)[:, None]
            terms = np.exp(log_choose[None, :] + np.where(js[None, :] > 0, js[None, :] * log_p, 0.0)
                           + np.where(n - js[None, :] > 0, (n - js[None, :]) * log_q, 0.0))
            side[start:start + step] = np.clip(terms.sum(axis=1), 0.0, 1.0)
    return side if upper else 1.0 - side


@dataclass(frozen=True)
class DeadlineOutcome:
    deadline_s: float
    p_complete: float  # P(K clients finish by the deadline)
    expected_finishers: float  # of the N sampled


@dataclass(frozen=True)
class SimulatedRounds:
    """Rounds drawn at random: each round's time (inf when fewer than K finished) and each client's time."""

    k: int
    sampled: int
    round_s: np.ndarray  # (rounds,)
    client_s: np.ndarray  # (rounds, sampled); inf for a client that did not finish
    kinds: np.ndarray  # (rounds, sampled): index into RoundModel.kinds


class RoundModel:
    """A fleet's round times under one RoundConfig (see the module's docstring for the formulas)."""

    def __init__(self, devices: Sequence[DeviceStep], *, batch_size: int, param_count: int | None,
                 config: RoundConfig) -> None:
        if not devices:
            raise RoundError("the population has no device that can run the workload")
        total = math.fsum(device.weight for device in devices)
        steps = config.steps(batch_size)
        size = config.update_bytes(param_count)
        kinds = []
        for device in devices:
            link = link_for(device.target_id, config.links)
            kinds.append(ClientKind(
                target_id=device.target_id, target_name=device.target_name, share=device.weight / total,
                step_ms=device.step_ms, steps=steps, link=link, download_s=link.download_s(size),
                compute_s=device.step_ms * steps / 1000.0, upload_s=link.upload_s(size),
                sigma=_sigma(device, config.sigma)))
        self.kinds: tuple[ClientKind, ...] = tuple(kinds)
        self.config = config
        self.batch_size = batch_size
        self.steps = steps
        self.update_bytes = size
        self._share = np.array([kind.share for kind in kinds])
        self._nominal = np.array([kind.nominal_s for kind in kinds])
        self._sigma = np.array([kind.sigma for kind in kinds])
        # E[round] for any K integrates over one grid: F is computed on it once.
        self._grid_nodes = self._grid()
        self._cdf_middles = self.cdf((self._grid_nodes[1:] + self._grid_nodes[:-1]) / 2)

    # --- the analytic side ------------------------------------------------------------------------------------

    def cdf(self, t: np.ndarray | float) -> np.ndarray:
        """F(t): the chance that a sampled client, if it finishes, takes at most t seconds."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        out = np.zeros_like(t)
        for share, nominal, sigma in zip(self._share, self._nominal, self._sigma, strict=True):
            if sigma == 0.0:
                out += share * (t >= nominal)
            else:
                with np.errstate(divide="ignore"):
                    out += share * _phi(np.log(np.maximum(t, 1e-300) / nominal) / sigma)
        return np.minimum(out, 1.0)

    def closed_by(self, k: int, t: np.ndarray | float) -> np.ndarray:
        """G_K(t): the chance that a round of K has K finished clients by time t."""
        return _binomial_tail(self.config.sampled(k), k, self.config.finish_probability * self.cdf(t))

    def p_complete(self, k: int) -> float:
        """The chance that a round of K gets K finished clients at all."""
        return float(_binomial_tail(self.config.sampled(k), k, np.array([self.config.finish_probability]))[0])

    def _grid(self) -> np.ndarray:
        spread = np.exp(_TAIL_SIGMAS * self._sigma)
        low, high = float(np.min(self._nominal / spread)) * 0.999, float(np.max(self._nominal * spread)) * 1.001
        # The atoms (kinds without variability) are grid nodes, so the midpoint rule never straddles a step.
        return np.unique(np.concatenate([np.geomspace(low, high, _GRID_POINTS), self._nominal]))

    def expected_round_s(self, k: int) -> float:
        """E[round time | the round completes], by integrating P(complete) - G_K(t) over t."""
        p_complete = self.p_complete(k)
        if p_complete <= 0.0:
            return math.inf
        grid = self._grid_nodes
        closed = _binomial_tail(self.config.sampled(k), k, self.config.finish_probability * self._cdf_middles)
        below = np.sum((p_complete - closed) * np.diff(grid))
        return float((grid[0] * p_complete + below) / p_complete)

    def deadline(self, k: int, deadline_s: float) -> DeadlineOutcome:
        return DeadlineOutcome(
            deadline_s=deadline_s, p_complete=float(self.closed_by(k, deadline_s)[0]),
            expected_finishers=float(self.config.sampled(k) * self.config.finish_probability
                                     * self.cdf(deadline_s)[0]))

    # --- the sampled side -------------------------------------------------------------------------------------

    def simulate(self, k: int, rounds: int, seed: int) -> SimulatedRounds:
        """Draw `rounds` rounds of K (seeded: the same seed gives the same rounds)."""
        rng = np.random.default_rng(seed)
        n = self.config.sampled(k)
        kinds = rng.choice(len(self.kinds), size=(rounds, n), p=self._share)
        factor = np.exp(self._sigma[kinds] * rng.standard_normal((rounds, n)))
        finished = rng.random((rounds, n)) < self.config.finish_probability
        client_s = np.where(finished, self._nominal[kinds] * factor, np.inf)
        round_s = np.sort(client_s, axis=1)[:, k - 1]
        return SimulatedRounds(k=k, sampled=n, round_s=round_s, client_s=client_s, kinds=kinds)
