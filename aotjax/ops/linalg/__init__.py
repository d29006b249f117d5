"""Linear algebra: `matmul`/`einsum` and the products on them (`matmul`, `products`), torch.linalg's
factorizations, solvers, determinants and norms (`decompositions`, `solvers`, `norms`), and torch's older top-level
names (`lapack`)."""
