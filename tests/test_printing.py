"""Golden tests of the jaxpr printer's exact textual form (JAX's style)."""
import inspect
import textwrap

import aotjax
from aotjax.core.ir import Eqn


def _golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def _next_line() -> int:
    return inspect.currentframe().f_back.f_lineno + 1


def test_simple_chain():
    closed = aotjax.make_jaxpr(lambda x: x.sin().sin() * x)(aotjax.ones(3))
    assert str(closed) == _golden("""
        { lambda ; a:f32[3]. let
            b:f32[3] = sin a
            c:f32[3] = sin b
            d:f32[3] = mul c a
          in (d,) }
        """)


def test_literals_and_casts():
    def f(x, i):
        return x * 2 + 1, i * 3, x.to(aotjax.int32) + True

    closed = aotjax.make_jaxpr(f)(aotjax.ones(3), aotjax.tensor([1, 2], dtype=aotjax.int32))
    assert str(closed) == _golden("""
        { lambda ; a:f32[3] b:i32[2]. let
            c:f32[3] = mul a 2.0
            d:f32[3] = add c 1.0
            e:i32[2] = mul b 3
            f:i32[3] = convert_element_type[new_dtype=int32] a
            g:i32[3] = add f 1
          in (d, e, g) }
        """)


def test_view_and_in_place():
    def f(x):
        x.t()[0].mul_(2)
        return x.sin()

    closed = aotjax.make_jaxpr(f)(aotjax.ones(2, 3))
    assert str(closed) == _golden("""
        { lambda ; a:f32[2,3]. let
            b:f32[3,2] = permute[perm=(1, 0)] a
            c:f32[2] = select[dim=0 index=0] b
            d:f32[2] = mul_ c 2.0
            e:f32[2,3] = sin a
          in (e,) }
        """)


def test_multiple_outputs_in_pytree_order_and_an_input_returned():
    closed = aotjax.make_jaxpr(lambda x, y: {"a": x + y, "b": (x, y.t())})(aotjax.ones(2, 2), aotjax.ones(2, 2))
    assert str(closed) == _golden("""
        { lambda ; a:f32[2,2] b:f32[2,2]. let
            c:f32[2,2] = add a b
            d:f32[2,2] = permute[perm=(1, 0)] b
          in (c, a, d) }
        """)


def test_constants_are_constvars():
    c = aotjax.tensor([1.0, 2.0])
    closed = aotjax.make_jaxpr(lambda x: x * c)(aotjax.ones(2))
    assert str(closed) == _golden("""
        { lambda a:f32[2] ; b:f32[2]. let
            c:f32[2] = mul b a
          in (c,) }
        """)


def test_source_info_names_this_file_line_and_function():
    lines = []

    def f(x):
        lines.append(_next_line())
        y = x.sin()
        return y * 2

    closed = aotjax.make_jaxpr(f)(aotjax.ones(3))
    text = closed.pretty(source_info=True).splitlines()
    assert text[1] == f"    b:f32[3] = sin a    # test_printing.py:{lines[0]} (f)"
    assert text[2] == f"    c:f32[3] = mul b 2.0    # test_printing.py:{lines[0] + 1} (f)"
    assert "#" not in str(closed)


def test_names_beyond_26_variables():
    def f(x):
        for _ in range(28):
            x = x.sin()
        return x

    lines = str(aotjax.make_jaxpr(f)(aotjax.ones(1))).splitlines()
    assert lines[0] == "{ lambda ; a:f32[1]. let"
    assert lines[25] == "    z:f32[1] = sin y"
    assert lines[26] == "    aa:f32[1] = sin z"
    assert lines[28] == "    ac:f32[1] = sin ab"
    assert lines[29] == "  in (ac,) }"


def test_sub_jaxprs_print_nested():
    inner = aotjax.make_jaxpr(lambda x: x.sin())(aotjax.ones(2))
    outer = aotjax.make_jaxpr(lambda x: x.sin() + 1.0)(aotjax.ones(2))
    eqn = outer.eqns[0]
    outer.jaxpr.eqns[0] = Eqn(eqn.primitive, eqn.inputs, eqn.outputs, {"body": inner}, eqn.source_info)
    assert str(outer) == _golden("""
        { lambda ; a:f32[2]. let
            d:f32[2] = sin[body=
                  { lambda ; b:f32[2]. let
                      c:f32[2] = sin b
                    in (c,) }] a
            e:f32[2] = add d 1.0
          in (e,) }
        """)
