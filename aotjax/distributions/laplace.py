"""The Laplace distribution and its KL divergence."""
from __future__ import annotations

import math

import numpy as np

from aotjax import ops
from aotjax.distributions import constraints
from aotjax.distributions.distribution import Distribution, broadcast_all
from aotjax.distributions.kl import register_kl

__all__ = ["Laplace"]


class Laplace(Distribution):
    """The Laplace (double exponential) distribution of location `loc` and scale `scale`, density
    exp(-|x - loc| / scale) / (2 scale) (`torch.distributions.Laplace`). `rsample` inverts the CDF at a uniform
    draw, differentiable in both parameters.

    >>> d = aotjax.distributions.Laplace(0.0, 1.0)
    >>> d.cdf(aotjax.tensor(0.0)), d.variance
    (tensor(0.5), tensor(2.))
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
        return math.sqrt(2) * self.scale

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    def rsample(self, sample_shape=()):
        # NOTE: u in (-1, 1), kept off -1 so that log1p(-|u|) stays finite
        eps = float(np.finfo(self.loc.dtype).eps)
        u = ops.empty(self._extended_shape(sample_shape), dtype=self.loc.dtype).uniform_(eps - 1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = value - self.loc
        return 0.5 - 0.5 * z.sign() * (-z.abs() / self.scale).expm1()

    def icdf(self, value):
        t = value - 0.5
        return self.loc - self.scale * t.sign() * (-2 * t.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace):
    ratio = p.scale / q.scale
    distance = (p.loc - q.loc).abs()
    return -ratio.log() + distance / q.scale + ratio * (-distance / p.scale).exp() - 1
