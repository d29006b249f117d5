"""`Independent`: a distribution whose rightmost batch dims are read as event dims."""
from __future__ import annotations

from aotjax.core.source_info import where
from aotjax.distributions import constraints
from aotjax.distributions.distribution import Distribution, sum_rightmost
from aotjax.distributions.kl import kl_divergence, register_kl

__all__ = ["Independent"]


class Independent(Distribution):
    """`base_distribution` with its `reinterpreted_batch_ndims` rightmost batch dims made event dims
    (`torch.distributions.Independent`): `log_prob` and `entropy` sum over them. A diagonal Gaussian over vectors
    is `Independent(Normal(loc, scale), 1)`.

    >>> d = aotjax.distributions.Independent(aotjax.distributions.Normal(aotjax.zeros(3), 1.0), 1)
    >>> d.batch_shape, d.event_shape, d.log_prob(aotjax.zeros(3)).shape
    ((), (3,), ())
    """
    arg_constraints: dict = {}

    def __init__(self, base_distribution: Distribution, reinterpreted_batch_ndims: int, validate_args=None):
        n, batch = int(reinterpreted_batch_ndims), base_distribution.batch_shape
        if not 0 <= n <= len(batch):
            raise ValueError(f"Independent: expected 0 <= reinterpreted_batch_ndims <= len(base_distribution."
                             f"batch_shape), actual {n} vs {len(batch)} (batch_shape {batch}){where()}")
        shape = batch + base_distribution.event_shape
        event_dim = n + len(base_distribution.event_shape)
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:], validate_args)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        reinterpreted = self._event_shape[:self.reinterpreted_batch_ndims]
        new.base_dist = self.base_dist.expand(new.batch_shape + reinterpreted)
        return new

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        return self.reinterpreted_batch_ndims == 0 and self.base_dist.has_enumerate_support

    @constraints.dependent_property
    def support(self):
        support = self.base_dist.support
        n = self.reinterpreted_batch_ndims
        return constraints.independent(support, n) if n else support

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def enumerate_support(self, expand: bool = True):
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Independent.enumerate_support: enumeration over the cartesian product of "
                                      "the reinterpreted dims is not implemented; enumerate the base distribution")
        return self.base_dist.enumerate_support(expand=expand)

    def __repr__(self) -> str:
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(f"kl_divergence(Independent, Independent): reinterpreted_batch_ndims differ "
                                  f"({p.reinterpreted_batch_ndims} vs {q.reinterpreted_batch_ndims}){where()}")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
