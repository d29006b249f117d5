"""Golden tests of the jaxpr printer's exact textual form (JAX's style)."""
import functools
import inspect
import textwrap

import pytest

import aotjax
from aotjax.core.ir import Eqn
from aotjax.core.pretty import MAX_PRINTED_CONST_SIZE


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
        { lambda a:f32[2]=[1.0,2.0] ; b:f32[2]. let
            c:f32[2] = mul b a
          in (c,) }
        """)


def test_small_constants_print_their_values_large_ones_only_their_type():
    """Constants of at most MAX_PRINTED_CONST_SIZE (8) elements print their values, as literals do."""
    assert MAX_PRINTED_CONST_SIZE == 8
    consts = [aotjax.tensor(2.5), aotjax.tensor([[1, 2], [3, 4]], dtype=aotjax.int32), aotjax.tensor([True, False]),
              aotjax.arange(8, dtype=aotjax.float32), aotjax.arange(9, dtype=aotjax.float32),
              aotjax.tensor([1.5], dtype=aotjax.bfloat16)]

    def f(x):
        return [x * c for c in consts]

    closed = aotjax.make_jaxpr(f)(aotjax.ones(()))
    assert str(closed).splitlines()[0] == (
        "{ lambda a:f32[]=2.5 b:i32[2,2]=[[1,2],[3,4]] c:bool[2]=[True,False] "
        "d:f32[8]=[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0] e:f32[9] f:bf16[1]=[1.5] ; g:f32[]. let")


def test_traced_constants_of_a_nested_program_print_only_their_type():
    def f(x):
        inner = aotjax.make_jaxpr(lambda y: y * x)(aotjax.ones(()))  # x: a tracer of the outer trace
        assert str(inner).startswith("{ lambda a:f32[] ; b:f32[]. let")
        return x

    aotjax.make_jaxpr(f)(aotjax.ones(()))


def _policy_method_owner():
    class Policies:
        def only_dots(self, prim, *avals, **params):
            return False

    return Policies()


class _PolicyObject:
    def __call__(self, prim, *avals, **params):
        return False


@pytest.mark.parametrize("policy,shown", [
    (None, "nothing_saveable"),
    (aotjax.checkpoint_policies.dots_saveable, "dots_saveable"),
    (aotjax.checkpoint_policies.save_only_these_names("b", "a"), "save_only_these_names('a', 'b')"),
    (aotjax.checkpoint_policies.save_only_these_names("h"), "save_only_these_names('h')"),
    (aotjax.checkpoint_policies.save_anything_except_these_names("h"), "save_anything_except_these_names('h')"),
    (lambda prim, *avals, **params: True, "<lambda>"),
    (functools.partial(lambda limit, prim, *avals, **params: True, 3), "partial(<lambda>, 3)"),
    (_policy_method_owner().only_dots, "Policies.only_dots"),
    (_PolicyObject(), "_PolicyObject"),
], ids=["default", "dots", "names", "one_name", "except_names", "lambda", "partial", "method", "callable_object"])
def test_function_valued_params_print_by_name(policy, shown):
    f = aotjax.checkpoint(lambda x: x.sin().sin(), policy=policy)
    text = str(aotjax.make_jaxpr(f)(aotjax.ones(2)))
    assert f"policy={shown} prevent_cse=True]" in text
    assert " at 0x" not in text


def _custom_jvp_sin():
    @aotjax.custom_jvp
    def f(x):
        return x.sin()

    f.defjvp(lambda primals, tangents: (f(primals[0]), tangents[0] * primals[0].cos()))
    return f


def _custom_vjp_sin():
    @aotjax.custom_vjp
    def f(x):
        return x.sin()

    f.defvjp(lambda x: (f(x), x), lambda x, g: (g * x.cos(),))
    return f


PROGRAMS = [  # every higher-order primitive, as written and differentiated
    ("checkpoint", lambda x: aotjax.checkpoint(lambda y: y.sin())(x).sum()),
    ("custom_jvp", lambda x: _custom_jvp_sin()(x).sum()),
    ("custom_vjp", lambda x: _custom_vjp_sin()(x).sum()),
    ("aot", aotjax.aot(lambda x: x.sin().sum())),
    ("jit", aotjax.jit(lambda x: x.sin().sum())),
]


@pytest.mark.parametrize("name,f", PROGRAMS, ids=[p[0] for p in PROGRAMS])
@pytest.mark.parametrize("transform", [lambda f: f, aotjax.grad, lambda f: aotjax.jit(aotjax.grad(f))],
                         ids=["as_written", "grad", "jit_grad"])
def test_no_printed_program_shows_a_memory_address(name, f, transform):
    x = aotjax.ones(2)
    text = aotjax.make_jaxpr(transform(f))(x).pretty(source_info=True)
    text += str(aotjax.jit(transform(f)).lower(x))
    assert " at 0x" not in text and "<function" not in text, text


def test_jitted_lowered_and_compiled_print_readably():
    def step(x, n):
        x.mul_(n)
        return x.sum()

    jf = aotjax.jit(step, static_argnums=1)
    assert repr(jf) == "jit(step, static_argnums=(1,)): 0 programs cached"
    jf(aotjax.ones(2), 2)
    jf(aotjax.ones(2), 3)
    assert repr(jf) == "jit(step, static_argnums=(1,)): 2 programs cached"
    assert repr(aotjax.jit(step, donate=False)) == "jit(step, donate=False): 0 programs cached"
    assert repr(aotjax.aot(step, static_argnums=1)) == "aot(step, static_argnums=(1,)): 0 programs cached"
    lowered, first = jf.lower(aotjax.ones(2), 2), step.__code__.co_firstlineno
    assert repr(lowered) == "Lowered(jit(step) (f32[2]) -> (f32[], f32[2]))"
    assert str(lowered) == _golden("""
        { lambda ; a:f32[2]. let
            b:f32[2] = mul a 2.0    # test_printing.py:LINE (step)
            c:f32[] = reduce_sum[axes=(0,) keepdims=False] b    # test_printing.py:NEXT (step)
          in (c, b) }
        inputs:
          [0] x: f32[2]
        input mutations:
          data: [0] x is written (the program returns its new base, which replaces the caller's)
        outputs:
          out: a new value
        """).replace("LINE", str(first + 1)).replace("NEXT", str(first + 2))
    assert repr(lowered.compile()) == "Compiled(jit(step) (f32[2]) -> (f32[], f32[2]))"


def test_notebooks_show_the_lowered_program():
    """IPython's pretty printer (what a notebook cell shows) uses `_repr_pretty_`: the program."""
    from IPython.lib.pretty import pretty

    lowered = aotjax.jit(lambda x: x.sin()).lower(aotjax.ones(2))
    assert pretty(lowered) == str(lowered) and "sin a" in pretty(lowered)


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
