"""`aotjax.signal.windows`: the window functions of `torch.signal.windows` (`hann`, `hamming`, `blackman`,
`bartlett`, `cosine`, `exponential`, `gaussian`, `kaiser`, `nuttall`, `general_cosine`, `general_hamming`), with
torch's arguments (`sym=True`: symmetric, for filter design; `sym=False`: periodic, for spectral analysis).
The window's length `M` fixes its values: they are computed in float64 with NumPy and made a tensor of `dtype`
(the default float dtype unless given), a constant under every transform.

>>> aotjax.signal.windows.hamming(4, sym=False)
tensor([0.08, 0.54, 1.  , 0.54])
"""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import DTypeError
from aotjax.core.source_info import where
from aotjax.ops.base.data import tensor
from aotjax.ops.base.promotion import default_float_dtype

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _window(name: str, M: int, dtype, values) -> object:
    """The window `values(M)` (float64 NumPy) as a tensor of `dtype`; torch's checks and its `M <= 1` cases."""
    if not isinstance(M, (int, np.integer)) or M < 0:
        raise ValueError(f"signal.windows.{name}: M must be a non-negative integer, got {M!r}{where()}")
    dt = np.dtype(dtype) if dtype is not None else default_float_dtype()
    if not np.issubdtype(dt, np.floating):
        raise DTypeError(f"signal.windows.{name}: dtype must be a floating point type, got {dt.name}{where()}")
    if M == 0:
        return tensor(np.zeros(0, dt))
    if M == 1:
        return tensor(np.ones(1, dt))
    return tensor(np.asarray(values(M), np.float64).astype(dt))


def general_cosine(M: int, *, a, sym: bool = True, dtype=None, layout=None, device=None, requires_grad=False):
    """`sum_i (-1)**i a[i] cos(2 pi i k / N)` (`N = M - 1`, or `M` when `sym=False`), as
    `torch.signal.windows.general_cosine`.

    >>> aotjax.signal.windows.general_cosine(3, a=[0.5, 0.5])
    tensor([0., 1., 0.])
    """
    return _cosine_sum("general_cosine", M, a, sym, dtype)


def _cosine_sum(name: str, M: int, a, sym: bool, dtype):
    coeffs = [float(c) for c in a]

    def values(M):
        k = np.arange(M) * (2 * math.pi / (M - 1 if sym else M))
        return sum((-1) ** i * c * np.cos(i * k) for i, c in enumerate(coeffs))
    return _window(name, M, dtype, values)


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """`alpha - (1 - alpha) cos(2 pi k / N)`, as `torch.signal.windows.general_hamming`.

    >>> aotjax.signal.windows.general_hamming(3, alpha=0.5)
    tensor([0., 1., 0.])
    """
    return _cosine_sum("general_hamming", M, [alpha, 1.0 - alpha], sym, dtype)


def hann(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hann window, `0.5 - 0.5 cos(2 pi k / N)`, as `torch.signal.windows.hann`.

    >>> aotjax.signal.windows.hann(5)
    tensor([0. , 0.5, 1. , 0.5, 0. ])
    """
    return _cosine_sum("hann", M, [0.5, 0.5], sym, dtype)


def hamming(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hamming window, `0.54 - 0.46 cos(2 pi k / N)`, as `torch.signal.windows.hamming`.

    >>> aotjax.signal.windows.hamming(3)
    tensor([0.08, 1.  , 0.08])
    """
    return _cosine_sum("hamming", M, [0.54, 0.46], sym, dtype)


def blackman(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Blackman window (`general_cosine` with `a = [0.42, 0.5, 0.08]`), as `torch.signal.windows.blackman`.

    >>> aotjax.signal.windows.blackman(3)[1].item()
    1.0
    """
    return _cosine_sum("blackman", M, [0.42, 0.5, 0.08], sym, dtype)


def nuttall(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad=False):
    """The minimum 4-term Blackman-Harris window of Nuttall, as `torch.signal.windows.nuttall`.

    >>> aotjax.signal.windows.nuttall(3)[1]
    tensor(1.)
    """
    return _cosine_sum("nuttall", M, [0.3635819, 0.4891775, 0.1365995, 0.0106411], sym, dtype)


def bartlett(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular Bartlett window, `1 - |2 k / N - 1|`, as `torch.signal.windows.bartlett`.

    >>> aotjax.signal.windows.bartlett(5)
    tensor([0. , 0.5, 1. , 0.5, 0. ])
    """
    return _window("bartlett", M, dtype, lambda M: 1 - np.abs(np.arange(M) * (2.0 / (M - 1 if sym else M)) - 1))


def cosine(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad=False):
    """The cosine (sine) window, `sin(pi (k + 0.5) / N)` (`N = M`, or `M + 1` when `sym=False`), as
    `torch.signal.windows.cosine`.

    >>> aotjax.signal.windows.cosine(2)
    tensor([0.70710677, 0.70710677])
    """
    return _window("cosine", M, dtype, lambda M: np.sin((np.arange(M) + 0.5) * (math.pi / (M if sym else M + 1))))


def exponential(M: int, *, center=None, tau: float = 1.0, sym: bool = True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """`exp(-|k - center| / tau)` (`center` the middle by default; only for `sym=False`), as
    `torch.signal.windows.exponential`.

    >>> aotjax.signal.windows.exponential(3, tau=1.0)
    tensor([0.36787945, 1.        , 0.36787945])
    """
    if tau <= 0:
        raise ValueError(f"signal.windows.exponential: tau must be positive, got {tau}{where()}")
    if sym and center is not None:
        raise ValueError(f"signal.windows.exponential: center must be None for symmetric windows{where()}")

    def values(M):
        c = (M if not sym else M - 1) / 2.0 if center is None else float(center)
        return np.exp(-np.abs(np.arange(M) - c) / tau)
    return _window("exponential", M, dtype, values)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None, layout=None, device=None,
             requires_grad=False):
    """`exp(-((k - center) / std) ** 2 / 2)`, as `torch.signal.windows.gaussian`.

    >>> aotjax.signal.windows.gaussian(3, std=1.0)
    tensor([0.60653067, 1.        , 0.60653067])
    """
    if std <= 0:
        raise ValueError(f"signal.windows.gaussian: std must be positive, got {std}{where()}")
    return _window("gaussian", M, dtype,
                   lambda M: np.exp(-((np.arange(M) - (M if not sym else M - 1) / 2.0) / std) ** 2 / 2))


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None, layout=None, device=None,
           requires_grad=False):
    """The Kaiser window, `I0(beta sqrt(1 - (2 k / N - 1) ** 2)) / I0(beta)`, as `torch.signal.windows.kaiser`.

    >>> aotjax.signal.windows.kaiser(3, beta=0.0)
    tensor([1., 1., 1.])
    """
    if beta < 0:
        raise ValueError(f"signal.windows.kaiser: beta must be non-negative, got {beta}{where()}")

    def values(M):
        r = np.arange(M) * (2.0 / (M - 1 if sym else M)) - 1
        return np.i0(beta * np.sqrt(np.clip(1 - r * r, 0, None))) / np.i0(beta)
    return _window("kaiser", M, dtype, values)
