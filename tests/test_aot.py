"""`aot`: AOTAutograd made of interpreters, tested by behaviour.

What the forward saves and the backward recomputes (checkpoint, the partitioners, the memory budget),
the documented signature of the two programs, eager semantics at the call boundary (plainly and under
`grad`), composition (`grad(aot(f))`, `aot(grad(f))`, `grad(grad(aot(f)))`), the guards, lazy
compilation, and the AOTAutograd names (`aot_function`, `aot_module`).
"""
from __future__ import annotations

import re
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax.partition import JointInfo, Partitioned, default_partition, min_cut_partition, split
from tests.helpers import assert_trees_close, check_aot_boundary_agrees, copy_tree
from tests.test_boundary_programs import PROGRAMS


# -- helpers ---------------------------------------------------------------------------------------------------
def _t(*shape, scale=0.1, offset=0.0, dtype=np.float32):
    """A small deterministic tensor with distinct entries."""
    n = int(np.prod(shape))
    return aotjax.tensor((np.arange(n, dtype=dtype).reshape(shape) + 1) * scale + offset)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _close(a, b, rtol=1e-5, atol=1e-6):
    assert_trees_close(a, b, rtol=rtol, atol=atol)


def _n_cotangents(lowered) -> int:
    return len(lowered.backward_inputs) - len(lowered.residuals)


def _recomputed(lowered) -> Counter:
    """Primitive names of the backward equations that read no cotangent, even indirectly: the
    forward computation the backward does again."""
    bwd = lowered.backward.jaxpr
    tainted = {id(v) for v in bwd.invars[len(bwd.invars) - _n_cotangents(lowered):]}
    names = Counter()
    for eqn in bwd.eqns:
        if any(id(a) in tainted for a in eqn.inputs):
            tainted.update(id(v) for v in eqn.outputs)
        else:
            names[eqn.primitive.name] += 1
    return names


def _saved_downstream_of(lowered, prim_name: str) -> int:
    """How many residuals the forward computes from the result of a `prim_name` equation."""
    fwd = lowered.forward.jaxpr
    derived = set()
    for eqn in fwd.eqns:
        if eqn.primitive.name == prim_name or any(id(a) in derived for a in eqn.inputs):
            derived.update(id(v) for v in eqn.outputs)
    residual_vars = fwd.outvars[len(fwd.outvars) - len(lowered.residuals):]
    return sum(id(v) in derived for v in residual_vars)


def _only_inputs_saved(lowered) -> bool:
    return all(r.why.startswith("argument ") for r in lowered.residuals)


def _total(out):
    """The sum of every tensor output (a scalar loss of any program)."""
    total = 0.0
    for leaf in jax.tree_util.tree_leaves(out):
        if isinstance(leaf, aotjax.Tensor):
            total = total + leaf.sum()
    return total


# -- 1. checkpoint inside aot --------------------------------------------------------------------------------
def _layers(a, w):
    a = a.sin()
    a = a @ w
    a = a.cos()
    a = a @ w
    return a.sigmoid()


def _layers_jnp(a, w):
    return jax.nn.sigmoid(jnp.cos(jnp.sin(a) @ w) @ w).sum()


def _plain_loss(x, w):
    return _layers(x, w).sum()


_checkpointed_layers = aotjax.checkpoint(_layers)


def _checkpointed_loss(x, w):
    return _checkpointed_layers(x, w).sum()


@pytest.fixture(scope="module")
def layer_args():
    return aotjax.tensor(_rand(3, 4, seed=1)), aotjax.tensor(_rand(4, 4, seed=2) * 0.5)


def test_without_checkpoint_forward_saves_matmul_derived_values(layer_args):
    lowered = aotjax.aot(_plain_loss).lower(*layer_args)
    assert not _only_inputs_saved(lowered), [r.why for r in lowered.residuals]
    assert _saved_downstream_of(lowered, "matmul") >= 2  # e.g. sin/cos of the first matmul, sigmoid' of the second
    recomputed = _recomputed(lowered)
    for prim in ("sin", "cos", "matmul", "sigmoid"):
        assert recomputed[prim] == 0, recomputed


def test_checkpoint_makes_backward_recompute_and_forward_save_inputs(layer_args):
    lowered = aotjax.aot(_checkpointed_loss).lower(*layer_args)
    assert [r.why for r in lowered.residuals] == ["argument x", "argument w"]
    assert lowered.residual_bytes == sum(np.asarray(a).nbytes for a in layer_args)
    recomputed = _recomputed(lowered)
    assert recomputed["sin"] >= 1 and recomputed["cos"] >= 1, recomputed
    assert recomputed["matmul"] >= 1, recomputed  # the first matmul (at least) is computed again
    plain = aotjax.aot(_plain_loss).lower(*layer_args)
    assert lowered.residual_bytes < plain.residual_bytes


def test_checkpoint_text_has_optimization_barrier(layer_args):
    assert "optimization_barrier" in aotjax.aot(_checkpointed_loss).lower(*layer_args).as_text()


@pytest.mark.slow
def test_checkpoint_inside_aot_gradients(layer_args):
    want = jax.grad(_layers_jnp, argnums=(0, 1))(*(jnp.asarray(np.asarray(a)) for a in layer_args))
    for loss in (_plain_loss, _checkpointed_loss):
        got = aotjax.grad(aotjax.aot(loss), argnums=(0, 1))(*layer_args)
        _close(got, aotjax.grad(loss, argnums=(0, 1))(*layer_args))
        _close([np.asarray(g) for g in got], [np.asarray(g) for g in want])


# -- 2. partitioners -------------------------------------------------------------------------------------------
def _coscos(x):
    return x.cos().cos().cos().sum()


def _cube(x):
    return (x * x * x).sum()


def _relu_matmul(x, w):
    return aotjax.relu(x @ w).sum()


def _mlp(x, w1, w2):
    return ((x @ w1).tanh() @ w2).sin().sum()


_JNP = {
    _coscos: lambda x: jnp.cos(jnp.cos(jnp.cos(x))).sum(),
    _cube: lambda x: (x * x * x).sum(),
    _relu_matmul: lambda x, w: jax.nn.relu(x @ w).sum(),
    _mlp: lambda x, w1, w2: jnp.sin(jnp.tanh(x @ w1) @ w2).sum(),
}


def _args_of(fn):
    x = aotjax.tensor(_rand(3, 4, seed=3))
    if fn is _relu_matmul:
        return x, aotjax.tensor(_rand(4, 5, seed=4))
    if fn is _mlp:
        return x, aotjax.tensor(_rand(4, 5, seed=4)), aotjax.tensor(_rand(5, 2, seed=5))
    return (x,)


@pytest.mark.parametrize("fn", [_coscos, _cube], ids=["cos_cos_cos", "x_x_x"])
def test_min_cut_saves_only_the_input_of_elementwise_chains(fn):
    args = _args_of(fn)
    cut = aotjax.aot(fn, partition=min_cut_partition()).lower(*args)
    assert [r.why for r in cut.residuals] == ["argument x"]
    default = aotjax.aot(fn, partition=default_partition).lower(*args)
    assert default.residual_bytes > cut.residual_bytes


def test_min_cut_saves_relu_mask_not_activation():
    args = _args_of(_relu_matmul)
    cut = aotjax.aot(_relu_matmul, partition=min_cut_partition()).lower(*args)
    saved = [r for r in cut.residuals if not r.why.startswith("argument ")]
    assert any(r.aval.dtype == np.dtype(bool) for r in saved), [(r.why, r.aval) for r in cut.residuals]
    assert not any(np.issubdtype(r.aval.dtype, np.floating) for r in saved), [(r.why, r.aval) for r in saved]
    assert _recomputed(cut)["matmul"] == 0, _recomputed(cut)
    default = aotjax.aot(_relu_matmul, partition=default_partition).lower(*args)
    assert default.residual_bytes >= cut.residual_bytes


def test_memory_budget_trades_bytes_for_recompute():
    args = _args_of(_mlp)
    lowered = {b: aotjax.aot(_mlp, partition=min_cut_partition(b)).lower(*args) for b in (1, 0.75, 0.5, 0.25, 0)}
    saved = [lowered[b].residual_bytes for b in (1, 0.75, 0.5, 0.25, 0)]
    assert saved == sorted(saved, reverse=True), saved
    assert _only_inputs_saved(lowered[0]), [r.why for r in lowered[0].residuals]
    assert saved[-1] == sum(np.asarray(a).nbytes for a in args)
    assert saved[0] > saved[-1]


def test_memory_budget_out_of_range():
    with pytest.raises(ValueError, match="memory_budget"):
        min_cut_partition(1.5)


def _save_inputs_only(calls):
    def partition(joint: JointInfo) -> Partitioned:
        calls.append(joint)
        return split(joint, list(joint.primals))

    return partition


_PARTITIONERS = {
    "default": default_partition,
    "min_cut": min_cut_partition(),
    "min_cut_0.5": min_cut_partition(0.5),
    "min_cut_0": min_cut_partition(0.0),
    "custom_inputs_only": _save_inputs_only([]),
}


_PARTITION_CASES = [_coscos, _cube, pytest.param(_relu_matmul, marks=pytest.mark.slow),
                    pytest.param(_mlp, marks=pytest.mark.slow)]


@pytest.mark.parametrize("fn", _PARTITION_CASES, ids=["coscos", "cube", "relu_matmul", "mlp"])
def test_gradients_identical_for_every_partitioner(fn):
    args = _args_of(fn)
    argnums = tuple(range(len(args)))
    want = aotjax.grad(fn, argnums=argnums)(*args)
    want_jax = jax.grad(_JNP[fn], argnums=argnums)(*(jnp.asarray(np.asarray(a)) for a in args))
    _close([np.asarray(g) for g in want], [np.asarray(g) for g in want_jax])
    for partition in _PARTITIONERS.values():
        got = aotjax.grad(aotjax.aot(fn, partition=partition), argnums=argnums)(*args)
        _close(got, want, rtol=1e-6)


def test_custom_partitioner_is_used():
    calls = []
    fn = aotjax.aot(_mlp, partition=_save_inputs_only(calls))
    args = _args_of(_mlp)
    lowered = fn.lower(*args)
    assert _only_inputs_saved(lowered) and len(lowered.residuals) == 3
    assert len(calls) == 1 and isinstance(calls[0], JointInfo)
    assert _recomputed(lowered)["tanh"] >= 1
    _close(aotjax.grad(fn, argnums=(0, 1, 2))(*args), aotjax.grad(_mlp, argnums=(0, 1, 2))(*args))


# -- 3. the boundary programs -----------------------------------------------------------------------------------
def _float_inputs(make) -> bool:
    args, _ = make()
    return all(np.issubdtype(np.asarray(a).dtype, np.floating) for a in args)


@pytest.mark.parametrize("name,f,make", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_boundary_program_plain_call(name, f, make):
    compiled = check_aot_boundary_agrees(f, make)
    assert compiled.trace_count == 1  # the cached call did not trace again


_FLOAT_PROGRAMS = [p for p in PROGRAMS if _float_inputs(p[2])]


@pytest.mark.parametrize("name,f,make", _FLOAT_PROGRAMS, ids=[p[0] for p in _FLOAT_PROGRAMS])
def test_boundary_program_gradients(name, f, make):
    eager_args, _ = make()
    f(*eager_args)
    argnums = tuple(range(len(eager_args)))
    loss = lambda *a: _total(f(*a))  # noqa: E731

    plain_args, _ = make()
    want = aotjax.grad(loss, argnums=argnums)(*plain_args)
    compiled = aotjax.aot(f)
    aot_args, _ = make()
    got = aotjax.grad(lambda *a: _total(compiled(*a)), argnums=argnums)(*aot_args)
    _close(got, want)
    _close(aot_args, eager_args)  # the side effects happened, as in eager

    whole_args, _ = make()
    _close(aotjax.aot(aotjax.grad(loss, argnums=argnums))(*whole_args), want)
    _close(whole_args, eager_args)


# -- 4. double backward ---------------------------------------------------------------------------------------------
_ELEMENTWISE = [
    ("sin_exp", lambda x: x.sin() * x.exp(), lambda x: jnp.sin(x) * jnp.exp(x)),
    ("tanh_cube", lambda x: (x * x * x).tanh(), lambda x: jnp.tanh(x * x * x)),
    ("sigmoid_ratio", lambda x: x.sigmoid() / (1 + x * x), lambda x: jax.nn.sigmoid(x) / (1 + x * x)),
    ("inplace", lambda x: x.clone().mul_(x).cos_() + x, lambda x: jnp.cos(x * x) + x),
]


@pytest.mark.parametrize("name,f,jf", _ELEMENTWISE, ids=[e[0] for e in _ELEMENTWISE])
def test_grad_grad_aot(name, f, jf):
    x = aotjax.tensor(np.float32(0.7))
    compiled = aotjax.aot(f)
    got = aotjax.grad(aotjax.grad(compiled))(x)
    _close(got, aotjax.grad(aotjax.grad(f))(x))
    np.testing.assert_allclose(np.asarray(got), jax.grad(jax.grad(jf))(jnp.float32(0.7)), rtol=1e-5)
    assert compiled.trace_count == 1


# -- 5. the signature ------------------------------------------------------------------------------------------------
def _step(carry, x):
    h = (carry["a"] @ x["weights"] + x["biases"]).tanh()
    return {"a": h, "b": carry["b"] * h.sum()}, h.sum()


def _step_args(k=1.0):
    # NOTE: dicts built in non-sorted key order: the signature follows tree_flatten (sorted keys)
    carry = {"b": _t(3, scale=0.1 * k), "a": _t(2, 3, scale=0.05 * k)}
    x = {"weights": _t(3, 3, scale=0.03 * k), "biases": _t(3, scale=-0.1 * k)}
    return carry, x


_STEP_PRIMALS = ["primal[carry['a']]", "primal[carry['b']]", "primal[x['biases']]", "primal[x['weights']]"]


def test_signature_names_and_order():
    compiled = aotjax.aot(_step)
    lowered = compiled.lower(*_step_args())
    assert lowered.forward_inputs == _STEP_PRIMALS
    assert lowered.backward_outputs == [f"cotangent[{p[len('primal['):-1]}]" for p in _STEP_PRIMALS]
    n_res = len(lowered.residuals)
    assert lowered.forward_outputs[:3] == ["out[0]['a']", "out[0]['b']", "out[1]"]
    assert lowered.forward_outputs[3:] == [r.descriptor for r, i in zip(lowered.residuals, lowered.saved_inputs)
                                           if i is None]  # primal inputs go to the backward as they are
    assert any(i is not None for i in lowered.saved_inputs)
    assert lowered.backward_inputs[:n_res] == [r.descriptor for r in lowered.residuals]
    assert lowered.backward_inputs[n_res:] == ["cotangent[out[0]['a']]", "cotangent[out[0]['b']]", "cotangent[out[1]]"]
    assert len(lowered.forward.in_avals) == len(lowered.forward_inputs)
    assert len(lowered.forward.out_avals) == len(lowered.forward_outputs)
    assert len(lowered.backward.in_avals) == len(lowered.backward_inputs)
    assert len(lowered.backward.out_avals) == len(lowered.backward_outputs)

    again = compiled.lower(*_step_args())
    other = compiled.lower(*_step_args(k=3.0))
    for lo in (again, other):
        assert (lo.forward_inputs, lo.forward_outputs, lo.backward_inputs, lo.backward_outputs) == (
            lowered.forward_inputs, lowered.forward_outputs, lowered.backward_inputs, lowered.backward_outputs)
        assert str(lo.forward) == str(lowered.forward) and str(lo.backward) == str(lowered.backward)


def test_signature_programs_compute_the_gradient_in_that_order():
    carry, x = _step_args()
    lowered = aotjax.aot(_step).lower(carry, x)
    flat = jax.tree_util.tree_leaves((carry, x))  # flatten order: carry['a'], carry['b'], x['biases'], x['weights']
    outs = aotjax.eval_jaxpr(lowered.forward, *flat)
    user_outs, residuals = outs[:lowered.num_forward_outputs], lowered.residuals_from(flat, outs)
    _close(user_outs, jax.tree_util.tree_leaves(_step(carry, x)))
    in_cts = aotjax.eval_jaxpr(lowered.backward, *residuals, *[aotjax.ones_like(o) for o in user_outs])
    want = aotjax.grad(lambda c, xs: _total(_step(c, xs)), argnums=(0, 1))(carry, x)
    _close(list(in_cts), jax.tree_util.tree_leaves(want))


def test_signature_stable_across_calls_with_new_values():
    compiled = aotjax.aot(_step)
    loss = lambda c, xs: _total(compiled(c, xs))  # noqa: E731
    for k in (1.0, 2.0, -0.5):
        args = _step_args(k)
        got = aotjax.grad(loss, argnums=(0, 1))(*args)
        _close(got, aotjax.grad(lambda c, xs: _total(_step(c, xs)), argnums=(0, 1))(*args))
    assert compiled.trace_count == 1


def _four_kinds(a, b):
    a.mul_(2)  # an updated input
    c = b.sin()  # an intermediate base, returned as a view
    return (a * b).tanh().sum(), c.view(-1)


def test_forward_outputs_in_documented_order():
    lowered = aotjax.aot(_four_kinds).lower(_t(2, 3), _t(2, 3, offset=0.3))
    kinds = []
    for name in lowered.forward_outputs:
        kind = next(k for k in ("out", "updated", "base", "residual") if name.startswith(k))
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    assert kinds == ["out", "updated", "base", "residual"], lowered.forward_outputs
    assert lowered.forward_outputs[1] == "updated[a]"


def test_four_kinds_behave_like_eager():
    def make():
        return (_t(2, 3), _t(2, 3, offset=0.3)), []

    check_aot_boundary_agrees(_four_kinds, make, rtol=1e-6, atol=1e-6)
    eager_args, _ = make()
    _four_kinds(*eager_args)
    compiled = aotjax.aot(_four_kinds)
    want = aotjax.grad(lambda a, b: _total(_four_kinds(a, b)), argnums=(0, 1))(*make()[0])
    args, _ = make()
    _close(aotjax.grad(lambda a, b: _total(compiled(a, b)), argnums=(0, 1))(*args), want)
    _close(args, eager_args)


# -- 5b. the joint: linearize's forward, then the transposed linear program, the cut recorded ------------------------
def test_joint_cut_is_linearize_forward():
    lowered = aotjax.aot(_mlp).lower(*_args_of(_mlp))
    joint = lowered._vjp.joint
    forward, backward = joint.jaxpr.eqns[:joint.num_forward_eqns], joint.jaxpr.eqns[joint.num_forward_eqns:]
    cotangents = {id(v) for v in joint.cotangents}
    assert forward and backward
    assert not any(id(a) in cotangents for e in forward for a in e.inputs)  # the forward reads no cotangent
    assert [e.primitive.name for e in forward] == [e.primitive.name for e in lowered.forward.eqns]
    assert lowered.backward.eqns[-1].primitive.name == backward[-1].primitive.name


def test_joint_cut_puts_checkpoint_recomputation_in_backward(layer_args):
    joint = aotjax.aot(_checkpointed_loss).lower(*layer_args)._vjp.joint
    names = [e.primitive.name for e in joint.jaxpr.eqns]
    barrier = names.index("optimization_barrier")
    assert barrier >= joint.num_forward_eqns  # the recomputation reads no cotangent, yet is the backward's
    assert "sin" in names[barrier:] and "matmul" in names[barrier:]


# -- 5c. constants of the program: never residuals -------------------------------------------------------------------
_SCALE = aotjax.tensor([1.0, 2.0, 3.0])
_TOKEN_IDS = aotjax.tensor([2, 0, 2, 1])
_embed = aotjax.checkpoint(lambda w: (w[_TOKEN_IDS] * 3).tanh())


def _index_built_inside(a):
    return (a[aotjax.tensor([0, 2])] ** 2).sum()


def _captured_tensor(a):
    return (a * _SCALE).sin().sum()


def _checkpoint_closing_over_ids(w):
    return _embed(w).sum()


def test_backward_reading_a_constant_of_the_program():
    fn, make = _index_built_inside, lambda: aotjax.tensor([1.0, 2.0, 3.0])
    want = aotjax.grad(fn)(make())
    _close(aotjax.grad(aotjax.aot(fn))(make()), want)
    _close(aotjax.grad(aotjax.aot(fn, partition=min_cut_partition()))(make()), want)
    _close(aotjax.aot(aotjax.grad(fn))(make()), want)
    lowered = aotjax.aot(fn).lower(make())
    assert [d.split(" at ")[0] for d in lowered.backward_inputs] == ["residual[0] mul", "cotangent[out]"]
    assert all(np.issubdtype(r.aval.dtype, np.floating) for r in lowered.residuals)  # no index saved
    constants = {id(v) for v in lowered.joint.jaxpr.constvars}
    assert any(id(a) in constants for e in lowered.backward.eqns for a in e.inputs)  # the backward has them


_CAPTURED_CASES = [
    (_captured_tensor, lambda: aotjax.tensor([1.0, 2.0, 3.0]), ["residual[0] primal[captured[_SCALE]]",
                                                                 "residual[1] cos"]),
    (_checkpoint_closing_over_ids, lambda: _t(3, 2), ["residual[0] primal[w]", "residual[1] primal[captured[0]]"]),
]


@pytest.mark.parametrize("fn,make,residuals", _CAPTURED_CASES, ids=["captured", "checkpoint_ids"])
def test_backward_reading_a_captured_tensor_gets_it_as_an_input(fn, make, residuals):
    """A captured tensor is an implicit input (live state), not differentiated: the backward reads it as the
    primal input it is, never a saved copy."""
    want = aotjax.grad(fn)(make())
    _close(aotjax.grad(aotjax.aot(fn))(make()), want)
    _close(aotjax.grad(aotjax.aot(fn, partition=min_cut_partition()))(make()), want)
    _close(aotjax.aot(aotjax.grad(fn))(make()), want)
    lowered = aotjax.aot(fn).lower(make())
    assert [d.split(" at ")[0] for d in lowered.backward_inputs] == residuals + ["cotangent[out]"]
    assert all(r.why.startswith("argument") or np.issubdtype(r.aval.dtype, np.floating)
               for r in lowered.residuals)  # an index is passed as the input it is, never saved


def test_partitioner_saving_a_constant_gets_none():
    def save_everything(joint: JointInfo) -> Partitioned:
        return split(joint, [*joint.jaxpr.jaxpr.constvars, *joint.primals])

    lowered = aotjax.aot(_index_built_inside, partition=save_everything).lower(aotjax.tensor([1.0, 2.0, 3.0]))
    assert [r.descriptor for r in lowered.residuals] == ["residual[0] primal[a]"]


def test_partitioner_saving_a_backward_value_is_an_error():
    def save_a_cotangent(joint: JointInfo) -> Partitioned:
        return split(joint, list(joint.cotangents))

    with pytest.raises(ValueError, match="partition: the partitioner chose to save"):
        aotjax.aot(_coscos, partition=save_a_cotangent).lower(_t(3))


# -- 5d. descriptors -------------------------------------------------------------------------------------------------
def test_descriptors_are_structured_and_print_as_documented():
    from aotjax.transforms.aot import Descriptor, Role

    w = Descriptor(Role.PRIMAL, "params['w']")
    out = Descriptor(Role.OUTPUT, "out[0]")
    assert (str(w), str(w.cotangent()), str(out), str(out.cotangent())) == (
        "primal[params['w']]", "cotangent[params['w']]", "out[0]", "cotangent[out[0]]")
    assert str(Descriptor(Role.UPDATED, "a")) == "updated[a]" and str(Descriptor(Role.BASE, index=2)) == "base[2]"
    assert str(Descriptor(Role.RESIDUAL, index=3, of=w)) == "residual[3] primal[params['w']]"
    assert str(Descriptor(Role.RESIDUAL, index=1, primitive="sin")) == "residual[1] sin"
    lowered = aotjax.aot(_four_kinds).lower(_t(2, 3), _t(2, 3, offset=0.3))
    assert lowered.backward_outputs == ["cotangent[a]", "cotangent[b]"]
    assert "cotangent[updated[a]]" in lowered.backward_inputs


# -- 5e. the table from user outputs to forward outputs ---------------------------------------------------------------
def _returned_twice(a, w):
    a = a @ w
    return a, a


def _only_views(a, w):
    b = a @ w
    return b.t(), b.t()[1]


def _every_kind(a, w):
    b = a @ w
    a.mul_(2)
    return b, b.t(), b.t()[1], a, a[0], 3, a


_OUTPUT_TABLES = {
    _returned_twice: ["out[0] = forward output 0 (same value as out[1])",
                      "out[1] = forward output 0 (same value as out[0])"],
    _only_views: ["out[0] = view of base[0] (forward output 0): permute(perm=(1, 0))",
                  "out[1] = view of base[0] (forward output 0): permute(perm=(1, 0)) -> select(dim=0, index=1)"],
    _every_kind: ["out[0] = forward output 0",
                  "out[1] = view of out[0] (forward output 0): permute(perm=(1, 0))",
                  "out[2] = view of out[0] (forward output 0): permute(perm=(1, 0)) -> select(dim=0, index=1)",
                  "out[3] = input a (same value as out[6]), written in place (new value: forward output 1)",
                  "out[4] = view of input a: select(dim=0, index=0); a is written in place (new value: forward "
                  "output 1)",
                  "out[5] = constant 3 (no program output)",
                  "out[6] = input a (same value as out[3]), written in place (new value: forward output 1)"],
}


def _replay(row, forward_outs: list, inputs: dict):
    """A user output rebuilt from the forward program's outputs as its row of the table says."""
    from aotjax.runtime.boundary import OutKind

    if row.kind is OutKind.CONST:
        return int(row.source)
    value = forward_outs[row.forward_output] if row.forward_output is not None else inputs[row.source]
    for step in row.chain:
        value = step.prim.bind(value, **dict(step.params))
    return value


@pytest.mark.parametrize("fn", list(_OUTPUT_TABLES), ids=lambda fn: fn.__name__)
def test_every_user_output_has_a_row_in_the_output_table(fn):
    lowered = aotjax.aot(fn).lower(_t(2, 2), _t(2, 2, offset=1.0))
    rows = [str(row) for row in lowered.user_outputs]
    assert rows == _OUTPUT_TABLES[fn]
    assert f"outputs of {fn.__name__}:\n" + "\n".join(f"  {r}" for r in rows) in str(lowered)
    a, w = _t(2, 2), _t(2, 2, offset=1.0)
    forward_outs = aotjax.eval_jaxpr(lowered.forward, a, w)
    got = [_replay(row, forward_outs, {"a": a, "w": w}) for row in lowered.user_outputs]
    eager_a = _t(2, 2)
    _close(got, list(fn(eager_a, _t(2, 2, offset=1.0))))


def test_num_forward_outputs_counts_the_outputs_before_the_residuals():
    lowered = aotjax.aot(_every_kind).lower(_t(2, 2), _t(2, 2, offset=1.0))
    assert lowered.num_forward_outputs == 2
    assert lowered.forward_outputs[:2] == ["out[0]", "updated[a]"]
    assert all(d.startswith("residual") for d in lowered.forward_outputs[2:])
    lowered = aotjax.aot(_four_kinds).lower(_t(2, 3), _t(2, 3, offset=0.3))
    assert lowered.num_forward_outputs == 3  # out[0], updated[a], base[0]
    assert lowered.num_forward_outputs == len(lowered.forward_outputs) - sum(i is None for i in lowered.saved_inputs)


def test_lowered_repr_and_pretty_display():
    lowered = aotjax.aot(_returned_twice).lower(_t(2, 2), _t(2, 2))
    assert repr(lowered) == ("AotLowered(aot(_returned_twice) (f32[2,2], f32[2,2]) -> 2 outputs; forward 1 equation, "
                             "1 output + 0 residuals; backward 4 equations; 2 residuals, 32 bytes)")
    printed = []

    class _Printer:  # what IPython hands `_repr_pretty_`
        def text(self, s):
            printed.append(s)

    lowered._repr_pretty_(_Printer(), False)
    assert printed == [str(lowered)]


# -- 6. guards, no retrace, lazy compilers ---------------------------------------------------------------------
def _prod_loss(a, b):
    return (a * b).sin().sum()


def test_grad_of_aot_traces_once():
    compiled = aotjax.aot(_prod_loss)
    g = aotjax.grad(compiled, argnums=(0, 1))
    first = g(_t(2, 3), _t(2, 3, offset=1.0))
    second = g(_t(2, 3, scale=0.2), _t(2, 3, offset=2.0))
    assert compiled.trace_count == 1
    _close(first, aotjax.grad(_prod_loss, argnums=(0, 1))(_t(2, 3), _t(2, 3, offset=1.0)))
    _close(second, aotjax.grad(_prod_loss, argnums=(0, 1))(_t(2, 3, scale=0.2), _t(2, 3, offset=2.0)))


@pytest.mark.slow
def test_new_shape_dtype_or_aliasing_traces_again():
    compiled = aotjax.aot(_prod_loss)
    g = aotjax.grad(compiled, argnums=(0, 1))
    g(_t(2, 3), _t(2, 3))
    assert compiled.trace_count == 1
    g(_t(3, 3), _t(3, 3))  # shape
    assert compiled.trace_count == 2
    g(_t(2, 3, dtype=np.float16), _t(2, 3, dtype=np.float16))  # dtype
    assert compiled.trace_count == 3
    x = _t(2, 3)
    got = g(x, x)  # one tensor passed twice
    assert compiled.trace_count == 4
    _close(got, aotjax.grad(_prod_loss, argnums=(0, 1))(x, x))
    base = _t(2, 3)
    got = g(base[0], base[1])  # two views of one storage
    assert compiled.trace_count == 5
    _close(got, aotjax.grad(_prod_loss, argnums=(0, 1))(base[0], base[1]))
    g(_t(2, 3), _t(2, 3))
    assert compiled.trace_count == 5  # every pattern above is cached


def test_plain_calls_guard_on_aliasing():
    def f(a, b):
        a.add_(1)
        return a + b

    compiled = aotjax.aot(f)
    x, y = _t(2, 3), _t(2, 3)
    _close(compiled(x, y), _t(2, 3) + 1 + _t(2, 3))
    shared = _t(2, 3)
    got = compiled(shared, shared)  # the write is seen through the second argument, as in eager
    want_arg = _t(2, 3)
    _close(got, f(want_arg, want_arg))
    _close(shared, want_arg)
    assert compiled.trace_count == 2


def _counting(calls, name):
    def compiler(jaxpr, avals):
        calls.append(name)
        return aotjax.xla_compiler(jaxpr, avals)

    return compiler


def test_backward_compiler_is_called_lazily():
    calls = []
    compiled = aotjax.aot(_prod_loss, bw_compiler=_counting(calls, "backward"))
    args = _t(2, 3), _t(2, 3, offset=1.0)
    compiled(*args)
    compiled(*args)
    assert calls == []
    aotjax.grad(compiled)(*args)
    assert calls == ["backward"]
    aotjax.grad(compiled)(*args)
    aotjax.grad(compiled)(_t(2, 3, scale=0.3), _t(2, 3))
    assert calls == ["backward"]


def test_forward_compiler_counts():
    calls = []
    compiled = aotjax.aot(_prod_loss, fw_compiler=_counting(calls, "fw"), bw_compiler=_counting(calls, "bw"))
    args = _t(2, 3), _t(2, 3, offset=1.0)
    _close(compiled(*args), _prod_loss(*args))
    assert calls == ["fw"]  # the inference program, compiled by the user's forward compiler
    _close(aotjax.grad(compiled)(*args), aotjax.grad(_prod_loss)(*args))
    assert sorted(calls) == ["bw", "fw", "fw"]


def test_printing_compiler(capsys):
    def compiler(jaxpr, avals):
        print(jaxpr)
        return aotjax.to_jax(jaxpr)

    compiled = aotjax.aot(_prod_loss, fw_compiler=compiler)
    args = _t(2, 3), _t(2, 3, offset=1.0)
    _close(compiled(*args), _prod_loss(*args))
    _close(aotjax.grad(compiled, argnums=(0, 1))(*args), aotjax.grad(_prod_loss, argnums=(0, 1))(*args))
    printed = capsys.readouterr().out
    assert printed.count("lambda") == 3  # inference, forward, backward
    assert "sin" in printed and "cos" in printed


# -- 6b. the compilers' contract --------------------------------------------------------------------------------------
def _two_outputs(a, b):
    return (a * b).sin().sum(), a.cos()


def _xla_then(fix_outputs):
    def compile_(jaxpr, avals):
        fn = aotjax.xla_compiler(jaxpr, avals)
        return lambda *args: fix_outputs(list(fn(*args)))
    return compile_


def returns_none(jaxpr, avals):
    return None


def returns_a_number(jaxpr, avals):
    return 42


def raises_while_compiling(jaxpr, avals):
    raise ValueError("no backend for this program")


def returns_one_array(jaxpr, avals):
    return _xla_then(lambda outs: outs[0])(jaxpr, avals)


def drops_an_output(jaxpr, avals):
    return _xla_then(lambda outs: outs[:-1])(jaxpr, avals)


def returns_wrong_shapes(jaxpr, avals):
    return _xla_then(lambda outs: [jnp.zeros((5,), o.dtype) for o in outs])(jaxpr, avals)


def returns_wrong_dtypes(jaxpr, avals):
    return _xla_then(lambda outs: [o.astype(jnp.int32) for o in outs])(jaxpr, avals)


def returns_a_raising_callable(jaxpr, avals):
    def run(*args):
        raise RuntimeError("device lost")
    return run


# (compiler, what the error says after naming the compiler and the program); `{n}` is the program's number of
# outputs, `{first}` its first output's descriptor, `{aval}` that output's type.
_BAD_COMPILERS = [
    (returns_none, r"returned None, which is not callable"),
    (returns_a_number, r"returned 42 \(an int\), which is not callable"),
    (raises_while_compiling, r"raised: ValueError: no backend for this program"),
    (returns_one_array, r"returned a callable that returned .*; expected a list or tuple of {n} arrays"),
    (drops_an_output, r"returned a callable that returned {n_minus_1} outputs?; expected {n}: {aval} {first}"),
    (returns_wrong_shapes, r"output 0 \({first}\): expected {aval}, got {dtype}\[5\]"),
    (returns_wrong_dtypes, r"output 0 \({first}\): expected {aval}, got i32"),
    (returns_a_raising_callable, r"returned a callable that raised: RuntimeError: device lost"),
]


def _compile_with(program: str, compiler):
    """`_two_outputs` aot-compiled with `compiler` for `program` (XLA's for the others), and how to run it."""
    args = _t(3), _t(3, offset=0.5)
    if program == "inference":
        compiled = aotjax.aot_function(_two_outputs, inference_compiler=compiler)
        return compiled, lambda: compiled(*args)
    options = {"fw_compiler": compiler, "bw_compiler": aotjax.xla_compiler} if program == "forward" else {
        "bw_compiler": compiler}
    compiled = aotjax.aot(_two_outputs, **options)
    return compiled, lambda: aotjax.grad(lambda a, b: _total(compiled(a, b)), argnums=(0, 1))(*args)


def _program_outputs(program: str) -> tuple[list[str], list]:
    lowered = aotjax.aot(_two_outputs).lower(_t(3), _t(3))
    if program == "inference":
        return ["out[0]", "out[1]"], list(lowered.jaxpr.out_avals)
    if program == "forward":
        return lowered.forward_outputs, list(lowered.forward.out_avals)
    return lowered.backward_outputs, list(lowered.backward.out_avals)


@pytest.mark.parametrize("program,option", [("inference", "inference_compiler"), ("forward", "fw_compiler"),
                                            ("backward", "bw_compiler")])
@pytest.mark.parametrize("compiler,says", _BAD_COMPILERS, ids=[c.__name__ for c, _ in _BAD_COMPILERS])
def test_a_compiler_breaking_its_contract_is_named(program, option, compiler, says):
    from aotjax.core.errors import CompilerError

    _, run = _compile_with(program, compiler)
    names, avals = _program_outputs(program)
    says = says.format(n=len(avals), n_minus_1=len(avals) - 1, first=re.escape(names[0]),
                       aval=re.escape(avals[0].str_short()), dtype=re.escape(avals[0].str_short().split("[")[0]))
    with pytest.raises(CompilerError) as info:
        run()
    message = str(info.value)
    assert message.startswith(f"{option} `{compiler.__name__}`, compiling the {program} program of `_two_outputs` "
                              f"(at test_aot.py:")  # the compiler, the program, the user's line
    assert re.search(says, message), message
    if compiler in (raises_while_compiling, returns_a_raising_callable):
        assert type(info.value.__cause__) in (ValueError, RuntimeError)  # the compiler's own error, chained


def test_a_user_compiler_is_checked_on_every_call_and_xla_is_trusted():
    def shrinks_on_second_call(jaxpr, avals):
        fn, calls = aotjax.xla_compiler(jaxpr, avals), []

        def run(*args):
            calls.append(1)
            outs = list(fn(*args))
            return outs if len(calls) == 1 else outs[:0]
        return run

    compiled = aotjax.aot(_prod_loss, fw_compiler=shrinks_on_second_call)
    args = _t(2, 3), _t(2, 3, offset=1.0)
    _close(compiled(*args), _prod_loss(*args))
    from aotjax.core.errors import CompilerError

    with pytest.raises(CompilerError, match="returned a callable that returned 0 outputs; expected 1"):
        compiled(_t(2, 3), _t(2, 3))  # the same program: the second call of its callable
    lowered = aotjax.aot(_prod_loss).lower(*args)
    assert not lowered._entry.inference.check_calls and not lowered._vjp.forward.check_calls
    assert compiled._cache and all(e.inference.check_calls for e in compiled._cache.values())


# -- 7. AOTAutograd's names, stages, forward mode -------------------------------------------------------------------
def test_aot_function_argument_names():
    calls = []
    compiled = aotjax.aot_function(
        _mlp, fw_compiler=_counting(calls, "fw"), bw_compiler=_counting(calls, "bw"),
        partition_fn=min_cut_partition(0.0), inference_compiler=_counting(calls, "inference"),
        num_params_buffers=0, keep_inference_input_mutations=True, dynamic=False)
    args = _args_of(_mlp)
    _close(compiled(*args), _mlp(*args))
    assert calls == ["inference"]
    _close(aotjax.grad(compiled, argnums=(0, 1, 2))(*args), aotjax.grad(_mlp, argnums=(0, 1, 2))(*args))
    assert sorted(calls) == ["bw", "fw", "inference"]
    assert _only_inputs_saved(compiled.lower(*args))  # partition_fn is honoured


def test_aot_function_decompositions():
    def tanh_by_sigmoid(x):
        return (x * 2).sigmoid() * 2 - 1

    compiled = aotjax.aot_function(_mlp, decompositions={"tanh": tanh_by_sigmoid})
    args = _args_of(_mlp)
    names = {e.primitive.name for e in compiled.lower(*args).jaxpr.eqns}
    assert "tanh" not in names and "sigmoid" in names
    _close(compiled(*args), _mlp(*args))
    _close(aotjax.grad(compiled, argnums=(0, 1, 2))(*args), aotjax.grad(_mlp, argnums=(0, 1, 2))(*args))


class _RunningMeanNet:
    """BatchNorm-like: normalizes with the batch mean and keeps a running mean, updated in place."""

    def __init__(self):
        self.params = {"w": _t(3), "b": _t(3, scale=-0.1)}
        self.buffers = {"running_mean": aotjax.zeros(3)}

    def forward(self, x):
        mean = x.mean(0)
        self.buffers["running_mean"].mul_(0.9).add_(mean * 0.1)
        return ((x - mean) * self.params["w"] + self.params["b"]).tanh().sum()


def _functional_net(params, buffers, x):
    net = _RunningMeanNet()
    net.params, net.buffers = params, buffers
    return net.forward(x)


def test_aot_module_updates_buffer_in_place():
    eager, net = _RunningMeanNet(), _RunningMeanNet()
    compiled = aotjax.aot_module(net)
    for k in (1.0, 2.0):
        x = _t(4, 3, scale=0.1 * k)
        _close(compiled(x), eager.forward(x))
        _close(net.buffers, eager.buffers)
    assert compiled.compiled.trace_count == 1
    assert np.abs(np.asarray(net.buffers["running_mean"])).sum() > 0


def test_aot_module_under_grad_updates_buffer():
    eager, net = _RunningMeanNet(), _RunningMeanNet()
    compiled = aotjax.aot_module(net)
    x = _t(4, 3)
    want = aotjax.grad(_functional_net, argnums=(0, 2))(eager.params, eager.buffers, x)
    got = aotjax.grad(compiled.compiled, argnums=(0, 2))(net.params, net.buffers, x)
    _close(got, want)
    _close(net.buffers, eager.buffers)
    running = _RunningMeanNet().buffers["running_mean"].mul_(0.9).add_(x.mean(0) * 0.1)
    _close(net.buffers["running_mean"], running)


def test_compiled_analyses_per_program():
    compiled = aotjax.aot(_mlp).lower(*_args_of(_mlp)).compile()
    cost, memory = compiled.cost_analysis(), compiled.memory_analysis()
    assert set(cost) == {"forward", "backward"} and set(memory) == {"forward", "backward"}
    assert all(cost[k] is not None and memory[k] is not None for k in ("forward", "backward"))


def test_forward_mode_of_aot_is_a_clear_error():
    compiled = aotjax.aot(lambda x: x.sin().sum())
    x = _t(2, 3)
    with pytest.raises(NotImplementedError, match="aot") as info:
        aotjax.jvp(compiled, (x,), (aotjax.ones_like(x),))
    assert "forward-mode" in str(info.value) and "grad" in str(info.value)  # says what to use instead


def test_aot_of_grad_is_one_program():
    args = _args_of(_mlp)
    g = aotjax.grad(_mlp, argnums=(0, 1, 2))
    compiled = aotjax.aot(g)
    _close(compiled(*args), g(*args))
    _close(compiled(*copy_tree(args)), g(*args))
    assert compiled.trace_count == 1


def test_compiling_grad_of_aot():
    # jit or aot around grad(aot(f)) must compile the gradient, not f itself
    f = lambda x: x.sin().sum()  # noqa: E731
    x = _t(2, 3)
    want = aotjax.grad(f)(x)
    _close(aotjax.jit(aotjax.grad(aotjax.aot(f)))(x), want)
    _close(aotjax.aot(aotjax.grad(aotjax.aot(f)))(x), want)
