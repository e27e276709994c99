"""The round model: how long one federated-learning round takes, from a population's predicted step times.

A client's round is download + local compute + upload:

- download and upload move the model update, `update_bytes` = parameter count x bytes per value of `update_dtype`
  (or `update_mb` as given), over the client's link (understudy/links.py: per target, or its device kind's default);
- local compute is the step's wall-clock time (understudy/steps.py: the predicted GPU time or the CPU's time to
  issue the step's ops, whichever is longer) x local steps (`local_steps`, or `epochs` x `samples` / batch size,
  rounded up).

Those are a device kind's *nominal* (median device's) times: compute A_d and communication B_d. Devices of one kind
differ: a device's compute is A_d c and its communication B_d / b, with c = exp(s_c Z1) and b = exp(s_l Z2)
(`device_compute_sigma`, `device_link_sigma`; by default per device kind, understudy/steps.py and
understudy/links.py). Rounds vary too: a client's time in one round is (A_d c + B_d / b) x exp(sigma_d Z3). sigma_d is
`sigma` as given, else it is read from the prediction's measured spread (max minus min over the timed windows): the
range of a handful of normal draws averages about 2.33 standard deviations (five draws: 2.326), so sigma_d =
ln(1 + spread / step) / 2.33 (0 without a spread).

A round samples N = ceil(overcommit x K) clients at random (with replacement, by the fleet's weights). Each is
available with probability `availability` and, if available, finishes unless it drops out (`dropout`), so it finishes
with probability q = availability x (1 - dropout). The round closes when K clients have finished (FedScale's
over-commitment: sample 1.3 K, keep the first K); it is incomplete when fewer than K finish.

With F(t) = sum_d w_d F_d(t) the chance that a sampled client, if it finishes, takes at most t (F_d integrates over
Z1, Z2, Z3: the widest-spread one in closed form, the others by Gauss-Hermite quadrature), each sampled client
finishes by t independently with probability q F(t), so

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

from understudy.bands import DEFAULT_COVERAGE, ErrorBand
from understudy.links import LINK_SIGMA, DeviceKind, Link, link_for
from understudy.steps import COMPUTE_SIGMA, launch_ms, wall_ms

UpdateDtype = Literal["fp32", "fp16", "bf16", "int8"]
BYTES_PER_VALUE: dict[str, int] = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}
DEFAULT_LOCAL_STEPS = 20
# The expected range of five standard normal draws: turns a measured spread (max - min) into a sigma.
_RANGE_OF_FIVE = 2.326
# The integral over t runs on this many log-spaced points between the fastest and slowest plausible client.
_GRID_POINTS = 3000
_TAIL_SIGMAS = 8.0
# Gauss-Hermite nodes per quadrature dimension of a device kind's CDF.
_QUADRATURE_NODES = 16
# The z-score of the 90th percentile: a band's 80 % interval spans 2 x 1.2816 standard deviations of a lognormal.
_Z90 = 1.2816


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
                                description="lognormal sigma of a client's round time from round to round "
                                            "(default: from the prediction's spread)")
    device_compute_sigma: float | None = Field(
        default=None, ge=0, le=3, allow_inf_nan=False,
        description="lognormal sigma of one device's local compute around its kind's (default per device kind: "
                    "consumer and edge 0.6, datacenter 0; understudy/steps.py)")
    device_link_sigma: float | None = Field(
        default=None, ge=0, le=3, allow_inf_nan=False,
        description="lognormal sigma of one device's link around its kind's (default per device kind: consumer "
                    "and edge 1.22, datacenter 0; understudy/links.py)")
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
    """One device kind of a population as the round model takes it: its predicted GPU step, its weight, its kind,
    and what the prediction says beside the step (its spread, its kernel launches, its error band)."""

    target_id: str
    step_ms: float
    weight: float
    kind: DeviceKind
    spread_ms: float | None = None
    target_name: str | None = None
    kernels: int | None = None
    band: ErrorBand | None = None


@dataclass(frozen=True)
class ClientKind:
    """A device kind's nominal (median device's) round, in seconds, and how its devices and rounds vary."""

    target_id: str
    target_name: str | None
    kind: DeviceKind
    share: float
    gpu_ms: float  # the predicted GPU time of a step
    launch_ms: float  # the CPU's time to issue the step's ops
    steps: int
    link: Link
    download_s: float
    compute_s: float
    upload_s: float
    sigma: float  # round to round
    compute_sigma: float  # device to device, compute
    link_sigma: float  # device to device, link
    band: ErrorBand | None = None

    @property
    def step_ms(self) -> float:
        """The wall-clock step: the GPU time or the CPU's issuing, whichever is longer."""
        return wall_ms(self.gpu_ms, self.launch_ms)

    @property
    def nominal_s(self) -> float:
        return self.download_s + self.compute_s + self.upload_s

    @property
    def comm_s(self) -> float:
        return self.download_s + self.upload_s

    def step_interval_ms(self, coverage: float = DEFAULT_COVERAGE) -> tuple[float, float] | None:
        """The wall-clock step's interval at `coverage` from the prediction's error band (on the GPU time; the
        CPU's issuing as it is), None without a band."""
        if self.band is None:
            return None
        low, high = self.band.interval(self.gpu_ms, coverage)
        return wall_ms(low, self.launch_ms), wall_ms(high, self.launch_ms)

    def step_band_sigma(self) -> float | None:
        """The lognormal sigma whose 80 % interval is the band's: for a simulator that samples a step."""
        interval = self.step_interval_ms(0.8)
        if interval is None:
            return None
        return math.log(interval[1] / interval[0]) / (2 * _Z90)


def _sigma(device: DeviceStep, given: float | None) -> float:
    if given is not None:
        return given
    if not device.spread_ms or device.step_ms <= 0:
        return 0.0
    return math.log1p(device.spread_ms / device.step_ms) / _RANGE_OF_FIVE


def _phi(x: np.ndarray) -> np.ndarray:
    """The standard normal CDF, elementwise (Abramowitz and Stegun 7.1.26 for erf: within 1.5e-7)."""
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-z * z)
    return 0.5 * (1.0 + np.sign(x) * erf)


def _nodes(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """exp(sigma Z) at Gauss-Hermite nodes and their weights (one node at 1 without variability)."""
    if sigma == 0.0:
        return np.ones(1), np.ones(1)
    z, w = np.polynomial.hermite_e.hermegauss(_QUADRATURE_NODES)
    return np.exp(sigma * z), w / w.sum()


def _kind_cdf(t: np.ndarray, kind: ClientKind) -> np.ndarray:
    """F_d(t) = P((A c + B / b) f <= t) for one device kind: the factor with the widest spread in closed form (so
    that each quadrature node's term is smooth in t), the other two by Gauss-Hermite quadrature."""
    a, b = kind.compute_s, kind.comm_s
    spreads = {"round": kind.sigma, "link": kind.link_sigma if b > 0 else 0.0,
               "compute": kind.compute_sigma if a > 0 else 0.0}
    closed = max(spreads, key=lambda name: spreads[name])
    if spreads[closed] == 0.0:
        return (t >= a + b).astype(float)
    nodes = [_nodes(0.0 if name == closed else spreads[name]) for name in ("round", "compute", "link")]
    (fs, fw), (cs, cw), (bs, bw) = nodes
    f, c, l_ = (axis.ravel() for axis in np.meshgrid(fs, cs, bs, indexing="ij"))
    weights = np.einsum("i,j,k->ijk", fw, cw, bw).ravel()
    grid = t[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        if closed == "round":
            p = _phi(np.log(grid / (a * c + b / l_)) / spreads["round"])
        elif closed == "link":
            rest = grid / f - a * c
            p = np.where(rest > 0, _phi((np.log(np.maximum(rest, 1e-300)) - math.log(b)) / spreads["link"]), 0.0)
        else:
            rest = grid / f - b / l_
            p = np.where(rest > 0, _phi(np.log(np.maximum(rest, 1e-300) / a) / spreads["compute"]), 0.0)
    return (weights * p).sum(axis=1)


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
            link = link_for(device.target_id, device.kind, config.links)
            launches = launch_ms(device.kernels)
            kinds.append(ClientKind(
                target_id=device.target_id, target_name=device.target_name, kind=device.kind,
                share=device.weight / total, gpu_ms=device.step_ms, launch_ms=launches, steps=steps, link=link,
                download_s=link.download_s(size), compute_s=wall_ms(device.step_ms, launches) * steps / 1000.0,
                upload_s=link.upload_s(size), sigma=_sigma(device, config.sigma),
                compute_sigma=(config.device_compute_sigma if config.device_compute_sigma is not None
                               else COMPUTE_SIGMA[device.kind]),
                link_sigma=(config.device_link_sigma if config.device_link_sigma is not None
                            else LINK_SIGMA[device.kind]),
                band=device.band))
        self.kinds: tuple[ClientKind, ...] = tuple(kinds)
        self.config = config
        self.batch_size = batch_size
        self.steps = steps
        self.update_bytes = size
        self._share = np.array([kind.share for kind in kinds])
        self._compute = np.array([kind.compute_s for kind in kinds])
        self._comm = np.array([kind.comm_s for kind in kinds])
        self._sigma = np.array([kind.sigma for kind in kinds])
        self._compute_sigma = np.array([kind.compute_sigma for kind in kinds])
        self._link_sigma = np.array([kind.link_sigma for kind in kinds])
        # E[round] for any K integrates over one grid: F is computed on it once.
        self._grid_nodes = self._grid()
        self._cdf_middles = self.cdf((self._grid_nodes[1:] + self._grid_nodes[:-1]) / 2)

    # --- the analytic side ------------------------------------------------------------------------------------

    def cdf(self, t: np.ndarray | float) -> np.ndarray:
        """F(t): the chance that a sampled client, if it finishes, takes at most t seconds."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        out = np.zeros_like(t)
        for share, kind in zip(self._share, self.kinds, strict=True):
            out += share * _kind_cdf(t, kind)
        return np.clip(out, 0.0, 1.0)

    def closed_by(self, k: int, t: np.ndarray | float) -> np.ndarray:
        """G_K(t): the chance that a round of K has K finished clients by time t."""
        return _binomial_tail(self.config.sampled(k), k, self.config.finish_probability * self.cdf(t))

    def p_complete(self, k: int) -> float:
        """The chance that a round of K gets K finished clients at all."""
        return float(_binomial_tail(self.config.sampled(k), k, np.array([self.config.finish_probability]))[0])

    def span_s(self, tail_sigmas: float) -> tuple[float, float]:
        """The fastest and the slowest plausible client's round: every spread `tail_sigmas` deviations out."""
        fast = (self._compute * np.exp(-tail_sigmas * self._compute_sigma)
                + self._comm * np.exp(-tail_sigmas * self._link_sigma)) * np.exp(-tail_sigmas * self._sigma)
        slow = (self._compute * np.exp(tail_sigmas * self._compute_sigma)
                + self._comm * np.exp(tail_sigmas * self._link_sigma)) * np.exp(tail_sigmas * self._sigma)
        return float(np.min(fast)), float(np.max(slow))

    def _grid(self) -> np.ndarray:
        fast, slow = self.span_s(_TAIL_SIGMAS)
        low, high = fast * 0.999, slow * 1.001
        # The atoms (kinds without variability) are grid nodes, so the midpoint rule never straddles a step.
        return np.unique(np.concatenate([np.geomspace(low, high, _GRID_POINTS), self._compute + self._comm]))

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

    def device_factors(self, kinds: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Each device's compute and link factor (exp(s Z), by its kind's spreads), for an array of kind indices."""
        compute = np.exp(self._compute_sigma[kinds] * rng.standard_normal(kinds.shape))
        link = np.exp(self._link_sigma[kinds] * rng.standard_normal(kinds.shape))
        return compute, link

    def simulate(self, k: int, rounds: int, seed: int) -> SimulatedRounds:
        """Draw `rounds` rounds of K, every sampled client a device of its own (seeded: the same seed gives the
        same rounds)."""
        rng = np.random.default_rng(seed)
        n = self.config.sampled(k)
        kinds = rng.choice(len(self.kinds), size=(rounds, n), p=self._share)
        compute, link = self.device_factors(kinds, rng)
        factor = np.exp(self._sigma[kinds] * rng.standard_normal((rounds, n)))
        finished = rng.random((rounds, n)) < self.config.finish_probability
        times = (self._compute[kinds] * compute + self._comm[kinds] / link) * factor
        client_s = np.where(finished, times, np.inf)
        round_s = np.sort(client_s, axis=1)[:, k - 1]
        return SimulatedRounds(k=k, sampled=n, round_s=round_s, client_s=client_s, kinds=kinds)
