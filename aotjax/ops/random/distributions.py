"""Random distributions drawing from the stateful generator (`aotjax.ops.random.generator`), as PyTorch's: `normal` (its
four overloads), `poisson`, `multinomial`, `randperm`, `randint_like`, and the in-place fills `exponential_`,
`geometric_`, `cauchy_`, `log_normal_`, `random_`. Each takes `generator=` (the default generator otherwise) and
draws one key from it, so the same seed gives the same numbers eagerly and compiled, and under `vmap` the draw
follows `randomness=`.

All but `poisson` are compositions of the key samplers (`aotjax.random`) and ordinary ops. `poisson` is a primitive
(`random_poisson`: a key and the rates; jax's rejection sampler, which no composition of fixed shape gives), with
its rules below it. As in PyTorch, no draw is differentiable with respect to its parameters: their gradient is
zero.

>>> g = aotjax.Generator().manual_seed(0)
>>> aotjax.randperm(4, generator=g).sort().values
tensor([0, 1, 2, 3])
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.primitive import Recompute, output_size_flops
from aotjax.core.source_info import where
from aotjax.interpreters.jvp import defjvp_zero
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import standard_primitive
from aotjax.ops.base.data import _python_scalar, as_tensor
from aotjax.ops.base.frontend import to_dtype
from aotjax.ops.base.promotion import default_float_dtype, default_int_dtype, is_float, result_type
from aotjax.ops.creation.factories import _size, factory
from aotjax.ops.random import keys as random
from aotjax.ops.random.generator import Generator, draw_key
from aotjax.ops.reduce.sorting import searchsorted
from aotjax.tensor import Tensor, method

__all__ = ["normal", "poisson", "multinomial", "randperm", "randint_like"]


def _uniform(op: str, generator, shape, dtype=None, low=0.0, high=1.0) -> Tensor:
    dt = dtype if dtype is not None and is_float(dtype) else default_float_dtype()
    return random.uniform(draw_key(op, generator), tuple(shape), dt, low, high)


def _float_tensor_dtype(op: str, t: Tensor) -> np.dtype:
    if not is_float(t.dtype):
        raise DTypeError(f"{op}: expects a floating-point tensor, got {t.dtype.name}{where()}; convert it first, "
                         f"e.g. `x.float()`")
    return t.dtype


# -- normal ----------------------------------------------------------------------------------------
@factory
def normal(mean=0.0, std=1.0, size=None, *, generator: Generator | None = None, dtype=None) -> Tensor:
    """Normal samples of `mean` and `std`, as `torch.normal`: each may be a float tensor (the result has their
    broadcast shape and dtype) or a number; with two numbers, `size` gives the shape (float32 unless `dtype`).
    As in PyTorch, the gradient with respect to `mean` and `std` is zero.

    >>> aotjax.normal(aotjax.zeros(3), 1.0).shape
    (3,)
    >>> aotjax.normal(2.0, 0.5, size=(2, 2), generator=aotjax.Generator().manual_seed(0)).shape
    (2, 2)
    """
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError(f"normal: with a number mean and std, give the shape: normal(mean, std, size){where()}")
        mean, std = (float(_python_scalar("normal", v)) for v in (mean, std))
        if std < 0:
            raise ValueError(f"normal: std must be non-negative, got {std}{where()}")
        dt = default_float_dtype() if dtype is None else to_dtype(dtype, "normal")
        if not is_float(dt):
            raise DTypeError(f"normal: dtype must be a floating-point dtype, got {dt.name}{where()}")
        draw = random.normal(draw_key("normal", generator), _size("normal", (size,)), dt)
        return draw * std + mean
    if size is not None:
        raise TypeError(f"normal: size is given by the tensor mean or std; pass size only with number mean and std"
                        f"{where()}")
    for t in tensors:
        _float_tensor_dtype("normal", t)
    dt = result_type(mean, std)
    mean = mean.detach() if isinstance(mean, Tensor) else mean
    std = std.detach() if isinstance(std, Tensor) else std
    shape = jnp.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return random.normal(draw_key("normal", generator), shape, dt) * std + mean


# -- poisson ---------------------------------------------------------------------------------------
def _random_poisson_shape(k, rate):
    batch = random._key_batch("poisson", k)
    if not is_float(rate.dtype):
        raise DTypeError(f"poisson: the rates must be floating point, got {rate.str_short()}")
    if rate.shape[:len(batch)] != batch:
        raise ShapeError(f"poisson: rates of shape {list(rate.shape)} do not start with the keys' batch dims "
                         f"{list(batch)}")
    return rate.shape


def _poisson_draw(k, rate):
    lam = rate.astype(np.float32) if rate.dtype.itemsize < 4 else rate
    return jax.random.poisson(k, lam, lam.shape).astype(rate.dtype)


random_poisson_p = standard_primitive(
    "random_poisson", _random_poisson_shape, lambda k, rate: rate.dtype,
    lambda k, rate: random._per_key(_poisson_draw, k)(k, rate), recompute=Recompute.NEVER, flops=output_size_flops)
defjvp_zero(random_poisson_p)
random._batch_per_key(random_poisson_p)


def poisson(input: Tensor, generator: Generator | None = None) -> Tensor:
    """Poisson samples, each of the rate `input` holds there, in `input`'s (float) dtype, as `torch.poisson`.

    >>> aotjax.poisson(aotjax.zeros(3))
    tensor([0., 0., 0.])
    """
    input = as_tensor(input)
    _float_tensor_dtype("poisson", input)
    return random_poisson_p.bind(draw_key("poisson", generator), input.detach())


# -- multinomial -----------------------------------------------------------------------------------
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Generator | None = None) -> Tensor:
    """`num_samples` category indices per row of `input` (1-d or 2-d non-negative weights, not necessarily summing
    to one), as `torch.multinomial`; the default int dtype. Without replacement (the default) the indices of a row
    are distinct (a Gumbel top-k draw), so `num_samples` may not exceed the number of categories. Unlike torch, a
    row of all zeros (or, without replacement, with fewer positive weights than `num_samples`) is not refused (the
    values may be traced): its indices are then arbitrary.

    >>> aotjax.multinomial(aotjax.tensor([0.0, 1.0, 0.0]), 2, replacement=True)
    tensor([1, 1])
    """
    input = as_tensor(input)
    _float_tensor_dtype("multinomial", input)
    if input.ndim not in (1, 2):
        raise ShapeError(f"multinomial: input must be 1-d or 2-d, got {input.ndim}-d{where()}")
    n = input.shape[-1]
    num_samples = int(num_samples)
    if num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be positive, got {num_samples}{where()}")
    if n == 0:
        raise ValueError(f"multinomial: input has no categories{where()}")
    if not replacement and num_samples > n:
        raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement from {n} categories"
                         f"{where()}; pass replacement=True or fewer samples")
    p = input.detach()
    batch = tuple(p.shape[:-1])
    if replacement:  # NOTE: inverse CDF: the first category whose cumulative weight exceeds u * total
        cdf = p.cumsum(-1)
        u = _uniform("multinomial", generator, (*batch, num_samples), p.dtype)
        idx = searchsorted(cdf, u * cdf[..., -1:], right=True)
        return convert(idx.clamp(max=n - 1), default_int_dtype())
    # NOTE: Gumbel top-k: the k largest log p + Gumbel noise are a draw without replacement
    tiny = float(np.finfo(np.float32).tiny)
    u = _uniform("multinomial", generator, p.shape, p.dtype, low=tiny)
    keys = p.log() - (-u.log()).log()
    return convert(keys.topk(num_samples, dim=-1).indices, default_int_dtype())


# -- randperm / randint_like -----------------------------------------------------------------------
@factory
def randperm(n: int, *, generator: Generator | None = None, dtype=None) -> Tensor:
    """A random permutation of `0 .. n-1` (the default int dtype unless `dtype`), as `torch.randperm`.

    >>> sorted(aotjax.randperm(5).tolist())
    [0, 1, 2, 3, 4]
    """
    (n,) = _size("randperm", (n,))
    dt = default_int_dtype() if dtype is None else to_dtype(dtype, "randperm")
    bits = random.randint(draw_key("randperm", generator), (n,), -2 ** 31, 2 ** 31 - 1, np.int32)
    return convert(bits.argsort(), dt)


def _randint_into(op: str, generator, shape, low: int, high_incl: int, dtype: np.dtype) -> Tensor:
    """Integers uniform in `[low, high_incl]` of `dtype` (int, float or bool), drawn in the default int dtype when
    it holds them, else in `dtype`; for the whole range of a dtype as wide as the default int, its largest value
    is left out (jax's `randint` takes an exclusive bound of the dtype)."""
    k = draw_key(op, generator)
    candidates = [np.dtype(default_int_dtype())] + ([dtype] if dtype.kind in "iu" else [])
    for sample_dt in candidates:
        info = np.iinfo(sample_dt)
        if info.min <= low and high_incl < info.max:
            return convert(random.randint(k, shape, low, high_incl + 1, sample_dt), dtype)
        if info.min < low and high_incl == info.max:  # NOTE: the exclusive bound would overflow: draw one lower
            return convert(random.randint(k, shape, low - 1, high_incl, sample_dt) + 1, dtype)
    info = np.iinfo(candidates[-1])
    if low < info.min or high_incl > info.max:
        raise OverflowError(f"{op}: the range [{low}, {high_incl}] does not fit in {candidates[-1].name}{where()}")
    # NOTE: the whole range of the dtype: its largest value is left out
    draw = random.randint(k, shape, low, high_incl, candidates[-1])
    return convert(draw, dtype)


@factory
def randint_like(input: Tensor, low: int = 0, high: int | None = None, *, generator: Generator | None = None,
                 dtype=None) -> Tensor:
    """Integers uniform in `[low, high)` of `input`'s shape and dtype (unless `dtype`), as `torch.randint_like`
    (`randint_like(x, high)` or `randint_like(x, low, high)`).

    >>> aotjax.randint_like(aotjax.zeros(3), 1, 2)
    tensor([1., 1., 1.])
    """
    if high is None:
        low, high = 0, low
    low, high = int(low), int(high)
    if low >= high:
        raise ValueError(f"randint_like: low ({low}) must be less than high ({high}){where()}")
    dt = input.dtype if dtype is None else to_dtype(dtype, "randint_like")
    return _randint_into("randint_like", generator, tuple(input.shape), low, high - 1, dt)


# -- in-place fills --------------------------------------------------------------------------------
def exponential_(self: Tensor, lambd: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    """Fill `self` in place with exponential samples of rate `lambd`.

    >>> bool((aotjax.zeros(4).exponential_(2.0) >= 0).all())
    True
    """
    _float_tensor_dtype("exponential_", self)
    if not lambd > 0:
        raise ValueError(f"exponential_: lambd must be positive, got {lambd}{where()}")
    u = _uniform("exponential_", generator, self.shape, self.dtype)
    return self.copy_(-(-u).log1p() / lambd)


def geometric_(self: Tensor, p: float, *, generator: Generator | None = None) -> Tensor:
    """Fill `self` in place with geometric samples: the number of Bernoulli(`p`) trials up to the first success
    (1, 2, ...).

    >>> bool((aotjax.zeros(4).geometric_(0.5) >= 1).all())
    True
    """
    if not 0 < p < 1:
        raise ValueError(f"geometric_: p must be in (0, 1), got {p}{where()}")
    u = _uniform("geometric_", generator, self.shape, self.dtype)
    draw = ((-u).log1p() / math.log1p(-p)).ceil().clamp(min=1)
    return self.copy_(convert(draw, self.dtype))


def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    """Fill `self` in place with Cauchy samples of `median` and scale `sigma`.

    >>> aotjax.zeros(2).cauchy_().shape
    (2,)
    """
    _float_tensor_dtype("cauchy_", self)
    u = _uniform("cauchy_", generator, self.shape, self.dtype)
    return self.copy_(((u - 0.5) * math.pi).tan() * sigma + median)


def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator: Generator | None = None) -> Tensor:
    """Fill `self` in place with log-normal samples: `exp` of normal samples of `mean` and `std`.

    >>> bool((aotjax.zeros(3).log_normal_() > 0).all())
    True
    """
    _float_tensor_dtype("log_normal_", self)
    draw = random.normal(draw_key("log_normal_", generator), tuple(self.shape), self.dtype)
    return self.copy_((draw * std + mean).exp())


def _random_max(dtype: np.dtype) -> int:
    """The largest value `random_()` draws for `dtype`: 2**mantissa for floats (every integer up to it is exact),
    the largest value for ints, 1 for bool."""
    if dtype == np.bool_:
        return 1
    if is_float(dtype):
        return 2 ** (jnp.finfo(dtype).nmant + 1)
    return int(np.iinfo(dtype).max)


def random_(self: Tensor, from_=0, to=None, *, generator: Generator | None = None, **kwargs) -> Tensor:
    """Fill `self` in place with integers uniform in `[from, to)`, as `torch.Tensor.random_`: `random_(to)` draws
    from `[0, to)`, `random_()` from 0 up to 2**mantissa for a float dtype (inclusive) or the dtype's largest value.
    `from` may be given as the keyword `from` (or `from_`).

    >>> bool(((aotjax.zeros(5).random_(3) >= 0) & (aotjax.zeros(5).random_(3) < 3)).all())
    True
    """
    if "from" in kwargs:
        from_ = kwargs.pop("from")
    if kwargs:
        raise TypeError(f"random_: unexpected keyword arguments {sorted(kwargs)}{where()}")
    dt = np.dtype(self.dtype)
    lo, hi_incl = int(from_), (_random_max(dt) if to is None else int(to) - 1)
    if hi_incl < lo:
        raise ValueError(f"random_: expects 'from' ({lo}) to be less than 'to' ({hi_incl + 1}){where()}")
    return self.copy_(_randint_into("random_", generator, tuple(self.shape), lo, hi_incl, dt))


def _random_method(self: Tensor, *args, generator: Generator | None = None, **kwargs) -> Tensor:
    """`t.random_()`, `t.random_(to)`, `t.random_(from, to)` (PyTorch's overloads)."""
    if len(args) == 1 and "to" not in kwargs and "from" not in kwargs and "from_" not in kwargs:
        return random_(self, 0, args[0], generator=generator)
    return random_(self, *args, generator=generator, **kwargs)


_random_method.__doc__ = random_.__doc__
method(_random_method, "random_")
method(exponential_)
method(geometric_)
method(cauchy_)
method(log_normal_)
method(multinomial)
