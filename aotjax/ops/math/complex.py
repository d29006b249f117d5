"""Complex tensors: `complex`, `polar`, `real`, `imag`, `conj`, `conj_physical`, `angle`, `view_as_real`,
`view_as_complex`.

As in PyTorch, `real`, `imag`, `conj`, `view_as_real` and `view_as_complex` are VIEWS: writing `z.real[0] = 3` or
`z.imag.add_(1)` changes `z`. Each is a view primitive with its inverse (the new complex base built from the written
part and the part left as it was), its strides in PyTorch's units (`view_as_real(z).stride()` counts real elements,
so it doubles `z`'s strides and ends in 1; `z.imag` starts one real element into the storage), jvp, transpose and
batching rules, all beside it. One difference: torch's `conj` only sets a bit, so `view_as_real(z.conj())` raises
there; aotjax's `conj` view is resolved when read (`is_conj` does not exist), so that view works.

Derivatives follow JAX's convention (aotjax's transforms are JAX's): the transpose of a linear map is taken for the
real bilinear pairing `Re(a * b)`, without conjugation, so for a real loss `L` of a complex `z`,
`aotjax.grad(L)(z) = dL/dRe(z) - 1j * dL/dIm(z)`: the complex conjugate of what PyTorch stores in `z.grad`. For a
real leaf (`abs(fft(x)).sum()`, `x` real) the two agree exactly.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.primitive import Kind
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero, instantiate, unbroadcast
from aotjax.interpreters.batching import batching_rules, defvectorized
from aotjax.interpreters.batching import moveaxis as move_batch_axis
from aotjax.interpreters.jvp import deflinear
from aotjax.interpreters.transpose import deflinear_transpose
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import elementwise, standard_primitive
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.promotion import category, result_type
from aotjax.ops.math import elementwise as ew
from aotjax.tensor import method

__all__ = ["complex", "polar", "real", "imag", "conj", "conj_physical", "resolve_conj", "angle", "view_as_real",
           "view_as_complex", "is_complex"]

_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}


def _is_complex(dtype) -> bool:
    return category(dtype) == 3


def real_dtype(dtype) -> np.dtype:
    """The dtype of the real and imaginary parts of `dtype` (`dtype` itself if it is not complex)."""
    return np.dtype(np.finfo(dtype).dtype) if _is_complex(dtype) else np.dtype(dtype)


def complex_dtype(dtype, op: str = "complex") -> np.dtype:
    """The complex dtype with parts of `dtype` (float32 -> complex64, float64 -> complex128)."""
    dt = np.dtype(dtype)
    if _is_complex(dt):
        return dt
    if dt not in _COMPLEX_OF:
        raise DTypeError(f"{op}: expected float32 or float64 parts, got {dt.name}{where()}; convert them first "
                         f"(`x.float()`).")
    return _COMPLEX_OF[dt]


def _view(name: str, shape_rule, dtype_rule, lower, strides):
    prim = standard_primitive(name, shape_rule, dtype_rule, lower, kind=Kind.VIEW)
    prim.view_strides = strides
    deflinear(prim)
    return prim


def _same_shape(x, **params):
    return x.shape


def _part_dtype(x, **params):
    return real_dtype(x.dtype)


def _zeros_like(aval):
    return instantiate(Zero(aval))


# -- complex(real, imag) and conj_physical: functional -----------------------------------------------------------
complex_p = elementwise("complex", lambda re, im: lax.complex(*jnp.broadcast_arrays(re, im)),
                       out_dtype=lambda dt: complex_dtype(dt))
deflinear(complex_p)
deflinear_transpose(complex_p, lambda ct, re, im: unbroadcast(real_p.bind(ct), re.aval),
                    lambda ct, re, im: unbroadcast(ew.neg(imag_p.bind(ct)), im.aval))

conj_physical_p = elementwise("conj_physical", jnp.conj)
deflinear(conj_physical_p)
deflinear_transpose(conj_physical_p, lambda ct, x: conj_physical_p.bind(ct))

# -- real, imag, conj: views -------------------------------------------------------------------------------------
# NOTE: strides count real elements, as PyTorch's do: the parts of a complex element are two adjacent reals.
real_p = _view("real", _same_shape, _part_dtype, jnp.real,
               lambda shape, strides, offset: (tuple(2 * s for s in strides), 2 * offset))
real_p.view_inverse = lambda apply, base, y: apply(complex_p, y, apply(imag_p, base))
deflinear_transpose(real_p, lambda ct, x: complex_p.bind(ct, _zeros_like(ct.aval)))
defvectorized(real_p)

imag_p = _view("imag", _same_shape, _part_dtype, jnp.imag,
               lambda shape, strides, offset: (tuple(2 * s for s in strides), 2 * offset + 1))
imag_p.view_inverse = lambda apply, base, y: apply(complex_p, apply(real_p, base), y)
deflinear_transpose(imag_p, lambda ct, x: complex_p.bind(_zeros_like(ct.aval), ew.neg(ct)))
defvectorized(imag_p)

conj_p = _view("conj", _same_shape, lambda x: x.dtype, jnp.conj, lambda shape, strides, offset: (strides, offset))
conj_p.view_inverse = lambda apply, base, y: apply(conj_physical_p, y)
deflinear_transpose(conj_p, lambda ct, x: conj_physical_p.bind(ct))
defvectorized(conj_p)


# -- view_as_real, view_as_complex: views ------------------------------------------------------------------------
def _pack(x):
    return lax.complex(x[..., 0], x[..., 1])


view_as_real_p = _view("view_as_real", lambda x: x.shape + (2,), _part_dtype,
                       lambda x: jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1),
                       lambda shape, strides, offset: (tuple(2 * s for s in strides) + (1,), 2 * offset))
view_as_complex_p = _view("view_as_complex", lambda x: x.shape[:-1], lambda x: complex_dtype(x.dtype), _pack,
                          lambda shape, strides, offset: (tuple(s // 2 for s in strides[:-1]), offset // 2))
view_as_real_p.view_inverse = lambda apply, base, y: apply(view_as_complex_p, y)
view_as_complex_p.view_inverse = lambda apply, base, y: apply(view_as_real_p, y)
# NOTE: for the pairing Re(a * b), the transpose of z -> (Re z, Im z) is (a, b) -> a - 1j b, and back.
deflinear_transpose(view_as_real_p, lambda ct, x: conj_physical_p.bind(view_as_complex_p.bind(ct)))
deflinear_transpose(view_as_complex_p, lambda ct, x: view_as_real_p.bind(conj_physical_p.bind(ct)))


def _batch_view_as_real(axis_size, vals, dims):
    return [view_as_real_p.bind(vals[0])], [dims[0]]  # NOTE: the new axis is last, after the batch axis


def _batch_view_as_complex(axis_size, vals, dims):
    (x,), (d,) = vals, dims
    if d == x.ndim - 1:  # NOTE: the pair axis must stay last: a batch axis there moves to the front
        x, d = move_batch_axis(x, d, 0), 0
    return [view_as_complex_p.bind(x)], [d]


batching_rules[view_as_real_p] = _batch_view_as_real
batching_rules[view_as_complex_p] = _batch_view_as_complex


# -- the op functions --------------------------------------------------------------------------------------------
def is_complex(x) -> bool:
    """Whether `x` has a complex dtype.

    >>> aotjax.is_complex(aotjax.tensor([1j]))
    True
    """
    return _is_complex(as_tensor(x).dtype)


def complex(real, imag):  # noqa: A001  (torch's name)
    """The complex tensor `real + 1j * imag` (float32 parts give complex64, float64 parts complex128; both parts
    must have one floating dtype, as in torch). Broadcasts.

    >>> aotjax.complex(aotjax.tensor([1.0, 2.0]), aotjax.tensor([3.0, -1.0]))
    tensor([1.+3.j, 2.-1.j])
    """
    real, imag = as_tensor(real), as_tensor(imag)
    if real.dtype != imag.dtype:
        raise DTypeError(f"complex: expected both parts to have the same dtype, got {real.dtype.name} and "
                         f"{imag.dtype.name}{where()}; convert one of them first.")
    if real.dtype not in _COMPLEX_OF:
        raise DTypeError(f"complex: expected float32 or float64 parts, got {real.dtype.name}{where()}; convert them "
                         f"first (`x.float()`).")
    return complex_p.bind(real, imag)


def polar(abs, angle):  # noqa: A002  (torch's names)
    """The complex tensor with magnitude `abs` and phase `angle`: `abs * (cos(angle) + 1j * sin(angle))`.

    >>> aotjax.polar(aotjax.tensor([2.0]), aotjax.tensor([0.0]))
    tensor([2.+0.j])
    """
    abs, angle = as_tensor(abs), as_tensor(angle)
    return complex(ew.mul(abs, ew.cos(angle)), ew.mul(abs, ew.sin(angle)))


def real(x):
    """The real part of `x`: a view for a complex tensor (writing it changes `x`), `x` itself for a real one.

    >>> z = aotjax.tensor([1 + 2j, 3 - 1j])
    >>> z.real.mul_(10)
    tensor([10., 30.])
    >>> z
    tensor([10.+2.j, 30.-1.j])
    """
    x = as_tensor(x)
    return real_p.bind(x) if _is_complex(x.dtype) else x


def imag(x):
    """The imaginary part of complex `x` (a view: writing it changes `x`). Real tensors raise, as in torch.

    >>> z = aotjax.tensor([1 + 2j, 3 - 1j])
    >>> z.imag[0] = 5
    >>> z
    tensor([1.+5.j, 3.-1.j])
    """
    x = as_tensor(x)
    if not _is_complex(x.dtype):
        raise DTypeError(f"imag is not implemented for tensors with non-complex dtypes (got {x.dtype.name}){where()}.")
    return imag_p.bind(x)


def conj(x):
    """The complex conjugate of `x`: a view for a complex tensor (a write through it is conjugated into `x`), `x`
    itself for a real one.

    >>> aotjax.tensor([1 + 2j]).conj()
    tensor([1.-2.j])
    """
    x = as_tensor(x)
    return conj_p.bind(x) if _is_complex(x.dtype) else x


def conj_physical(x):
    """The complex conjugate of `x`, as a new tensor (a copy; real tensors are returned as they are).

    >>> aotjax.conj_physical(aotjax.tensor([1 + 2j]))
    tensor([1.-2.j])
    """
    x = as_tensor(x)
    return conj_physical_p.bind(x) if _is_complex(x.dtype) else x


def resolve_conj(x):
    """`x` with any conjugation materialized: aotjax's `conj` views are always resolved, so `x` itself.

    >>> aotjax.tensor([1j]).conj().resolve_conj()
    tensor([0.-1.j])
    """
    return as_tensor(x)


def angle(x):
    """The phase of each element, in radians (`atan2(imag, real)`); for real `x`, 0 where `x >= 0` and pi where
    `x < 0` (NaN kept). Integers give float32.

    >>> aotjax.angle(aotjax.tensor([1j, -1.0]))
    tensor([1.5707964, 3.1415927])
    """
    x = as_tensor(x)
    if _is_complex(x.dtype):
        return ew.atan2(imag(x), real(x))
    if category(x.dtype) < 2:
        x = convert(x, result_type(x, 1.0))
    return ew.where(ew.isnan(x), x, convert(ew.mul(ew.lt(x, 0), math.pi), x.dtype))


def view_as_real(x):
    """The complex tensor `x` seen as reals: a view of shape `(*x.shape, 2)` (real, imaginary) whose strides
    count real elements, as torch's; writing it changes `x`.

    >>> z = aotjax.tensor([1 + 2j, 3 - 1j])
    >>> r = aotjax.view_as_real(z)
    >>> r.stride()
    (2, 1)
    >>> r[1, 1] = 7
    >>> z
    tensor([1.+2.j, 3.+7.j])
    """
    x = as_tensor(x)
    if not _is_complex(x.dtype):
        raise DTypeError(f"view_as_real is only supported for complex tensors, got {x.dtype.name}{where()}.")
    return view_as_real_p.bind(x)


def view_as_complex(x):
    """The float tensor `x`, whose last dim holds (real, imaginary) pairs, seen as complex: a view of shape
    `x.shape[:-1]`; writing it changes `x`. As in torch, the last dim must have size 2 and stride 1, the other
    strides and the storage offset must be even.

    >>> r = aotjax.tensor([[1.0, 2.0], [3.0, -1.0]])
    >>> aotjax.view_as_complex(r)
    tensor([1.+2.j, 3.-1.j])
    """
    x = as_tensor(x)
    if x.dtype not in _COMPLEX_OF:
        raise DTypeError(f"view_as_complex is only supported for float and double tensors, but got a tensor of "
                         f"dtype {x.dtype.name}{where()}.")
    if x.ndim == 0 or x.shape[-1] != 2:
        raise ShapeError(f"view_as_complex: tensor must have a last dimension of size 2, got shape {list(x.shape)}"
                         f"{where()}.")
    strides = x.stride()
    if strides[-1] != 1:
        raise ShapeError(f"view_as_complex: tensor must have a last dimension with stride 1, got strides "
                         f"{strides}{where()}; call .contiguous() first.")
    if any(s % 2 for s in strides[:-1]) or x.storage_offset() % 2:
        raise ShapeError(f"view_as_complex: tensor must have a stride divisible by 2 for all but the last dimension "
                         f"and an even storage offset, got strides {strides} and offset {x.storage_offset()}"
                         f"{where()}; call .contiguous() first.")
    return view_as_complex_p.bind(x)


for _op in (conj, conj_physical, resolve_conj, angle):
    method(_op)


def _set_real(x, value) -> None:
    real(x).copy_(value)  # NOTE: the method: `copy_` is the indexing family's, which builds on this one


def _set_imag(x, value) -> None:
    imag(x).copy_(value)


method(property(real, _set_real), "real")  # NOTE: `z.real = v` writes the real part, as in torch
method(property(imag, _set_imag), "imag")
