"""The Bernoulli distribution and its KL divergence."""
from __future__ import annotations

import math

from aotjax import ops
from aotjax.core.source_info import where
from aotjax.distributions import constraints
from aotjax.distributions.distribution import Distribution, broadcast_all, lazy_property
from aotjax.distributions.kl import register_kl
from aotjax.distributions.logits import logits_to_probs, probs_to_logits
from aotjax.ops.nn.activations import softplus
from aotjax.ops.nn.losses import binary_cross_entropy_with_logits
from aotjax.tensor import Tensor
from aotjax.transforms.grad_mode import no_grad

__all__ = ["Bernoulli"]


class Bernoulli(Distribution):
    """The distribution of 0/1 values, 1 with probability `probs` (in [0, 1]) or sigmoid(`logits`) (log-odds);
    exactly one is given, the other derived on first use (`torch.distributions.Bernoulli`). Values and samples are
    in the parameter's float dtype.

    >>> d = aotjax.distributions.Bernoulli(probs=aotjax.tensor([0.25, 0.5]))
    >>> d.log_prob(aotjax.tensor([0.0, 1.0])).exp()
    tensor([0.75, 0.5 ])
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError(f"Bernoulli: either `probs` or `logits` must be specified, but not both{where()}.")
        self._param_name = "probs" if probs is not None else "logits"
        (param,) = broadcast_all(probs if probs is not None else logits)
        setattr(self, self._param_name, param)
        super().__init__(param.shape, validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def _param(self) -> Tensor:
        return getattr(self, self._param_name)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return tuple(self._param.shape)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        return ops.where(self.probs == 0.5, math.nan, (self.probs >= 0.5).to(self.probs.dtype))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with no_grad():
            return ops.bernoulli(self.probs.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True):
        values = ops.arange(2, dtype=self._param.dtype).reshape((-1,) + (1,) * len(self.batch_shape))
        return values.expand((-1,) + self.batch_shape) if expand else values


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli):
    # NOTE: log p - log q in log-odds: log sigmoid(a) = -softplus(-a), log (1 - sigmoid(a)) = -softplus(a)
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = ops.where(p.probs == 0, 0.0, ops.where(q.probs == 0, math.inf, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = ops.where(p.probs == 1, 0.0, ops.where(q.probs == 1, math.inf, t2))
    return t1 + t2
