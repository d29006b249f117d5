"""`aotjax.linalg`: PyTorch's `torch.linalg` namespace (factorizations, solvers, determinants, norms), batched
over leading dims, with torch's names, arguments and result NamedTuples (`QR`, `SVD`, `EighResult`,
`SlogdetResult`, ...). The ops live in the op families (`aotjax.ops.linalg.decompositions`, `.norms`; `matmul` and
friends in `aotjax.ops.linalg.matmul`).

>>> aotjax.linalg.solve(aotjax.tensor([[2.0, 0.0], [0.0, 4.0]]), aotjax.tensor([2.0, 4.0]))
tensor([1., 1.])
"""
from aotjax.ops.linalg.compact import LINALG as _COMPACT
from aotjax.ops.linalg.compact import (  # noqa: F401
    LDLFactorExResult,
    LDLFactorResult,
    ldl_factor,
    ldl_factor_ex,
    ldl_solve,
)
from aotjax.ops.linalg.decompositions import (  # noqa: F401
    LINALG,
    QR,
    SVD,
    CholeskyExResult,
    EighResult,
    EigResult,
    InvExResult,
    LstsqResult,
    LUFactorResult,
    LUResult,
    SlogdetResult,
    cholesky,
    cholesky_ex,
    cross,
    det,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    inv,
    inv_ex,
    lstsq,
    lu,
    lu_factor,
    lu_solve,
    matrix_exp,
    matrix_power,
    matrix_rank,
    multi_dot,
    pinv,
    qr,
    slogdet,
    solve,
    solve_triangular,
    svd,
    svdvals,
    vecdot,
    )
from aotjax.ops.linalg.matmul import matmul  # noqa: F401
from aotjax.ops.linalg.norms import LINALG as _NORMS
from aotjax.ops.linalg.norms import matrix_norm, norm, vector_norm  # noqa: F401
from aotjax.ops.linalg.solvers import LINALG as _EXTRA
from aotjax.ops.linalg.solvers import (  # noqa: F401
    LUFactorExResult,
    SolveExResult,
    cond,
    diagonal,
    householder_product,
    lu_factor_ex,
    solve_ex,
    tensorinv,
    tensorsolve,
    vander,
)

__all__ = _NORMS + LINALG + ["matmul"] + _EXTRA + _COMPACT
