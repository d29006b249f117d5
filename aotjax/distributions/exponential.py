"""The exponential distribution and its KL divergence."""
from __future__ import annotations

from aotjax import ops
from aotjax.distributions import constraints
from aotjax.distributions.distribution import Distribution, broadcast_all
from aotjax.distributions.kl import register_kl

__all__ = ["Exponential"]


class Exponential(Distribution):
    """The exponential distribution of rate `rate` (mean 1 / rate) on [0, inf) (`torch.distributions.Exponential`).
    `rsample` is `e / rate` for a standard exponential draw `e`, differentiable in `rate`.

    >>> d = aotjax.distributions.Exponential(2.0)
    >>> d.mean, d.cdf(aotjax.tensor(0.0))
    (tensor(0.5), tensor(0.))
    """
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return ops.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        e = ops.empty(self._extended_shape(sample_shape), dtype=self.rate.dtype).exponential_()
        return e / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential):
    ratio = q.rate / p.rate
    return ratio - ratio.log() - 1
