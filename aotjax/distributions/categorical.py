"""Distributions over K categories: `Categorical` (values are indices) and `OneHotCategorical` (values are one-hot
vectors), and their KL divergences."""
from __future__ import annotations

import math

import numpy as np

from aotjax import ops
from aotjax.core.source_info import where
from aotjax.distributions import constraints
from aotjax.distributions.distribution import Distribution, lazy_property
from aotjax.distributions.kl import kl_divergence, register_kl
from aotjax.distributions.logits import logits_to_probs, probs_to_logits
from aotjax.ops.base.promotion import default_int_dtype
from aotjax.ops.nn.normalization import one_hot
from aotjax.tensor import Tensor
from aotjax.transforms.grad_mode import no_grad

__all__ = ["Categorical", "OneHotCategorical"]


def _the_parameter(cls: str, probs, logits) -> tuple[str, Tensor]:
    if (probs is None) == (logits is None):
        raise ValueError(f"{cls}: either `probs` or `logits` must be specified, but not both{where()}.")
    name, param = ("probs", probs) if probs is not None else ("logits", logits)
    if not isinstance(param, Tensor):
        raise TypeError(f"{cls}: `{name}` must be a tensor, got {type(param).__name__}{where()}; wrap it, e.g. "
                        f"aotjax.tensor({name})")
    if param.ndim < 1:
        raise ValueError(f"{cls}: `{name}` parameter must be at least one-dimensional{where()}.")
    return name, param


class Categorical(Distribution):
    """A distribution over the indices 0..K-1 of the last dim of `probs` (nonnegative weights, normalized to sum to
    one) or `logits` (unnormalized log-probabilities, normalized so that they logsumexp to zero); exactly one is
    given, the other derived on first use (`torch.distributions.Categorical`). Samples are indices of the default
    int dtype.

    >>> d = aotjax.distributions.Categorical(probs=aotjax.tensor([1.0, 3.0]))
    >>> d.probs, d.log_prob(aotjax.tensor(1)).exp()
    (tensor([0.25, 0.75]), tensor(0.75))
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._param_name, param = _the_parameter(type(self).__name__, probs, logits)
        if probs is not None:
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._num_events = param.shape[-1]
        super().__init__(param.shape[:-1], validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def _param(self) -> Tensor:
        return getattr(self, self._param_name)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return tuple(self._param.shape)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def mean(self):
        return ops.full(self._extended_shape(), math.nan, dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return ops.full(self._extended_shape(), math.nan, dtype=self.probs.dtype)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        n = math.prod(shape[:len(shape) - len(self._batch_shape)])
        if n == 0:
            return ops.zeros(shape, dtype=default_int_dtype())
        with no_grad():
            draws = ops.multinomial(self.probs.reshape(-1, self._num_events), n, True)  # (batch, n)
        return draws.T.reshape(shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        index, log_pmf = ops.broadcast_tensors(value.to(default_int_dtype()).unsqueeze(-1), self.logits)
        return log_pmf.gather(-1, index[..., :1]).squeeze(-1)

    def entropy(self):
        # NOTE: a zero probability has logit -inf; clamped to the dtype's lowest, 0 * logit is 0, not nan
        logits = self.logits.clamp(min=float(np.finfo(self.logits.dtype).min))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True):
        values = ops.arange(self._num_events, dtype=default_int_dtype()).reshape((-1,) + (1,) * len(self.batch_shape))
        return values.expand((-1,) + self.batch_shape) if expand else values


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical):
    t = p.probs * (p.logits - q.logits)
    t = ops.where(q.probs == 0, math.inf, t)
    return ops.where(p.probs == 0, 0.0, t).sum(-1)


class OneHotCategorical(Distribution):
    """A Categorical whose values are one-hot vectors of length K (`torch.distributions.OneHotCategorical`): event
    shape (K,), samples in the dtype of the probabilities.

    >>> d = aotjax.distributions.OneHotCategorical(probs=aotjax.tensor([0.0, 1.0]))
    >>> d.sample()
    tensor([0., 1.])
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:], validate_args)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        new._categorical = self._categorical.expand(batch_shape)
        return new

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def _param(self) -> Tensor:
        return self._categorical._param

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        return one_hot(self.probs.argmax(-1), self._event_shape[0]).to(self.probs.dtype)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        return one_hot(self._categorical.sample(sample_shape), self._event_shape[0]).to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True):
        n, batch = self._event_shape[0], self.batch_shape
        values = ops.eye(n, dtype=self._param.dtype).reshape((n,) + (1,) * len(batch) + (n,))
        return values.expand((n,) + batch + (n,)) if expand else values


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p: OneHotCategorical, q: OneHotCategorical):
    return kl_divergence(p._categorical, q._categorical)
