"""The few ops the interpreters compute with, which `aotjax.ops` defines one layer above them.

A jvp instantiates a symbolic zero tangent, transpose sums a broadcast cotangent back to its operand's
shape, functionalize casts an in-place result to the written tensor's dtype: each needs an op, and the
ops sit above the interpreters (core <- tensor <- interpreters <- ops). So the interpreters call these
names, and each op family sets the ones it defines when it loads (`hooks.add = add_p.bind` in
`aotjax/ops/math/elementwise.py`). `aotjax.ops` imports every family, so importing
any op sets them all. Each is a plain function on values of the current interpreter level.
"""
from __future__ import annotations


def _unset(name: str):
    def missing(*args, **kwargs):
        raise RuntimeError(f"the interpreters need the op '{name}', which aotjax.ops defines, but aotjax.ops "
                           f"has not been imported; import aotjax first")
    missing.__name__ = name
    return missing


zeros = _unset("zeros")  # zeros(aval): a zero tensor of abstract value `aval`
add = _unset("add")  # add(a, b): a + b for operands of one abstract value (no promotion, no broadcasting)
reduce_sum = _unset("reduce_sum")  # reduce_sum(x, axes): `x` summed over the dims `axes`, which are dropped
reshape = _unset("reshape")  # reshape(x, shape): `x` with the same elements in `shape`
expand = _unset("expand")  # expand(x, shape): `x` broadcast to `shape`
permute = _unset("permute")  # permute(x, perm): `x` with its axes in the order `perm`
convert = _unset("convert")  # convert(x, dtype): `x` converted to `dtype` (`x` itself if it has it)
arange = _unset("arange")  # arange(n): int32 0, 1, ..., n - 1 (vmap's example indices)
keep_derivative = _unset("keep_derivative")  # keep_derivative(d, v): `v` with the derivative of `d` (same aval)
as_tensor = _unset("as_tensor")  # as_tensor(x): `x` if it is a Tensor, else a Tensor holding the array `x`
