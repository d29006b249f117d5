"""The continuous uniform distribution and its KL divergence."""
from __future__ import annotations

import math

from aotjax import ops
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import where
from aotjax.distributions import constraints
from aotjax.distributions.distribution import Distribution, broadcast_all
from aotjax.distributions.kl import register_kl

__all__ = ["Uniform"]


def _traced(*tensors) -> bool:
    return any(isinstance(t, Tracer) for t in tensors)


class Uniform(Distribution):
    """The uniform distribution on [`low`, `high`), broadcast against each other (`torch.distributions.Uniform`).
    `rsample` is `low + u * (high - low)`, differentiable in both bounds.

    >>> d = aotjax.distributions.Uniform(0.0, 4.0)
    >>> d.log_prob(aotjax.tensor(1.0)).exp(), d.cdf(aotjax.tensor(1.0))
    (tensor(0.25), tensor(0.25))
    """
    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)
        if self._validate_args and not _traced(self.low, self.high) and not bool((self.low < self.high).all()):
            raise ValueError(f"Uniform is not defined when low >= high: got low={self.low}, high={self.high}"
                             f"{where()}")

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return math.nan * self.high

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        u = ops.rand(self._extended_shape(sample_shape), dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = (self.low <= value) & (self.high > value)
        return inside.to(self.low.dtype).log() - (self.high - self.low).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return ops.where((q.low > p.low) | (q.high < p.high), math.inf, result)
