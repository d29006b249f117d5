"""Indexing: `x[index]` and `x[index] = value` with PyTorch's rules and the gather/scatter primitives they lower
to (`subscripts`), and the gather/scatter family on them (`gather_scatter`: scatter_reduce, index_*, take, put,
masked_select, nonzero)."""
