"""Ready-made parametrizations, as `torch.nn.utils.parametrizations`: `weight_norm`, `spectral_norm` and
`orthogonal`, each registered through `aotjax.nn.utils.parametrize` (the module's class becomes
`Parametrized<Class>`, the stored tensors live in `module.parametrizations.<name>`).

>>> m = weight_norm(aotjax.nn.Linear(3, 2))
>>> list(m.state_dict())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
>>> m
ParametrizedLinear(
  in_features=3, out_features=2, bias=True
  (parametrizations): ModuleDict(
    (weight): ParametrizationList(
      (0): _WeightNorm()
    )
  )
)
"""
from __future__ import annotations

import numpy as np

from aotjax.core.interpreter import Tracer, grad_mode
from aotjax.nn.module import Module
from aotjax.nn.modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from aotjax.nn.utils import parametrize
from aotjax.nn.utils.weight_norm import norm_except_dim, weight_normalized
from aotjax.ops.base.data import tensor
from aotjax.ops.creation.factories import eye
from aotjax.ops.linalg.decompositions import matrix_exp, qr, solve
from aotjax.ops.linalg.solvers import householder_product
from aotjax.ops.nn.normalization import normalize
from aotjax.ops.shape.copies import cat
from aotjax.tensor import Tensor

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


# -- weight_norm ---------------------------------------------------------------------------------------------------
class _WeightNorm(Module):
    """`weight = g * v / norm_except_dim(v, 2, dim)` from `(g, v)`; `right_inverse` splits a weight into the two."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_normalized(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Weight normalization of the tensor `name` of `module`, as `torch.nn.utils.parametrizations.weight_norm`: it is
    stored as a magnitude `original0` (its norm over every dimension but `dim`; `dim=None`: the whole tensor's norm)
    and a direction `original1` (its value), in `module.parametrizations.<name>`, and computed as
    `original0 * original1 / ||original1||` at each read. Returns `module`.

    Loading a `state_dict` saved with the older `weight_norm` (keys `weight_g`, `weight_v`) needs its keys renamed to
    `parametrizations.weight.original0` and `.original1` first (PyTorch renames them in a load hook).

    >>> m = weight_norm(aotjax.nn.Linear(4, 3))
    >>> m.parametrizations.weight.original0.shape, m.parametrizations.weight.original1.shape
    ((3, 1), (3, 4))
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


# -- spectral_norm -------------------------------------------------------------------------------------------------
class _SpectralNorm(Module):
    """`weight / sigma`, `sigma` the largest singular value of `weight` seen as a matrix whose rows run along `dim`,
    estimated by power iteration from the buffers `_u` and `_v`; in training mode each evaluation first refines them
    by `n_power_iterations` steps. A 1-d weight is divided by its norm."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if not -ndim <= dim < ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim % ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with grad_mode(False):
                weight_mat = self._reshape_weight_to_matrix(weight)
                h, w = weight_mat.shape
                self.register_buffer("_u", normalize(weight_mat.new_empty(h).normal_(0, 1), dim=0, eps=eps))
                self.register_buffer("_v", normalize(weight_mat.new_empty(w).normal_(0, 1), dim=0, eps=eps))
            self._power_method(weight_mat, 15)  # NOTE: from random vectors to reasonable estimates, as PyTorch

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.flatten(1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        """Refine `_u` and `_v` in place (PyTorch's order: `u` first)."""
        with grad_mode(False):
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(weight_mat.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(normalize(weight_mat.mH.mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # NOTE: copies, so that refining the estimates in place later leaves this value's recorded operands alone
        u, v = self._u.clone(), self._v.clone()
        sigma = u.vdot(weight_mat.mv(v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Spectral normalization of the tensor `name` of `module`, as `torch.nn.utils.parametrizations.spectral_norm`:
    it is computed as `original / sigma`, `sigma` its largest singular value (viewed as a matrix whose rows run along
    `dim`: 1 for a `ConvTranspose`, else 0, the default, None, picks it), estimated by power iteration. The estimates
    are the buffers `module.parametrizations.<name>[0]._u` and `._v`, refined by 15 steps now and by
    `n_power_iterations` steps at each read of `module.<name>` in training mode (use `parametrize.cached()` to read
    it several times per step). Returns `module`.

    >>> m = spectral_norm(aotjax.nn.Linear(4, 3))
    >>> list(m.state_dict())
    ['bias', 'parametrizations.weight.original', 'parametrizations.weight.0._u', 'parametrizations.weight.0._v']
    >>> type(m.parametrizations.weight[0]).__name__, m.parametrizations.weight[0]._u.shape
    ('_SpectralNorm', (3,))
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# -- orthogonal ----------------------------------------------------------------------------------------------------
_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


class _Orthogonal(Module):
    """An orthogonal (unitary) matrix, or batch of them, from an unconstrained one of the same shape, by
    `orthogonal_map`. With `use_trivialization` the result is `base @ map(X)`, `base` a buffer that assignment sets
    (so any orthogonal matrix can be assigned)."""

    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == "householder":
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2:]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map == "householder":
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = householder_product(A, tau)
            # NOTE: X's diagonal holds the signs (+1 or -1) of Q's columns, outside differentiation
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        else:
            Q = self._from_skew(X, n, k)
        if "base" in self._buffers:
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def _from_skew(self, X: Tensor, n: int, k: int) -> Tensor:
        """`matrix_exp(A)` or the Cayley map `(I - A/2)^-1 (I + A/2)` of the skew matrix `A` made from X's lower
        triangle (padded to n x n), its first k columns."""
        X = X.tril()
        if n != k:
            X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
        A = X - X.mH
        if self.orthogonal_map == "matrix_exp":
            Q = matrix_exp(A)
        else:
            Id = eye(n, dtype=A.dtype)
            Q = solve(Id - A / 2, Id + A / 2)
        return Q[..., :k] if n != k else Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        if tuple(Q.shape) != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of shape "
                             f"{tuple(Q.shape)}.")
        with grad_mode(False):
            Q_init = Q
            n, k = Q.shape[-2:]
            transposed = n < k
            if transposed:
                Q = Q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map != "householder":
                    # NOTE: registration takes NotImplementedError for the identity (the weight is kept as it is),
                    # assignment raises it
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                     "parametrizations when use_trivialization=False.")
                A = _householder_reflectors(Q)
                return A.mT if transposed else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:  # NOTE: completed to a square orthogonal matrix by random columns, as PyTorch
                N = Q.new_empty(*Q.shape[:-2], n, n - k).normal_()
                Q = _make_orthogonal(cat([Q, N], dim=-1))
            self.base = Q
            neg_Id = Q_init.new_zeros(Q_init.shape)
            neg_Id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)  # NOTE: householder(0) is then the identity
            return neg_Id


def _is_orthogonal(Q: Tensor) -> bool:
    n, k = Q.shape[-2:]
    eps = 10.0 * n * np.finfo(np.dtype(Q.dtype)).eps
    return bool(((Q.mH @ Q) - eye(k, dtype=Q.dtype)).abs().max() <= eps)


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q factor of a tall `A = QR` with a real non-negative diagonal of R."""
    Q, R = qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


def _householder_reflectors(Q: Tensor) -> Tensor:
    """LAPACK's `geqrf` of `Q` (the reflectors below the diagonal) with the diagonal replaced by the signs that make
    `householder` map it back to `Q`'s orthogonal factor, as PyTorch's `right_inverse`."""
    if isinstance(Q, Tracer):
        raise RuntimeError("orthogonal: assigning to a householder parametrization with "
                           "use_trivialization=False runs LAPACK's geqrf eagerly, on the host; assign outside the "
                           "compiled function, or use use_trivialization=True")
    matrices = np.asarray(Q)
    a, taus = np.empty_like(matrices), np.empty(matrices.shape[:-2] + matrices.shape[-1:], matrices.dtype)
    for index in np.ndindex(matrices.shape[:-2]):
        h, taus[index] = np.linalg.qr(matrices[index], mode="raw")  # NOTE: geqrf's output, transposed
        a[index] = h.T
    diagonal = np.sign(np.diagonal(a, axis1=-2, axis2=-1))
    diagonal = np.where(taus == 0.0, -diagonal, diagonal)  # NOTE: LAPACK's tau is exactly 0 for a skipped reflection
    rows = np.arange(diagonal.shape[-1])
    a[..., rows, rows] = diagonal
    return tensor(a, dtype=Q.dtype)


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Make the matrix (or batch of matrices) `name` of `module` orthogonal, as
    `torch.nn.utils.parametrizations.orthogonal`: computed at each read from an unconstrained tensor of the same
    shape by `orthogonal_map` — "matrix_exp", "cayley" or "householder" (the default, None: "matrix_exp" for square
    or complex matrices, else "householder"). With `use_trivialization` (the default) the result is multiplied by a
    buffer `base`, set on registration and on each assignment to `module.<name>`: the current value is kept, made
    orthogonal. Without it, "householder" stores LAPACK's reflectors of the assigned matrix (computed eagerly, on the
    host: assign outside a compiled function) and the other maps cannot be assigned to. Returns `module`.

    >>> m = orthogonal(aotjax.nn.Linear(3, 3))
    >>> Q = m.weight
    >>> bool(aotjax.allclose(Q @ Q.T, aotjax.eye(3), atol=1e-5))
    True
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: '
                         f'{orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
