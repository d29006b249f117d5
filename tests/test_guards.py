"""Guards: a compiled program is never stale. Each case below is a function reading a Python value that a user
changes between calls (a global, a closure variable, an attribute of a captured object or module, a class attribute,
an enum flag, a partial's argument, a rebound parameter); under every transform the compiled result equals eager
after the change, and the function traced again exactly when the value decides the program (a rebound tensor of the
same shape is read live: no new trace)."""
from __future__ import annotations

import dataclasses
import enum
import functools
import logging
import types
import warnings

import numpy as np
import pytest

import aotjax
from aotjax import nn
from aotjax.runtime.recompiles import RecompileLimitError, RecompileWarning

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass

SCALE = 2.0
OFFSET = 1.0
ACT = aotjax.relu


class Mode(enum.Enum):
    DOUBLE = 1
    TRIPLE = 2


MODE = Mode.DOUBLE
USER_CONFIG = types.ModuleType("user_config")  # a user's own config module (`import config; config.SCALE`)
USER_CONFIG.SCALE = 2.0
WEIGHT = aotjax.tensor([1.0, 2.0, 3.0])


def _set_global(name, value):
    globals()[name] = value


def _helper(x):
    return x + OFFSET


class Holder:
    KIND = 2.0  # a class attribute

    def __init__(self):
        self.scale = 2.0

    def method(self, x):
        return (x * self.scale).sum()


@dataclasses.dataclass
class Config:
    scale: float = 2.0
    squared: bool = False


def _case_global():
    return (lambda x: (x * SCALE).sum()), lambda: _set_global("SCALE", 3.0), 1


def _case_closure():
    scale = 2.0

    def f(x):
        return (x * scale).sum()

    def change():
        nonlocal scale
        scale = 3.0
    return f, change, 1


def _case_object_attribute():
    holder = Holder()
    return (lambda x: (x * holder.scale).sum()), lambda: setattr(holder, "scale", 5.0), 1


def _case_dataclass_field():
    cfg = Config()
    return (lambda x: (x * x).sum() if cfg.squared else (x * cfg.scale).sum()), \
        lambda: setattr(cfg, "squared", True), 1


def _case_class_attribute():
    def change():
        Holder.KIND = 4.0
    f = lambda x: (x * Holder.KIND).sum()  # noqa: E731
    return f, change, 1


def _case_enum_flag():
    def f(x):
        return (x * 2).sum() if MODE is Mode.DOUBLE else (x * 3).sum()
    return f, lambda: _set_global("MODE", Mode.TRIPLE), 1


def _case_nested_function():
    return (lambda x: _helper(x).sum()), lambda: _set_global("OFFSET", -4.0), 1


def _case_method():
    holder = Holder()
    return holder.method, lambda: setattr(holder, "scale", -1.0), 1


def _case_partial():
    cfg = Config()

    def g(c, x):
        return (x * c.scale).sum()
    return functools.partial(g, cfg), lambda: setattr(cfg, "scale", 7.0), 1


def _case_dict_entry():
    cfg = {"scale": 2.0}
    return (lambda x: (x * cfg["scale"]).sum()), lambda: cfg.__setitem__("scale", 0.5), 1


def _case_user_module():
    return (lambda x: (x * USER_CONFIG.SCALE).sum()), lambda: setattr(USER_CONFIG, "SCALE", 9.0), 1


def _case_global_function():
    return (lambda x: ACT(x - 1).sum()), lambda: _set_global("ACT", aotjax.tanh), 1


def _case_module_eval():
    torch_like = nn.Sequential(nn.Linear(3, 3), nn.Dropout(1.0))  # p=1: zeros in training, the identity in eval
    return (lambda x: torch_like(x).sum()), torch_like.eval, 1


def _case_negative_slope():
    act = nn.LeakyReLU(0.1)
    return (lambda x: act(x - 2).sum()), lambda: setattr(act, "negative_slope", 0.5), 1


def _case_submodule_replaced():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    return (lambda x: model(x).sum()), lambda: model.__setitem__(1, nn.Tanh()), 1


def _case_rebound_parameter():
    lin = nn.Linear(3, 2)

    def change():
        lin.weight = nn.Parameter(aotjax.full((2, 3), 0.5))
    return (lambda x: lin(x).sum()), change, 0  # same shape and dtype: the new tensor is read, no new trace


def _case_load_state_dict_assign():
    lin = nn.Linear(3, 2)
    state = {"weight": aotjax.full((2, 3), -1.0), "bias": aotjax.zeros(2)}
    return (lambda x: lin(x).sum()), lambda: lin.load_state_dict(state, assign=True), 0


def _case_rebound_global_tensor():
    return (lambda x: (x * WEIGHT).sum()), lambda: _set_global("WEIGHT", aotjax.tensor([-1.0, 0.0, 4.0])), 0


CASES = {name[len("_case_"):]: fn for name, fn in globals().items() if name.startswith("_case_")}


@pytest.fixture(autouse=True)
def _restore_globals():
    saved = {k: globals()[k] for k in ("SCALE", "OFFSET", "ACT", "MODE", "WEIGHT")}
    kind, user_scale = Holder.KIND, USER_CONFIG.SCALE
    yield
    globals().update(saved)
    Holder.KIND, USER_CONFIG.SCALE = kind, user_scale


def _value(f, x):
    return float(f(x))


def _gradient(f, x):
    return aotjax.grad(f)(x).numpy()


# transform -> (compiled from f, reference on eager f, the object that counts traces)
TRANSFORMS = {
    "jit": (aotjax.jit, _value, lambda c: c),
    "aot": (aotjax.aot, _value, lambda c: c),
    "compile": (aotjax.compile, _value, lambda c: c),
    "grad(aot)": (lambda f: _Counted(aotjax.grad(a := aotjax.aot(f)), a), _gradient, lambda c: c.counter),
    "aot(grad)": (lambda f: aotjax.aot(aotjax.grad(f)), _gradient, lambda c: c),
    "jit(checkpoint)": (lambda f: aotjax.jit(lambda x: aotjax.checkpoint(f)(x)), _value, lambda c: c),
    "jit(scan body)": (lambda f: aotjax.jit(lambda x: aotjax.scan(lambda c, _: (c + f(x), None), aotjax.zeros(()),
                                                                   length=2)[0]),
                       lambda f, x: 2 * float(f(x)), lambda c: c),
}


class _Counted:
    def __init__(self, fn, counter):
        self.fn, self.counter = fn, counter

    def __call__(self, *args):
        return self.fn(*args)


def _check(transform: str, case: str):
    f, change, extra = CASES[case]()
    make, reference, counter = TRANSFORMS[transform]
    compiled = make(f)
    x = aotjax.tensor([0.5, -1.5, 2.0])

    def result(fn):
        out = fn(x)
        return out.numpy() if out.ndim else float(out)

    expect = lambda: reference(f, x) if transform not in ("jit", "aot", "compile") else float(f(x))  # noqa: E731
    np.testing.assert_allclose(result(compiled), expect(), rtol=1e-5)
    np.testing.assert_allclose(result(compiled), expect(), rtol=1e-5)
    assert counter(compiled).trace_count == 1
    change()
    np.testing.assert_allclose(result(compiled), expect(), rtol=1e-5, err_msg=f"stale after the change ({case})")
    np.testing.assert_allclose(result(compiled), expect(), rtol=1e-5)
    assert counter(compiled).trace_count == 1 + extra, counter(compiled).cache_info()


@pytest.mark.parametrize("case", sorted(CASES))
def test_jit_is_never_stale(case):
    _check("jit", case)


@pytest.mark.parametrize("transform", [t for t in TRANSFORMS if t != "jit"])
@pytest.mark.parametrize("case", ["global", "closure", "object_attribute", "module_eval", "rebound_parameter"])
def test_every_transform_is_never_stale(transform, case):
    _check(transform, case)


@pytest.mark.slow
@pytest.mark.parametrize("transform", [t for t in TRANSFORMS if t != "jit"])
@pytest.mark.parametrize("case", sorted(set(CASES) - {"global", "closure", "object_attribute", "module_eval",
                                                       "rebound_parameter"}))
def test_every_transform_is_never_stale_in_every_case(transform, case):
    _check(transform, case)


@pytest.mark.parametrize("make", [aotjax.jit, aotjax.aot, aotjax.compile])
def test_a_compiled_module_sees_eval_and_keeps_both_programs(make):
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(1.0))
    compiled = make(model)
    x = aotjax.ones(2, 4)
    assert float(compiled(x).abs().sum()) == 0.0  # training: all dropped
    model.eval()
    np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)
    model.train()
    assert float(compiled(x).abs().sum()) == 0.0
    model.eval()
    compiled(x)
    counted = compiled._compiled_call if make is aotjax.compile else compiled
    assert counted.trace_count == 2  # one program per mode, both kept


def test_grad_mode_is_part_of_the_key():
    f = aotjax.jit(lambda x: x * 2 if aotjax.is_grad_enabled() else x * 3)
    x = aotjax.ones(2)
    assert float(f(x)[0]) == 2.0
    with aotjax.no_grad():
        assert float(f(x)[0]) == 3.0
        assert float(f(x)[0]) == 3.0
    assert float(f(x)[0]) == 2.0
    assert f.trace_count == 2


def test_a_program_first_called_under_no_grad_still_records_later():
    f = aotjax.jit(lambda x: (x * x).sum())
    x = aotjax.ones(3, requires_grad=True)
    with aotjax.no_grad():
        assert not f(x).requires_grad
    y = f(x)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 2, 2])


def test_a_rebound_parameter_of_another_shape_traces_again():
    lin = nn.Linear(3, 2)
    f = aotjax.jit(lambda x: lin(x))
    x = aotjax.ones(1, 3)
    f(x)
    lin.weight = nn.Parameter(aotjax.ones(4, 3))
    lin.bias = nn.Parameter(aotjax.zeros(4))
    np.testing.assert_allclose(f(x).numpy(), [[3, 3, 3, 3]])
    assert f.trace_count == 2


def test_a_rebound_parameter_trains_through_the_compiled_step():
    lin = nn.Linear(2, 1)

    @aotjax.jit
    def step(x):
        loss = lin(x).sum()
        loss.backward()
        with aotjax.no_grad():
            for p in lin.parameters():
                p -= 0.1 * p.grad
                p.grad = None
        return loss

    x = aotjax.ones(1, 2)
    step(x)
    new = nn.Parameter(aotjax.zeros(1, 2))
    lin.weight = new
    step(x)
    np.testing.assert_allclose(new.numpy(), [[-0.1, -0.1]], rtol=1e-6)  # the new parameter was updated in place
    assert step.trace_count == 1


def test_a_list_the_trace_appends_to_is_no_guard():
    traces = []

    def f(x):
        traces.append(1)
        return x + 1

    jf = aotjax.jit(f)
    for _ in range(3):
        jf(aotjax.ones(2))
    assert len(traces) == 1


def test_unrelated_module_attributes_do_not_retrace():
    model = nn.Linear(2, 2)
    f = aotjax.jit(lambda x: model(x))
    f(aotjax.ones(2))
    model.step_count = 5  # not read by the forward
    model.step_count = 6
    f(aotjax.ones(2))
    assert f.trace_count == 1


def test_cache_info_lists_programs_guards_and_reasons():
    global SCALE
    f = aotjax.jit(lambda x: x * SCALE)
    f(aotjax.ones(2))
    SCALE = 5.0
    f(aotjax.ones(2))
    info = f.cache_info()
    assert info.traces == 2 and len(info.programs) == 2
    assert any("SCALE == 2.0" in g for p in info.programs for g in p.guards)
    assert "SCALE changed from 2.0 to 5.0" in info.reasons[-1] and "test_guards.py" in info.reasons[-1]
    assert "SCALE" in str(info)
    f(aotjax.ones(3))
    assert "x is float32[3] now (was float32[2])" in f.cache_info().reasons[-1]


def test_a_guard_that_changes_every_call_warns_once_past_the_limit(monkeypatch):
    monkeypatch.setattr(aotjax.config, "recompile_limit", 3)
    state = Config()
    f = aotjax.jit(lambda x: x * state.scale)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(6):
            state.scale = 0.1 * (step + 1)
            np.testing.assert_allclose(f(aotjax.ones(1)).numpy(), [state.scale], rtol=1e-6)
    recompile = [w for w in caught if issubclass(w.category, RecompileWarning)]
    assert len(recompile) == 1
    message = str(recompile[0].message)
    assert "traced 4 times" in message and ".scale changed from" in message and "test_guards.py" in message


def test_the_limit_can_raise(monkeypatch):
    monkeypatch.setattr(aotjax.config, "recompile_limit", 1)
    monkeypatch.setattr(aotjax.config, "fail_on_recompile_limit_hit", True)
    f = aotjax.jit(lambda x: x + 1)
    f(aotjax.ones(1))
    with pytest.raises(RecompileLimitError, match="a new input signature|x is float32"):
        f(aotjax.ones(2))


def test_recompiles_are_logged(caplog):
    global SCALE
    f = aotjax.jit(lambda x: x * SCALE)
    f(aotjax.ones(2))
    SCALE = 4.0
    with caplog.at_level(logging.INFO, logger="aotjax.recompiles"):
        f(aotjax.ones(2))
    assert any("SCALE changed from 2.0 to 4.0" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("make", [aotjax.jit, aotjax.aot])
def test_a_loop_over_slices_of_one_base_traces_once(make):
    source = aotjax.arange(60.0).reshape(20, 3)  # word_language_model's get_batch: source[i:i+bptt]
    step = make(lambda batch: (batch * batch).sum(0))
    for i in range(0, 12, 4):
        batch = source[i:i + 5]
        np.testing.assert_allclose(step(batch).numpy(), (batch * batch).sum(0).numpy())
    assert step.trace_count == 1


def test_a_view_argument_written_in_place_writes_its_own_place_at_every_offset():
    base = aotjax.zeros(12)
    bump = aotjax.jit(lambda v: v.add_(1.0))
    for i in range(0, 12, 3):
        bump(base[i:i + 2])
    np.testing.assert_array_equal(base.numpy(), [1, 1, 0] * 4)
    assert bump.trace_count == 1


def test_a_returned_alias_of_a_view_argument_keeps_its_offset():
    base = aotjax.arange(10.0)
    tail = aotjax.jit(lambda v: v[1:])
    for i in range(3):
        out = tail(base[i:i + 4])
        assert out.storage_offset() == i + 1 and out._storage is base._storage
        np.testing.assert_array_equal(out.numpy(), base[i + 1:i + 4].numpy())
    assert tail.trace_count == 3  # the alias's layout depends on the offset: one program per offset


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_eager_selects_and_slices_at_many_positions_read_and_write_their_place(dim):
    x = aotjax.arange(60.0).reshape(3, 4, 5)
    ref = np.arange(60.0).reshape(3, 4, 5)
    for i in range(x.shape[dim]):
        index = (slice(None),) * dim + (i,)
        np.testing.assert_array_equal(x[index].numpy(), ref[index])
        x[index].add_(1.0)
        ref[index] += 1.0
        window = (slice(None),) * dim + (slice(i, i + 2),)
        np.testing.assert_array_equal(x[window].numpy(), ref[window])
        x[window].mul_(2.0)
        ref[window] *= 2.0
    np.testing.assert_array_equal(x.numpy(), ref)


def test_a_module_parametrized_after_the_first_call_is_seen():
    from aotjax.nn.utils import parametrizations

    lin = nn.Linear(3, 2)
    f = aotjax.jit(lambda x: lin(x).sum())
    x = aotjax.ones(1, 3)
    f(x)
    parametrizations.weight_norm(lin)  # the module's class is swapped, its weight computed from two new parameters
    with aotjax.no_grad():
        lin.parametrizations.weight.original0.mul_(2.0)
    np.testing.assert_allclose(float(f(x)), float(lin(x).sum()), rtol=1e-6)


def test_a_module_whose_class_is_swapped_with_the_same_parameters_traces_again():
    class Doubled(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    lin = nn.Linear(3, 2)
    f = aotjax.jit(lambda x: lin(x).sum())
    x = aotjax.ones(1, 3)
    f(x)
    lin.__class__ = Doubled  # the same parameters where they were: only the class tells the programs apart
    np.testing.assert_allclose(float(f(x)), float(lin(x).sum()), rtol=1e-6)
    assert f.trace_count == 2


def test_under_another_profiler_the_walk_guards_everything_reachable():
    import sys

    holder = Holder()
    f = aotjax.jit(lambda x: (x * holder.scale * SCALE).sum())
    x = aotjax.ones(2)
    previous = sys.getprofile()
    sys.setprofile(lambda *event: None)  # as cProfile does: the trace cannot record what ran
    try:
        f(x)
    finally:
        sys.setprofile(previous)
    holder.scale = 3.0
    assert float(f(x)) == float((x * holder.scale * SCALE).sum())
    _set_global("SCALE", 5.0)
    assert float(f(x)) == float((x * holder.scale * SCALE).sum())
    assert f.trace_count == 3
