"""Every primitive against the rules its kind needs, and every documented Tensor method against aotjax.ops."""
import pytest

import aotjax
from aotjax import ops
from aotjax.core import Kind, all_primitives
from aotjax.interpreters.lowering import lowering_rules

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass

PRIMS = all_primitives()

# The Tensor methods the README documents ("Supported ops"), with PyTorch's names. Each op family installs its
# own (`aotjax.tensor.method`) beside the op; this list is the documentation's, checked against what exists.
DOCUMENTED_METHODS = """
neg abs exp log log1p expm1 sqrt rsqrt sin cos tan tanh sigmoid relu gelu silu erf floor ceil round sign
reciprocal square isnan isfinite logical_not
neg_ abs_ exp_ log_ log1p_ expm1_ sqrt_ rsqrt_ sin_ cos_ tan_ tanh_ sigmoid_ relu_ gelu_ silu_ erf_ floor_
ceil_ round_ sign_ reciprocal_ square_ logical_not_
add sub mul div floor_divide remainder pow maximum minimum atan2 eq ne lt le gt ge logical_and logical_or
bitwise_and bitwise_or bitwise_xor bitwise_not clamp clip lerp where
add_ sub_ mul_ div_ floor_divide_ remainder_ pow_ atan2_ eq_ ne_ lt_ le_ gt_ ge_ logical_and_ logical_or_
bitwise_and_ bitwise_or_ bitwise_xor_ clamp_ clip_ lerp_
to type_as float double half bfloat16 int long bool
sum mean prod amax amin max min argmax argmin all any var std logsumexp cumsum
matmul mm bmm dot outer
view view_as reshape reshape_as flatten contiguous transpose permute t T mT squeeze unsqueeze expand expand_as
broadcast_to select narrow diagonal unbind split chunk movedim detach t_ transpose_ squeeze_ unsqueeze_ as_strided
clone flip roll repeat tile tril triu
index_select gather scatter scatter_ scatter_add scatter_add_ masked_fill masked_fill_ index_put index_put_
index_add index_add_ copy_ fill_ zero_
softmax log_softmax
""".split()
OPERATORS = """
__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__ __rfloordiv__ __mod__
__rmod__ __pow__ __rpow__ __matmul__ __rmatmul__ __neg__ __pos__ __abs__ __invert__ __and__ __rand__ __or__ __ror__
__xor__ __rxor__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __iadd__ __isub__ __imul__ __itruediv__ __ifloordiv__
__imod__ __ipow__ __iand__ __ior__ __getitem__ __setitem__ __iter__ __init__
""".split()


@pytest.mark.parametrize("name", DOCUMENTED_METHODS + OPERATORS)
def test_documented_tensor_method_exists(name):
    assert name in vars(aotjax.Tensor), f"Tensor.{name} is documented but no op family installs it"


# NOTE: `Tensor.where(condition, y)` puts the tensor second (`where(condition, self, y)`), as torch's does
@pytest.mark.parametrize("name", [n for n in DOCUMENTED_METHODS if n in ops.__all__ and n != "where"])
def test_tensor_method_is_the_op_function(name):
    assert getattr(aotjax.Tensor, name) is getattr(ops, name)


def test_operators_call_the_ops():
    x, y = aotjax.tensor([6, 4]), aotjax.tensor([4, 3])
    assert (x + y).tolist() == [10, 7] and (1 - x).tolist() == [-5, -3] and (x // y).tolist() == [1, 1]
    assert (2 ** y).tolist() == [16, 8] and (x % y).tolist() == [2, 1] and (-x).tolist() == [-6, -4]
    assert (x > y).tolist() == [True, True] and (x == 6).tolist() == [True, False] and (~(x > 5)).tolist() == [
        False, True]
    assert [r.tolist() for r in aotjax.tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]
    assert aotjax.Tensor([1.5]).dtype == aotjax.float32


def test_primitive_names_are_unique():
    names = [p.name for p in PRIMS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("prim", [p for p in PRIMS if not p.is_metadata_mutation], ids=lambda p: p.name)
def test_has_lowering_rule(prim):
    assert prim in lowering_rules, f"lowering rule for primitive '{prim.name}' is missing"


@pytest.mark.parametrize("prim", [p for p in PRIMS if p.kind is Kind.VIEW], ids=lambda p: p.name)
def test_view_has_inverse_and_strides(prim):
    assert prim.view_inverse is not None, f"view primitive '{prim.name}' has no view_inverse rule"
    assert prim.view_strides is not None, f"view primitive '{prim.name}' has no view_strides rule"


@pytest.mark.parametrize("prim", [p for p in PRIMS if p.kind is Kind.MUTATION], ids=lambda p: p.name)
def test_mutation_declares_what_it_writes(prim):
    assert prim.mutates
    if prim.is_metadata_mutation:
        assert prim.metadata_view.kind is Kind.VIEW
    else:
        assert prim.functional is not None and prim.functional.kind is Kind.FUNCTIONAL
