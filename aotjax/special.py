"""`aotjax.special`: PyTorch's `torch.special` namespace (error functions, gamma functions, Bessel functions, the
normal distribution's CDF and its inverse, `xlogy`, `logit`, softmax, the orthogonal polynomials). The ops live in
the op families (`aotjax.ops.pointwise`; `softmax`, `log_softmax` in `aotjax.ops.nn`, `logsumexp` in
`aotjax.ops.reduction`; the polynomials, `bessel_y0/y1`, `modified_bessel_*`, `airy_ai` in
`aotjax.ops.special_ops`).

>>> aotjax.special.ndtr(aotjax.tensor([0.0]))
tensor([0.5])
"""
from aotjax.ops.elementwise import erf, expm1, log1p, round  # noqa: F401
from aotjax.ops.elementwise import sigmoid as expit  # noqa: F401
from aotjax.ops.extra_special import igamma as gammainc  # noqa: F401
from aotjax.ops.extra_special import igammac as gammaincc  # noqa: F401
from aotjax.ops.nn import log_softmax, softmax  # noqa: F401
from aotjax.ops.pointwise import (  # noqa: F401
    bessel_j0,
    bessel_j1,
    digamma,
    entr,
    erfc,
    erfcx,
    erfinv,
    exp2,
    i0,
    i0e,
    i1,
    i1e,
    log_ndtr,
    logit,
    ndtr,
    ndtri,
    polygamma,
    sinc,
    xlog1py,
    xlogy,
    zeta,
)
from aotjax.ops.pointwise import digamma as psi  # noqa: F401
from aotjax.ops.pointwise import lgamma as gammaln  # noqa: F401
from aotjax.ops.pointwise import mvlgamma as multigammaln  # noqa: F401
from aotjax.ops.reduction import logsumexp  # noqa: F401
from aotjax.ops.special_ops import *  # noqa: F401, F403
from aotjax.ops.special_ops import __all__ as _special_ops

__all__ = ["bessel_j0", "bessel_j1", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
           "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round", "sinc", "softmax", "xlog1py", "xlogy",
           "zeta", "gammainc", "gammaincc"] + _special_ops
