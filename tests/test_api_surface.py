"""Every primitive against the rules its kind needs, and every Tensor method against aotjax.ops."""
import pytest

import aotjax
from aotjax.core import Kind, all_primitives
from aotjax.lowering.rules import lowering_rules

PRIMS = all_primitives()


def test_every_tensor_method_exists():
    assert aotjax.Tensor._missing_methods == ()


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
