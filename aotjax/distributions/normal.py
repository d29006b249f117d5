"""The normal distribution and its KL divergence."""
from __future__ import annotations

import math

from aotjax import ops
from aotjax.distributions import constraints
from aotjax.distributions.distribution import Distribution, broadcast_all
from aotjax.distributions.kl import register_kl

__all__ = ["Normal"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class Normal(Distribution):
    """The normal (Gaussian) distribution of mean `loc` and standard deviation `scale`, broadcast against each other
    (`torch.distributions.Normal`). `rsample` is `loc + scale * eps`, differentiable in both.

    >>> d = aotjax.distributions.Normal(0.0, 1.0)
    >>> d.log_prob(aotjax.tensor([0.0, 1.0]))
    tensor([-0.9189385, -1.4189385])
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def rsample(self, sample_shape=()):
        eps = ops.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.scale ** 2) - self.scale.log() - _LOG_SQRT_2PI

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ops.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        return self.loc + self.scale * ops.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + _LOG_SQRT_2PI + self.scale.log()


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal):
    var_ratio = (p.scale / q.scale) ** 2
    return 0.5 * (var_ratio + ((p.loc - q.loc) / q.scale) ** 2 - 1 - var_ratio.log())
