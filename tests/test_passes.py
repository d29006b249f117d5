"""Named passes (`aotjax.transforms.passes`): every pipeline prints each pass with its jaxpr under
`AOTJAX_DUMP=1`, logs it at DEBUG on the `aotjax` logger, and typechecks it under `AOTJAX_TYPECHECK=1`."""
from __future__ import annotations

import logging
import re

import numpy as np
import pytest

import aotjax
from aotjax.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var
from aotjax.core.typecheck import JaxprTypeError
from aotjax.ops.math.elementwise import sin_p
from aotjax.transforms.passes import run_pass

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass

_HEADER = re.compile(r"^--- aotjax pass: (.+) ---$", re.MULTILINE)


def _dumped(text: str) -> list[str]:
    """The pass titles of a dump, in order, each checked to be followed by a jaxpr."""
    titles = _HEADER.findall(text)
    bodies = _HEADER.split(text)[2::2]
    for title, body in zip(titles, bodies, strict=True):
        assert body.lstrip().startswith("{ lambda"), (title, body[:200])
    return titles


@pytest.fixture
def dump(monkeypatch, capsys):
    """Run a callable with AOTJAX_DUMP=1; returns the pass titles it printed."""
    monkeypatch.setenv("AOTJAX_DUMP", "1")

    def run(fn, *args):
        capsys.readouterr()
        result = fn(*args)
        return result, _dumped(capsys.readouterr().out)

    return run


def _loss(x):
    y = x * 2
    y[1:].mul_(3)
    return y.sin().sum()


def _x():
    return aotjax.tensor([0.5, -1.0, 2.0])


def test_grad_prints_linearize_and_transpose(dump):
    g, titles = dump(aotjax.grad(_loss), _x())
    assert "grad: linearize (linear)" in titles and titles[-1] == "grad: transpose"
    np.testing.assert_allclose(np.asarray(g), np.asarray(aotjax.grad(_loss)(_x())))


def test_vjp_passes_carry_its_name(dump):
    (out, f_vjp), titles = dump(aotjax.vjp, _loss, _x())
    assert titles == ["vjp: linearize (linear)"]
    _, titles = dump(f_vjp, aotjax.tensor(1.0))
    assert titles == ["vjp: transpose"]


def test_grad_of_aot_prints_every_pass_in_order(dump):
    compiled = aotjax.aot(_loss)
    g, titles = dump(aotjax.grad(compiled), _x())
    assert titles == ["aot: functionalize", "aot: lower",
                      "aot: linearize (forward)", "aot: linearize (linear)", "aot: transpose", "aot: joint",
                      "aot: partition (forward)", "aot: partition (backward)", "aot: lower forward",
                      "aot: lower backward"]  # on eager arguments grad runs aot's two programs: nothing to trace
    np.testing.assert_allclose(np.asarray(g), np.asarray(aotjax.grad(_loss)(_x())), rtol=1e-6)
    _, titles = dump(aotjax.grad(compiled), _x())
    assert titles == []  # aot's programs are cached
    _, titles = dump(aotjax.grad(lambda x: compiled(x)), _x())  # not an aot function: grad traces the call
    assert "grad: linearize (linear)" in titles and titles[-1] == "grad: transpose"


def _scale_(x, w):
    x.mul_(w)
    return x.sum()


def test_jit_and_make_jaxpr_print_their_passes(dump):
    _, titles = dump(aotjax.jit(_scale_), _x(), _x())
    assert titles == ["jit: functionalize", "jit: lower, donating inputs 0"]  # x is written: donated
    _, titles = dump(aotjax.make_jaxpr(aotjax.grad(_loss)), _x())
    assert titles == ["grad: linearize (linear)", "grad: transpose", "trace"]


def test_aot_decompositions_and_user_compiler_are_passes(dump):
    compiled = aotjax.aot(lambda x: x.tanh().sum(), fw_compiler=lambda j, avals: aotjax.to_jax(j),
                          decompositions={"tanh": lambda x: (x * 2).sigmoid() * 2 - 1})
    _, titles = dump(compiled, _x())
    assert titles == ["aot: functionalize", "aot: decompose", "aot: lower", "aot: lower inference"]


def test_checkpoint_region_is_a_pass(dump):
    block = aotjax.checkpoint(lambda x: x.sin().cos())
    _, titles = dump(aotjax.grad(lambda x: block(x).sum()), _x())
    assert titles == ["checkpoint: functionalize", "grad: linearize (linear)", "grad: transpose"]


def test_dumped_programs_are_the_stages(dump, capsys):
    lowered = aotjax.aot(_loss).lower(_x())
    out = capsys.readouterr().out
    assert f"--- aotjax pass: aot: joint ---\n{lowered.joint.pretty(source_info=True)}\n" in out
    assert f"--- aotjax pass: aot: partition (forward) ---\n{lowered.forward.pretty(source_info=True)}\n" in out
    assert "(_loss)" in out  # source lines


def test_without_dump_nothing_is_printed(monkeypatch, capsys):
    monkeypatch.delenv("AOTJAX_DUMP", raising=False)
    aotjax.grad(aotjax.aot(_loss))(_x())
    assert capsys.readouterr().out == ""


def test_debug_log_names_every_pass(monkeypatch, caplog):
    monkeypatch.delenv("AOTJAX_DUMP", raising=False)
    with caplog.at_level(logging.DEBUG, logger="aotjax"):
        aotjax.grad(aotjax.aot(_loss))(_x())
    passes = [r.getMessage().split(":\n")[0] for r in caplog.records if r.name == "aotjax"]
    assert passes[:3] == ["pass aot: functionalize", "pass aot: lower", "pass aot: linearize (forward)"]
    assert passes[-1] == "pass aot: lower backward"
    assert all("{ lambda" in r.getMessage() for r in caplog.records if r.name == "aotjax")


def _ill_typed() -> ClosedJaxpr:
    x = Var(aotjax.ShapedArray((3,), np.float32))
    y = Var(aotjax.ShapedArray((4,), np.float32))  # sin of f32[3] is not f32[4]
    return ClosedJaxpr(Jaxpr([], [x], [Eqn(sin_p, [x], [y], {})], [y]), [])


def test_run_pass_typechecks_what_it_shows(monkeypatch):
    monkeypatch.setenv("AOTJAX_TYPECHECK", "1")
    with pytest.raises(JaxprTypeError, match="sin"):
        run_pass("broken", _ill_typed)
    monkeypatch.setenv("AOTJAX_TYPECHECK", "0")
    assert isinstance(run_pass("broken", _ill_typed), ClosedJaxpr)


def test_run_pass_shows_lazily(monkeypatch):
    monkeypatch.setenv("AOTJAX_TYPECHECK", "0")
    monkeypatch.delenv("AOTJAX_DUMP", raising=False)
    shown = []
    assert run_pass("p", lambda a, b: a + b, 1, 2, show=lambda r: shown.append(r)) == 3
    assert shown == []  # nothing to log, dump or check: the display program is never built
    monkeypatch.setenv("AOTJAX_TYPECHECK", "1")
    run_pass("p", lambda: 3, show=lambda r: shown.append(r), display_only=True)
    assert shown == []  # built for the dump and the log only, never just to typecheck
