"""The base class of the probability distributions (`Distribution`, as `torch.distributions.Distribution`) and what
the families share: broadcasting their parameters (`broadcast_all`), parameters derived on first use
(`lazy_property`), and the checks of parameters and values that `validate_args` turns on.

A check reads a tensor on the host, so it runs on concrete tensors only: under `aotjax.jit`, `grad` or `vmap` a
traced parameter or value is not checked (the program cannot branch on it).
"""
from __future__ import annotations

import functools
import numbers
import warnings

from aotjax import ops
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import user_stacklevel, where
from aotjax.distributions import constraints
from aotjax.ops.base.promotion import default_float_dtype
from aotjax.tensor import Tensor
from aotjax.transforms.grad_mode import no_grad

__all__ = ["Distribution", "broadcast_all", "lazy_property"]


def broadcast_all(*values) -> tuple[Tensor, ...]:
    """`values` (tensors or Python numbers) as tensors of one broadcast shape; numbers take the dtype of the first
    tensor, or the default float dtype when all are numbers.

    >>> loc, scale = aotjax.distributions.distribution.broadcast_all(aotjax.zeros(2), 1.0)
    >>> scale
    tensor([1., 1.])
    """
    for v in values:
        if not isinstance(v, (Tensor, numbers.Number)):
            raise ValueError(f"broadcast_all: expected tensors or Python numbers, got {type(v).__name__}{where()}; "
                             f"convert it first, e.g. aotjax.tensor(value)")
    like = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = default_float_dtype() if like is None else like.dtype
    return tuple(ops.broadcast_tensors(*(v if isinstance(v, Tensor) else ops.tensor(v, dtype=dtype)
                                         for v in values)))


class lazy_property:
    """A parameter derived from another on first use (Categorical's `probs` from its `logits`) and then kept on
    the instance. A value derived from traced tensors is not kept: it must not outlive its trace."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        value = self.fn(obj)
        if not isinstance(value, Tracer):
            obj.__dict__[self.fn.__name__] = value
        return value


def sum_rightmost(value: Tensor, dims: int) -> Tensor:
    """`value` summed over its `dims` rightmost dims."""
    return value if dims == 0 else value.reshape(tuple(value.shape[:value.ndim - dims]) + (-1,)).sum(-1)


def _brief(t: Tensor) -> str:
    """A parameter as `__repr__` prints it: a 0-d concrete tensor as its number, else its shape."""
    if t.ndim == 0 and not isinstance(t, Tracer):
        return str(t.item())
    return str(t) if t.numel() == 1 and not isinstance(t, Tracer) else str(tuple(t.shape))


def _shape(shape, what: str) -> tuple[int, ...]:
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{what} must be a tuple of ints, e.g. (5,) or (), got {shape!r}{where()}")
    return tuple(int(s) for s in shape)


class Distribution:
    """A probability distribution over values of shape `event_shape`, one per index of `batch_shape`
    (`torch.distributions.Distribution`). Subclasses define `arg_constraints` (the constraint of each parameter),
    `support`, and the methods they can compute; the others raise NotImplementedError.

    `validate_args` (default: `Distribution.set_default_validate_args`, on) checks the parameters at construction
    and the values of `log_prob`/`cdf`, raising ValueError, for concrete tensors only.

    >>> d = aotjax.distributions.Normal(aotjax.zeros(2), 1.0)
    >>> d.batch_shape, d.event_shape, d.sample((3,)).shape
    ((2,), (), (3, 2))
    """
    has_rsample = False
    has_enumerate_support = False
    arg_constraints: dict[str, constraints.Constraint] = {}
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn the checks of parameters and values on (the default) or off for distributions made from now on."""
        if value not in (True, False):
            raise ValueError(f"Distribution.set_default_validate_args: expected True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = _shape(batch_shape, f"{type(self).__name__}: batch_shape")
        self._event_shape = _shape(event_shape, f"{type(self).__name__}: event_shape")
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_parameters()

    def _check_parameters(self) -> None:
        for name, constraint in self.arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if name not in self.__dict__ and isinstance(getattr(type(self), name, None), lazy_property):
                continue  # NOTE: derived from the parameter given (probs from logits), which is checked
            value = getattr(self, name)
            if isinstance(value, Tracer):
                continue
            if not bool(constraint.check(value).all()):
                raise ValueError(f"Expected parameter {name} (Tensor of shape {tuple(value.shape)}) of distribution "
                                 f"{self!r} to satisfy the constraint {constraint!r}, but found invalid values"
                                 f"{where()}:\n{value}\nPass valid parameters (or validate_args=False to skip this "
                                 f"check).")

    def _validate_sample(self, value) -> None:
        name = type(self).__name__
        if not isinstance(value, Tensor):
            raise ValueError(f"{name}: the value argument to log_prob must be a Tensor, got {type(value).__name__}"
                             f"{where()}; wrap it, e.g. aotjax.tensor(value)")
        shape, event = tuple(value.shape), self._event_shape
        if len(shape) < len(event) or shape[len(shape) - len(event):] != event:
            raise ValueError(f"{name}: the right-most size of value must match event_shape: {shape} vs {event}"
                             f"{where()}.")
        expected = self._batch_shape + event
        for got, want in zip(reversed(shape), reversed(expected)):
            if got != 1 and want != 1 and got != want:
                raise ValueError(f"{name}: value is not broadcastable with batch_shape+event_shape: {shape} vs "
                                 f"{expected}{where()}.")
        if isinstance(value, Tracer):
            return
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{name} does not define `support` to enable sample validation. Define it, or pass "
                          f"validate_args=False to turn validation off.", UserWarning, stacklevel=user_stacklevel())
            return
        valid = support.check(value)
        if not isinstance(valid, Tracer) and not bool(valid.all()):
            raise ValueError(f"Expected value argument (Tensor of shape {shape}) to be within the support "
                             f"({support!r}) of the distribution {self!r}, but found invalid values{where()}:\n{value}")

    # -- shapes ------------------------------------------------------------------------------------------------
    @property
    def batch_shape(self) -> tuple[int, ...]:
        """The shape over which parameters are batched (independent, not identically distributed draws)."""
        return self._batch_shape

    @property
    def event_shape(self) -> tuple[int, ...]:
        """The shape of a single draw."""
        return self._event_shape

    def _extended_shape(self, sample_shape=()) -> tuple[int, ...]:
        """`sample_shape + batch_shape + event_shape`: the shape of `sample(sample_shape)`."""
        return _shape(sample_shape, f"{type(self).__name__}: sample_shape") + self._batch_shape + self._event_shape

    def expand(self, batch_shape, _instance=None) -> "Distribution":
        """This distribution with its parameters expanded (broadcast, no copy) to a larger `batch_shape`."""
        batch_shape = _shape(batch_shape, f"{type(self).__name__}.expand: batch_shape")
        new = _instance if _instance is not None else object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        n = len(self._batch_shape)
        for name in self.arg_constraints:
            value = self.__dict__.get(name)
            if isinstance(value, Tensor):
                new.__dict__[name] = value.expand(batch_shape + tuple(value.shape[n:]))
        new._batch_shape = batch_shape
        return new

    # -- what a family defines -----------------------------------------------------------------------------------
    def _missing(self, what: str, instead: str = "") -> NotImplementedError:
        return NotImplementedError(f"{type(self).__name__}.{what} is not implemented{instead}")

    @property
    def support(self) -> constraints.Constraint:
        """The set the values lie in."""
        raise self._missing("support")

    @property
    def mean(self) -> Tensor:
        raise self._missing("mean")

    @property
    def mode(self) -> Tensor:
        raise self._missing("mode")

    @property
    def variance(self) -> Tensor:
        raise self._missing("variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape=()) -> Tensor:
        """Draws of shape `sample_shape + batch_shape + event_shape`, from aotjax's generator; no gradient."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        """Reparameterized draws: differentiable with respect to the parameters."""
        raise self._missing("rsample", f" ({type(self).__name__} has no reparameterized sampler, has_rsample is "
                                       f"False); use sample() (no gradient), with log_prob for a score-function "
                                       f"estimate of the gradient")

    def log_prob(self, value: Tensor) -> Tensor:
        raise self._missing("log_prob")

    def cdf(self, value: Tensor) -> Tensor:
        raise self._missing("cdf")

    def icdf(self, value: Tensor) -> Tensor:
        raise self._missing("icdf")

    def entropy(self) -> Tensor:
        raise self._missing("entropy")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise self._missing("enumerate_support", " (its support is not finite)")

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    def __repr__(self) -> str:
        args = ", ".join(f"{name}: {_brief(self.__dict__[name])}" for name in self.arg_constraints
                         if isinstance(self.__dict__.get(name), Tensor))
        return f"{type(self).__name__}({args})"
