"""`aotjax.special`: PyTorch's `torch.special` namespace (error functions, gamma functions, Bessel functions, the
normal distribution's CDF and its inverse, `xlogy`, `logit`, softmax, the orthogonal polynomials). The ops live in
the op families (`aotjax.ops.math.functions`; `softmax`, `log_softmax` in `aotjax.ops.nn.activations`, `logsumexp` in
`aotjax.ops.reduce.reductions`; the polynomials, `bessel_y0/y1`, `modified_bessel_*`, `airy_ai` in
`aotjax.ops.math.special`).

>>> aotjax.special.ndtr(aotjax.tensor([0.0]))
tensor([0.5])
"""
from aotjax.ops.math.elementwise import erf, expm1, log1p, round  # noqa: F401
from aotjax.ops.math.elementwise import sigmoid as expit  # noqa: F401
from aotjax.ops.math.functions import (  # noqa: F401
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
from aotjax.ops.math.functions import digamma as psi  # noqa: F401
from aotjax.ops.math.functions import lgamma as gammaln  # noqa: F401
from aotjax.ops.math.functions import mvlgamma as multigammaln  # noqa: F401
from aotjax.ops.math.special import *  # noqa: F401, F403
from aotjax.ops.math.special import __all__ as _special_ops
from aotjax.ops.math.special import igamma as gammainc  # noqa: F401
from aotjax.ops.math.special import igammac as gammaincc  # noqa: F401
from aotjax.ops.nn.activations import log_softmax, softmax  # noqa: F401
from aotjax.ops.reduce.reductions import logsumexp  # noqa: F401

__all__ = ["bessel_j0", "bessel_j1", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
           "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round", "sinc", "softmax", "xlog1py", "xlogy",
           "zeta", "gammainc", "gammaincc"] + _special_ops
