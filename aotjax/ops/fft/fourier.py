"""Discrete Fourier transforms (`torch.fft`) and the short-time transforms `stft`/`istft`.

The transforms are five primitives made with `from_jax` (`aotjax.ops.base.from_jax`): `fft` (forward or inverse, complex
to complex, over any dims), `rfft` (real to half-spectrum), `irfft` (half-spectrum to real), `hfft` and `ihfft` (one
dim). Each computes what its `jax.numpy.fft` function computes; its jvp, transpose and batching are JAX's own, so the
derivatives follow JAX's convention for complex values (see `aotjax.ops.math.complex`): for a real leaf they are
PyTorch's. The torch functions (`fft2`, `fftn`, `irfft2`, ...) pick the sizes `s` (zero-padding or trimming the
input, as torch does) and the dims; `hfft2`, `hfftn`, `ihfft2`, `ihfftn` (`irfft`/`rfft` of the conjugate),
`fftfreq`, `rfftfreq`, `fftshift`, `ifftshift`, `stft` and `istft` are compositions. Integer inputs are converted
to float32 first, as in torch.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops.base.casts import convert
from aotjax.ops.base.data import as_tensor, tensor
from aotjax.ops.base.from_jax import from_jax
from aotjax.ops.base.frontend import canonical_dims, to_dtype
from aotjax.ops.base.promotion import category, default_float_dtype, default_int_dtype
from aotjax.ops.creation.factories import ones, zeros
from aotjax.ops.indexing.subscripts import index_add
from aotjax.ops.math import elementwise as ew
from aotjax.ops.math.complex import complex_dtype, conj_physical, real
from aotjax.ops.nn.resampling import pad
from aotjax.ops.shape.copies import roll
from aotjax.ops.shape.views import movedim, reshape, transpose
from aotjax.tensor import is_eager, method

__all__ = ["stft", "istft"]
# NOTE: what `aotjax.fft` exports (torch.fft's names)
FFT = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfft",
       "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _fft_flops(in_avals, out_avals, **params) -> float:
    n = max(max(a.size for a in (*in_avals, *out_avals)), 2)
    return float(5 * n * math.log2(n))


def _fftn(x, *, s, axes, norm, inverse):
    return (jnp.fft.ifftn if inverse else jnp.fft.fftn)(x, s=s, axes=axes, norm=norm)


fft_p = from_jax("fft", _fftn, flops=_fft_flops)
rfft_p = from_jax("rfft", lambda x, *, s, axes, norm: jnp.fft.rfftn(x, s=s, axes=axes, norm=norm), flops=_fft_flops)
irfft_p = from_jax("irfft", lambda x, *, s, axes, norm: jnp.fft.irfftn(x, s=s, axes=axes, norm=norm), flops=_fft_flops)
hfft_p = from_jax("hfft", lambda x, *, n, dim, norm: jnp.fft.hfft(x, n=n, axis=dim, norm=norm), flops=_fft_flops)
ihfft_p = from_jax("ihfft", lambda x, *, n, dim, norm: jnp.fft.ihfft(x, n=n, axis=dim, norm=norm), flops=_fft_flops)


# -- arguments ---------------------------------------------------------------------------------------------------
def _norm(op: str, norm) -> str:
    norm = "backward" if norm is None else norm
    if norm not in ("backward", "ortho", "forward"):
        raise ValueError(f"{op}: invalid normalization mode {norm!r}{where()}; use 'backward', 'ortho' or 'forward'.")
    return norm


def _operand(op: str, x, *, real_only: bool = False, to_complex: bool = False):
    x = as_tensor(x)
    if x.ndim == 0:
        raise IndexError(f"{op}: the input must have at least one dimension, got a 0-d tensor{where()}; reshape "
                         f"it first (`x.reshape(1)`).")
    if category(x.dtype) == 3:
        if real_only:
            raise DTypeError(f"{op} expects a real input tensor, but got {x.dtype.name}{where()}; take the real part "
                             f"first or use the complex transform (`fft`).")
        return x
    if category(x.dtype) < 2:
        x = convert(x, default_float_dtype())
    if x.dtype.name in ("float16", "bfloat16"):
        raise DTypeError(f"{op}: half-precision inputs are not supported, got {x.dtype.name}{where()}; convert to "
                         f"float32 first (`x.float()`).")
    return convert(x, complex_dtype(x.dtype)) if to_complex else x


def _sizes(op: str, x, s, dim, default_dims):
    """The dims and sizes of an n-dim transform, as torch picks them: `dim` (default: the last `len(s)` dims if
    `s` is given, else `default_dims`), `s` (default: the input's sizes; -1 keeps a size)."""
    if dim is None:
        dims = tuple(range(x.ndim - len(s), x.ndim)) if s is not None else default_dims(x.ndim)
    else:
        dims = canonical_dims((dim,) if isinstance(dim, int) else tuple(dim), x.ndim, op)
    if len(set(dims)) != len(dims):
        raise ShapeError(f"{op}: dims must be unique, got {list(dims)}{where()}")
    if s is None:
        return dims, None
    s = tuple(int(n) for n in s)
    if len(s) != len(dims):
        raise ShapeError(f"{op}: when given, dim and shape arguments must have the same length, got s={list(s)} and "
                         f"dim={list(dims)}{where()}")
    return dims, s


def _check_points(op: str, sizes) -> None:
    for n in sizes:
        if n < 1:
            raise ValueError(f"{op}: invalid number of data points ({n}) specified{where()}; every transformed dim "
                             f"needs at least one point.")


def _all_dims(ndim: int) -> tuple[int, ...]:
    return tuple(range(ndim))


def _last_two(ndim: int) -> tuple[int, ...]:
    return (ndim - 2, ndim - 1)


# -- complex to complex ------------------------------------------------------------------------------------------
def _c2c(op: str, x, s, dim, norm, default_dims, inverse: bool):
    x = _operand(op, x, to_complex=True)
    dims, s = _sizes(op, x, s, dim, default_dims)
    s = tuple(x.shape[d] if n == -1 else n for d, n in zip(dims, s)) if s is not None else tuple(x.shape[d]
                                                                                                 for d in dims)
    _check_points(op, s)
    return fft_p.bind(x, s=s, axes=dims, norm=_norm(op, norm), inverse=inverse, chain=())


def fft(input, n=None, dim: int = -1, norm=None):
    """The one-dim discrete Fourier transform along `dim`, of `n` points (the input zero-padded or trimmed to `n`).
    `norm`: `'backward'` (default: no scaling), `'ortho'` (1/sqrt(n)) or `'forward'` (1/n). Real inputs give complex.

    >>> aotjax.fft.fft(aotjax.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])
    """
    return _c2c("fft", input, None if n is None else (n,), dim, norm, None, False)


def ifft(input, n=None, dim: int = -1, norm=None):
    """The inverse of `fft` (scaled by 1/n with the default `norm='backward'`).

    >>> aotjax.fft.ifft(aotjax.tensor([4.0, 0.0, 0.0, 0.0]))
    tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
    """
    return _c2c("ifft", input, None if n is None else (n,), dim, norm, None, True)


def fft2(input, s=None, dim=(-2, -1), norm=None):
    """The two-dim discrete Fourier transform over `dim` (default: the last two), of sizes `s`.

    >>> aotjax.fft.fft2(aotjax.ones(2, 2))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]])
    """
    return _c2c("fft2", input, s, dim, norm, _last_two, False)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of `fft2`.

    >>> aotjax.fft.ifft2(aotjax.tensor([[4.0, 0.0], [0.0, 0.0]]))
    tensor([[1.+0.j, 1.+0.j],
            [1.+0.j, 1.+0.j]])
    """
    return _c2c("ifft2", input, s, dim, norm, _last_two, True)


def fftn(input, s=None, dim=None, norm=None):
    """The n-dim discrete Fourier transform over `dim` (default: every dim, or the last `len(s)` ones).

    >>> aotjax.fft.fftn(aotjax.ones(2, 2))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]])
    """
    return _c2c("fftn", input, s, dim, norm, _all_dims, False)


def ifftn(input, s=None, dim=None, norm=None):
    """The inverse of `fftn`.

    >>> aotjax.fft.ifftn(aotjax.tensor([[4.0, 0.0], [0.0, 0.0]]))
    tensor([[1.+0.j, 1.+0.j],
            [1.+0.j, 1.+0.j]])
    """
    return _c2c("ifftn", input, s, dim, norm, _all_dims, True)


# -- real to half-spectrum and back ------------------------------------------------------------------------------
def _r2c(op: str, x, s, dim, norm, default_dims):
    x = _operand(op, x, real_only=True)
    dims, s = _sizes(op, x, s, dim, default_dims)
    s = tuple(x.shape[d] if n == -1 else n for d, n in zip(dims, s)) if s is not None else tuple(x.shape[d]
                                                                                                 for d in dims)
    _check_points(op, s)
    return rfft_p.bind(x, s=s, axes=dims, norm=_norm(op, norm), chain=())


def _c2r(op: str, x, s, dim, norm, default_dims):
    x = _operand(op, x, to_complex=True)
    dims, s = _sizes(op, x, s, dim, default_dims)
    if s is None:
        s = tuple(x.shape[d] for d in dims[:-1]) + (2 * (x.shape[dims[-1]] - 1),)
    else:
        s = tuple((2 * (x.shape[d] - 1) if i == len(dims) - 1 else x.shape[d]) if n == -1 else n
                  for i, (d, n) in enumerate(zip(dims, s)))
    _check_points(op, s)
    return irfft_p.bind(x, s=s, axes=dims, norm=_norm(op, norm), chain=())


def rfft(input, n=None, dim: int = -1, norm=None):
    """The one-dim Fourier transform of a real input: the `n // 2 + 1` non-negative frequencies.

    >>> aotjax.fft.rfft(aotjax.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([10.+0.j, -2.+2.j, -2.+0.j])
    """
    return _r2c("rfft", input, None if n is None else (n,), dim, norm, None)


def irfft(input, n=None, dim: int = -1, norm=None):
    """The inverse of `rfft`: a real signal of `n` points (default `2 * (m - 1)` for `m` frequencies).

    >>> aotjax.fft.irfft(aotjax.tensor([10 + 0j, -2 + 2j, -2 + 0j]))
    tensor([1., 2., 3., 4.])
    """
    return _c2r("irfft", input, None if n is None else (n,), dim, norm, None)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    """`rfft` over two dims (the last one halved).

    >>> aotjax.fft.rfft2(aotjax.ones(2, 2))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]])
    """
    return _r2c("rfft2", input, s, dim, norm, _last_two)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of `rfft2`.

    >>> aotjax.fft.irfft2(aotjax.tensor([[4 + 0j, 0j], [0j, 0j]]))
    tensor([[1., 1.],
            [1., 1.]])
    """
    return _c2r("irfft2", input, s, dim, norm, _last_two)


def rfftn(input, s=None, dim=None, norm=None):
    """`rfft` over n dims (the last one halved; default: every dim).

    >>> aotjax.fft.rfftn(aotjax.ones(2, 2))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]])
    """
    return _r2c("rfftn", input, s, dim, norm, _all_dims)


def irfftn(input, s=None, dim=None, norm=None):
    """The inverse of `rfftn`.

    >>> aotjax.fft.irfftn(aotjax.tensor([[4 + 0j, 0j], [0j, 0j]]))
    tensor([[1., 1.],
            [1., 1.]])
    """
    return _c2r("irfftn", input, s, dim, norm, _all_dims)


def hfft(input, n=None, dim: int = -1, norm=None):
    """The Fourier transform of a Hermitian-symmetric signal given by its first half: a real result of `n` points
    (default `2 * (m - 1)`).

    >>> aotjax.fft.hfft(aotjax.tensor([1 + 0j, 0j, 0j]))
    tensor([1., 1., 1., 1.])
    """
    x = _operand("hfft", input, to_complex=True)
    (d,) = canonical_dims((dim,), x.ndim, "hfft")
    n = 2 * (x.shape[d] - 1) if n is None else int(n)
    _check_points("hfft", (n,))
    return hfft_p.bind(x, n=n, dim=d, norm=_norm("hfft", norm), chain=())


def ihfft(input, n=None, dim: int = -1, norm=None):
    """The inverse of `hfft`: the first `n // 2 + 1` points of the inverse transform of a real signal.

    >>> aotjax.fft.ihfft(aotjax.tensor([1.0, 1.0, 1.0, 1.0]))
    tensor([1.+0.j, 0.+0.j, 0.+0.j])
    """
    x = _operand("ihfft", input, real_only=True)
    (d,) = canonical_dims((dim,), x.ndim, "ihfft")
    n = x.shape[d] if n is None else int(n)
    _check_points("ihfft", (n,))
    return ihfft_p.bind(x, n=n, dim=d, norm=_norm("ihfft", norm), chain=())


# NOTE: the n-dim Hermitian transforms are the real ones of the conjugate, scaled the other way: hfftn(x) is
# irfftn(conj(x)) normalized as a forward transform, ihfftn(x) is conj(rfftn(x)) normalized as an inverse one.
_SWAPPED = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _hermitian_c2r(op: str, x, s, dim, norm, default_dims):
    x = conj_physical(_operand(op, x, to_complex=True))
    return _c2r(op, x, s, dim, _SWAPPED[_norm(op, norm)], default_dims)


def _hermitian_r2c(op: str, x, s, dim, norm, default_dims):
    return conj_physical(_r2c(op, x, s, dim, _SWAPPED[_norm(op, norm)], default_dims))


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    """`hfft` over two dims (default: the last two): the real Fourier transform of a signal Hermitian-symmetric
    in the last of them, given by its first half (`s[-1]` defaults to `2 * (m - 1)`), as `torch.fft.hfft2`.

    >>> aotjax.fft.hfft2(aotjax.tensor([[1 + 0j, 0j], [0j, 0j]]))
    tensor([[1., 1.],
            [1., 1.]])
    """
    return _hermitian_c2r("hfft2", input, s, dim, norm, _last_two)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of `hfft2`: the first `s[-1] // 2 + 1` points along the last dim of the inverse transform of
    a real signal, as `torch.fft.ihfft2`.

    >>> aotjax.fft.ihfft2(aotjax.ones(2, 2))
    tensor([[1.-0.j, 0.-0.j],
            [0.-0.j, 0.-0.j]])
    """
    return _hermitian_r2c("ihfft2", input, s, dim, norm, _last_two)


def hfftn(input, s=None, dim=None, norm=None):
    """`hfft` over n dims (default: every dim, or the last `len(s)` ones), Hermitian-symmetric in the last, as
    `torch.fft.hfftn`.

    >>> aotjax.fft.hfftn(aotjax.tensor([[4 + 0j, 0j], [0j, 0j]])).shape
    (2, 2)
    """
    return _hermitian_c2r("hfftn", input, s, dim, norm, _all_dims)


def ihfftn(input, s=None, dim=None, norm=None):
    """The inverse of `hfftn`, as `torch.fft.ihfftn`.

    >>> aotjax.fft.ihfftn(aotjax.ones(2, 4)).shape
    (2, 3)
    """
    return _hermitian_r2c("ihfftn", input, s, dim, norm, _all_dims)


# -- frequencies and shifts --------------------------------------------------------------------------------------
def fftfreq(n: int, d: float = 1.0, *, dtype=None):
    """The sample frequencies of an `n`-point `fft` with sample spacing `d` (float32 unless `dtype`).

    >>> aotjax.fft.fftfreq(4)
    tensor([ 0.  ,  0.25, -0.5 , -0.25])
    """
    return tensor(np.fft.fftfreq(int(n), d), dtype=to_dtype(dtype or default_float_dtype(), "fftfreq"))


def rfftfreq(n: int, d: float = 1.0, *, dtype=None):
    """The sample frequencies of an `n`-point `rfft` with sample spacing `d`.

    >>> aotjax.fft.rfftfreq(4)
    tensor([0.  , 0.25, 0.5 ])
    """
    return tensor(np.fft.rfftfreq(int(n), d), dtype=to_dtype(dtype or default_float_dtype(), "rfftfreq"))


def _shift(op: str, x, dim, sign: int):
    x = as_tensor(x)
    if x.ndim == 0:
        return x
    dims = tuple(range(x.ndim)) if dim is None else canonical_dims((dim,) if isinstance(dim, int) else dim, x.ndim, op)
    return roll(x, tuple(sign * (x.shape[d] // 2) for d in dims), dims)


def fftshift(input, dim=None):
    """The zero frequency moved to the center: `input` rolled by half its size along `dim` (default: every dim).

    >>> aotjax.fft.fftshift(aotjax.fft.fftfreq(4))
    tensor([-0.5 , -0.25,  0.  ,  0.25])
    """
    return _shift("fftshift", input, dim, 1)


def ifftshift(input, dim=None):
    """The inverse of `fftshift`.

    >>> aotjax.fft.ifftshift(aotjax.tensor([-0.5, -0.25, 0.0, 0.25]))
    tensor([ 0.  ,  0.25, -0.5 , -0.25])
    """
    return _shift("ifftshift", input, dim, -1)


# -- short-time transforms ---------------------------------------------------------------------------------------
def _window(op: str, window, n_fft: int, win_length: int, like):
    if not 0 < win_length <= n_fft:
        raise ValueError(f"{op}: expected 0 < win_length <= n_fft, got win_length={win_length}, n_fft={n_fft}"
                         f"{where()}")
    if window is None:
        window = ones(win_length, dtype=real(like).dtype)
    window = as_tensor(window)
    if window.shape != (win_length,):
        raise ShapeError(f"{op}: expected a 1-D window of size win_length={win_length}, got shape "
                         f"{list(window.shape)}{where()}")
    left = (n_fft - win_length) // 2
    return pad(window, (left, n_fft - win_length - left)) if win_length < n_fft else window


def stft(input, n_fft: int, hop_length=None, win_length=None, window=None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided=None, return_complex=None):
    """The short-time Fourier transform, as `torch.stft`: frames of `n_fft` samples every `hop_length` (default
    `n_fft // 4`), multiplied by `window` (default: ones of `win_length`, zero-padded to `n_fft`), each
    transformed. Returns `(n_freq, n_frames)` (with a leading batch dim for 2-D input), `n_freq = n_fft // 2 + 1`
    when `onesided` (the default for real input). As in current torch, `return_complex=True` is required.

    >>> aotjax.stft(aotjax.ones(8), 4, hop_length=2, return_complex=True).shape
    (3, 5)
    """
    if return_complex is not True:
        raise ValueError(f"stft: return_complex=True is required (torch no longer returns real tensors here)"
                         f"{where()}; use aotjax.view_as_real on the result for the real form.")
    x = as_tensor(input)
    if x.ndim not in (1, 2):
        raise ShapeError(f"stft: expected a 1-D or 2-D input, got shape {list(x.shape)}{where()}")
    batched, x = x.ndim == 2, x if x.ndim == 2 else reshape(x, (1, -1))
    if category(x.dtype) < 2:
        x = convert(x, default_float_dtype())
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    w = _window("stft", window, n_fft, n_fft if win_length is None else int(win_length), x)
    if center:
        x = reshape(pad(reshape(x, (x.shape[0], 1, -1)), (n_fft // 2, n_fft // 2), mode=pad_mode), (x.shape[0], -1))
    if not 0 < n_fft <= x.shape[-1] or hop <= 0:
        raise ValueError(f"stft: expected 0 < n_fft <= {x.shape[-1]} (the padded length) and hop_length > 0, got "
                         f"n_fft={n_fft}, hop_length={hop}{where()}")
    frames = ew.mul(x.unfold(-1, n_fft, hop), w)
    complex_input = category(x.dtype) == 3 or category(w.dtype) == 3
    onesided = not complex_input if onesided is None else onesided
    norm = "ortho" if normalized else "backward"
    out = rfft(frames, norm=norm) if onesided else fft(frames, norm=norm)
    out = transpose(out, -1, -2)
    return out if batched else reshape(out, out.shape[1:])


def istft(input, n_fft: int, hop_length=None, win_length=None, window=None, center: bool = True,
          normalized: bool = False, onesided=None, length=None, return_complex: bool = False):
    """The inverse of `stft`, as `torch.istft`: each frame transformed back, windowed, overlap-added and divided by
    the overlap-added squared window. `input` is `(n_freq, n_frames)` or `(batch, n_freq, n_frames)`, complex.

    >>> x = aotjax.arange(8.0)
    >>> aotjax.istft(aotjax.stft(x, 4, hop_length=1, return_complex=True), 4, hop_length=1)
    tensor([0., 1., 2., 3., 4., 5., 6., 7.])
    """
    z = as_tensor(input)
    if category(z.dtype) != 3 or z.ndim not in (2, 3):
        raise ValueError(f"istft: expected a 2-D or 3-D complex input, got {z.aval.str_short()}{where()}")
    batched, z = z.ndim == 3, z if z.ndim == 3 else reshape(z, (1,) + tuple(z.shape))
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    w = _window("istft", window, n_fft, n_fft if win_length is None else int(win_length), z)
    onesided = z.shape[1] != n_fft if onesided is None else onesided
    norm = "ortho" if normalized else "backward"
    frames = movedim(z, 1, 2)  # (batch, frames, freq)
    frames = irfft(frames, n=n_fft, norm=norm) if onesided else ifft(frames, n=n_fft, norm=norm)
    if onesided or not return_complex:
        frames = real(frames) if category(frames.dtype) == 3 else frames
    frames = ew.mul(frames, w)
    n_frames = z.shape[2]
    total = n_fft + hop * (n_frames - 1)
    index = tensor((np.arange(n_frames)[:, None] * hop + np.arange(n_fft)).reshape(-1), dtype=default_int_dtype())
    y = index_add(zeros(z.shape[0], total, dtype=frames.dtype), 1, index, reshape(frames, (z.shape[0], -1)))
    envelope = index_add(zeros(total, dtype=real(w).dtype), 0, index, ew.square(reshape(
        ew.mul(ones(n_frames, 1, dtype=w.dtype), w), (-1,))))
    start = n_fft // 2 if center else 0
    end = start + int(length) if length is not None else (total - n_fft // 2 if center else total)
    y, envelope = y[:, start:min(end, total)], envelope[start:min(end, total)]
    if is_eager(envelope) and bool(ew.lt(envelope.abs(), 1e-11).any()):
        raise ValueError(f"istft: window overlap add min is below 1e-11: the window and hop_length do not satisfy "
                         f"the nonzero overlap-add constraint{where()}; use a smaller hop or another window.")
    y = ew.div(y, envelope)
    if end > total:
        y = pad(y, (0, end - total))
    return y if batched else reshape(y, y.shape[1:])


for _op in (stft, istft):
    method(_op)
