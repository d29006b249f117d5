"""Mistakes a new user makes on the transform, optimizer and random-generator surface, against the installed torch
where torch has the same surface: what torch accepts is accepted (`vmap`'s 1-tuple out dims, `manual_seed`'s
conversions and wrapped seeds), what it refuses is refused with its error class, and every message names the
argument, what was expected and what was got."""
from __future__ import annotations

import jax
import numpy as np
import pytest
import torch
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import aotjax
from aotjax import optim
from aotjax.core.errors import DTypeError, ShapeError

X = np.arange(6, dtype=np.float32).reshape(2, 3)


def _raises(fn) -> BaseException:
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the oracle's error, whatever its class)
        return e
    raise AssertionError("expected an error")


# -- vmap: out_dims / out_axes, in_dims / in_axes ------------------------------------------------------------
@pytest.mark.parametrize("kw", [{"out_dims": (1,)}, {"out_axes": (1,)}, {"out_dims": (1,), "in_dims": (1,)}])
def test_vmap_takes_a_one_tuple_out_dims_for_a_single_output(kw):
    got = aotjax.vmap(lambda x: x * 2, **kw)(aotjax.tensor(X))
    torch_kw = {k.replace("axes", "dims"): v for k, v in kw.items()}
    want = torch.func.vmap(lambda x: x * 2, **torch_kw)(torch.tensor(X))
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_vmap_one_tuple_out_dims_for_two_outputs_is_refused_as_torch():
    err = _raises(lambda: torch.func.vmap(lambda x: (x, x), out_dims=(1,))(torch.tensor(X)))
    with pytest.raises(type(err), match=r"out_axes \(1,\) is not a pytree prefix of the output.*"
                                        r"PyTreeDef\(\(\*, \*\)\)"):
        aotjax.vmap(lambda x: (x, x), out_dims=(1,))(aotjax.tensor(X))


@pytest.mark.parametrize("jax_name, torch_name", [("in_axes", "in_dims"), ("out_axes", "out_dims")])
def test_vmap_refuses_both_names_of_one_argument(jax_name, torch_name):
    with pytest.raises(TypeError, match=f"vmap: got both {jax_name}=0 and {torch_name}=1 .*test_user_errors.py"):
        aotjax.vmap(lambda x: x, **{jax_name: 0, torch_name: 1})


def test_vmap_refuses_an_out_axis_that_is_no_int():
    with pytest.raises(TypeError, match="out_axes must be an int, None, or a pytree prefix .* got 'a' at \\[1\\]"):
        aotjax.vmap(lambda x: (x, x), out_axes=(0, "a"))


# -- checkpoint policies ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("transform", [aotjax.checkpoint, aotjax.remat])
def test_checkpoint_refuses_a_policy_that_is_no_function_when_made(transform):
    with pytest.raises(TypeError, match="policy must be a function .* got 'dots' of type str .*"
                                        "checkpoint_policies.dots_saveable"):
        transform(lambda x: x.sin(), policy="dots")


def test_checkpoint_refuses_a_policy_maker_not_called():
    with pytest.raises(TypeError, match=r"save_only_these_names makes a policy from names; call it"):
        aotjax.checkpoint(lambda x: x, policy=aotjax.checkpoint_policies.save_only_these_names)


def test_policy_names_and_checkpoint_name_must_be_strings():
    with pytest.raises(TypeError, match=r"save_only_these_names: each name must be a string.*got \['a', 'b'\]"):
        aotjax.checkpoint_policies.save_only_these_names(["a", "b"])
    with pytest.raises(TypeError, match="checkpoint_name: name must be a string, got 3"):
        aotjax.checkpoint_name(aotjax.ones(1), 3)


# -- optimizers: hyperparameters -------------------------------------------------------------------------------
# (class, keyword, bad value): torch raises TypeError for each (its range check compares the value with a number)
BAD_HYPERPARAMETERS = [
    ("SGD", "lr", "0.1"), ("SGD", "momentum", "0.9"), ("SGD", "weight_decay", None), ("Adam", "lr", "0.1"),
    ("Adam", "eps", None), ("Adam", "betas", (0.9, "a")), ("Adam", "betas", 0.9), ("AdamW", "weight_decay", "0"),
    ("Adamax", "lr", [0.1]), ("NAdam", "momentum_decay", "x"), ("RAdam", "lr", 1j), ("ASGD", "lr", "x"),
    ("RMSprop", "alpha", "x"), ("Adagrad", "lr_decay", "x"), ("Adadelta", "rho", "x"), ("Rprop", "etas", ("a", 1.2)),
    ("LBFGS", "lr", "x"),
]


@pytest.mark.parametrize("name, key, value", BAD_HYPERPARAMETERS)
def test_a_hyperparameter_of_the_wrong_type_is_refused_at_construction_as_torch(name, key, value):
    err = _raises(lambda: getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **{key: value}))
    assert isinstance(err, TypeError), err
    with pytest.raises(TypeError, match=rf"{name}: {key}(\[\d\])? must be .*test_user_errors.py"):
        getattr(optim, name)([aotjax.zeros(2)], **{key: value})


def test_a_tensor_learning_rate_is_taken_when_it_has_one_element_as_torch():
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=torch.tensor([0.1, 0.2]))
    with pytest.raises(ValueError, match=r"SGD: Tensor lr must be 1-element, got one of shape \(2,\)"):
        optim.SGD([aotjax.zeros(2)], lr=aotjax.tensor([0.1, 0.2]))
    opt = optim.SGD([aotjax.zeros(2)], lr=aotjax.tensor([0.5]))  # torch takes it too
    assert float(opt.param_groups[0]["lr"]) == 0.5


@pytest.mark.parametrize("betas", [(0.9,), (0.9, 0.99, 0.1)])
def test_betas_must_be_two_numbers(betas):
    with pytest.raises(ValueError, match=rf"Adam: betas must be a tuple of two numbers, got {len(betas)}"):
        optim.Adam([aotjax.zeros(2)], betas=betas)


@pytest.mark.parametrize("value", ["abc", None])
def test_assigning_a_bad_hyperparameter_names_it_and_its_group(value):
    opt = optim.SGD([aotjax.zeros(2)], lr=0.1)
    opt.add_param_group({"params": [aotjax.zeros(3)], "lr": 0.2})
    with pytest.raises(TypeError, match=r"SGD: param_groups\[1\]\['lr'\] must be a real number .*test_user_errors"):
        opt.param_groups[1]["lr"] = value
    with pytest.raises(TypeError, match=r"SGD: param_groups\[2\]\['momentum'\] must be a real number"):
        opt.add_param_group({"params": [aotjax.zeros(1)], "momentum": value})
    assert float(opt.param_groups[1]["lr"]) == pytest.approx(0.2)  # left as it was


def test_step_with_too_few_gradients_says_how_many():
    p, q = aotjax.zeros(2), aotjax.zeros(2)
    opt = optim.SGD([p, q], lr=0.1)
    with pytest.raises(ValueError, match="SGD.step: got 1 gradient for 2 parameters .*test_user_errors"):
        opt.step([aotjax.ones(2)])
    grouped = optim.SGD([{"params": [p, q]}, {"params": [aotjax.zeros(1)]}], lr=0.1)
    with pytest.raises(ValueError, match="got 2 gradients for 3 parameters"):
        grouped.step([aotjax.ones(2), aotjax.ones(2)])
    with pytest.raises(TypeError, match="the gradient of parameter 0 is 'a' of type str"):
        opt.step(["a", aotjax.ones(2)])


def test_pure_optimizers_refuse_a_bad_hyperparameter_when_made():
    with pytest.raises(TypeError, match="aotjax.optim.sgd: learning_rate must be a real number, a scalar array or a "
                                        "schedule .* got '0.1'"):
        optim.sgd("0.1")
    with pytest.raises(TypeError, match="aotjax.optim.adam: b1 must be a real number or a scalar array, got None"):
        optim.adam(0.1, b1=None)


# -- manual_seed -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", ["abc", None, [1], 2 ** 70, 2 ** 64, -2 ** 63 - 1])
def test_manual_seed_refuses_what_torch_refuses_with_its_message(seed):
    err = _raises(lambda: torch.manual_seed(seed))
    with pytest.raises(type(err), match=r"manual_seed: .*test_user_errors.py") as got:
        aotjax.manual_seed(seed)
    assert str(err) in str(got.value)


@pytest.mark.parametrize("seed", ["5", 3.7, True, -1, -2 ** 63, 2 ** 63, 2 ** 64 - 1])
def test_manual_seed_takes_what_torch_takes(seed):
    assert aotjax.manual_seed(seed).initial_seed() == torch.manual_seed(seed).initial_seed()


@pytest.mark.parametrize("seed", ["5", 3.7, True, None])
def test_generator_manual_seed_wants_an_int_as_torch(seed):
    err = _raises(lambda: torch.Generator().manual_seed(seed))
    with pytest.raises(type(err), match=r"Generator.manual_seed: .*test_user_errors.py") as got:
        aotjax.Generator().manual_seed(seed)
    assert str(err) in str(got.value)


def test_a_negative_seed_is_its_unsigned_wrap_as_in_torch():
    g, h = aotjax.Generator().manual_seed(-1), aotjax.Generator().manual_seed(2 ** 64 - 1)
    assert g.initial_seed() == h.initial_seed() == torch.Generator().manual_seed(-1).initial_seed()
    np.testing.assert_array_equal(aotjax.rand(3, generator=g).numpy(), aotjax.rand(3, generator=h).numpy())


# -- jit / aot outputs -----------------------------------------------------------------------------------------
class _Unregistered:
    def __init__(self, t):
        self.t = t


def named(x):
    return {"y": x * 2, "name": "loss"}


def test_jit_refuses_a_string_output_naming_the_function_and_the_output():
    with pytest.raises(TypeError, match=r"jit: named returns 'loss' of type str at out\['name'\] "
                                        r"\(at .*test_user_errors.py.*Return it from outside"):
        aotjax.jit(named)(aotjax.ones(2))
    with pytest.raises(TypeError, match=r"jit: named returns 'loss'"):  # inlined under a transform: the same
        aotjax.grad(lambda x: aotjax.jit(named)(x)["y"].sum())(aotjax.ones(2))


def test_jit_and_aot_refuse_an_object_that_would_leak_the_trace():
    for transform in (aotjax.jit, aotjax.aot):
        with pytest.raises(TypeError, match=rf"{transform.__name__}: <lambda> returns .* of type _Unregistered at out"):
            transform(lambda x: _Unregistered(x))(aotjax.ones(2))


def test_aot_returns_a_string_as_torch_aot_autograd_does():
    y, name = aotjax.aot(lambda x: (x * 2, "loss"))(aotjax.ones(2))
    assert name == "loss" and y.tolist() == [2.0, 2.0]


# -- shard_map specs -------------------------------------------------------------------------------------------
def test_shard_map_says_how_many_in_specs_and_arguments():
    mesh = Mesh(np.array(jax.devices()[:1]), ("i",))

    def add(x, y):
        return x + y

    x = aotjax.ones(2, 2)
    with pytest.raises(ValueError, match=r"add is called with 2 arguments but in_specs has 1 entry \(P\('i',\),\)"):
        aotjax.shard_map(add, mesh=mesh, in_specs=(P("i"),), out_specs=P("i"))(x, x)
    with pytest.raises(ValueError, match=r"out_specs .* it has 2 entries .* but add returns one output"):
        aotjax.shard_map(add, mesh=mesh, in_specs=P("i"), out_specs=(P("i"), P()))(x, x)


# -- aot(f).lower and checkpoint outputs (one check, jit's, once per trace) ----------------------------------------
def test_aot_lower_refuses_what_the_aot_call_refuses_and_keeps_strings():
    with pytest.raises(TypeError, match=r"aot: <lambda> returns .* of type _Unregistered at out\[1\] "
                                        r"\(at .*test_user_errors.py"):
        aotjax.aot(lambda x: (x * 2, _Unregistered(x))).lower(aotjax.ones(2))
    assert aotjax.aot(named).lower(aotjax.ones(2)) is not None  # a string, as the aot call returns it


@pytest.mark.parametrize("value", ["loss", _Unregistered(None), object()], ids=["a string", "an object", "a leaf"])
def test_checkpoint_refuses_an_output_that_is_no_tensor_naming_function_position_and_line(value):
    def region(x):
        return x.sin(), value

    for run in (lambda x: aotjax.checkpoint(region)(x),  # eagerly, and under grad
                lambda x: aotjax.grad(lambda x: aotjax.checkpoint(region)(x)[0].sum())(x)):
        with pytest.raises(TypeError, match=rf"checkpoint: region returns .* of type {type(value).__name__} at "
                                            r"out\[1\] \(at .*test_user_errors.py.*a checkpointed function returns "
                                            r"tensors and numbers"):
            run(aotjax.ones(2))
    y, n = aotjax.checkpoint(lambda x: (x.sin(), 3))(aotjax.zeros(1))  # numbers pass, as jit's
    assert n == 3 and y.tolist() == [0.0]


@pytest.mark.parametrize("program", [
    lambda T: T.ones(2, 3, 4).permute(0, 2, 1).view(-1),
    lambda T: T.ones(2, 3) @ T.ones(2, 3),
    lambda T: T.ones(3) + T.ones(4),
    lambda T: T.ones(6).reshape(4, 2),
    lambda T: T.ones(2, dtype=T.long).add_(1.5),
    lambda T: T.nn.functional.embedding(T.tensor([0.0]), T.ones(3, 2)),
], ids=["view", "matmul", "broadcast", "reshape", "inplace-cast", "float-indices"])
def test_shape_and_dtype_errors_are_runtime_errors_as_torchs(program):
    # NOTE: scripts catch torch's shape and dtype errors as RuntimeError; aotjax's ShapeError and DTypeError are
    # RuntimeErrors (and a ValueError, a TypeError)
    with pytest.raises(RuntimeError):
        program(torch)
    with pytest.raises(RuntimeError) as ours:
        program(aotjax)
    assert isinstance(ours.value, (ShapeError, DTypeError))


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "complex64", None])
def test_finfo_as_torchs(name):
    ours = aotjax.finfo() if name is None else aotjax.finfo(getattr(aotjax, name))
    theirs = torch.finfo() if name is None else torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert ours.dtype == theirs.dtype and repr(ours) == repr(theirs)


@pytest.mark.parametrize("name", ["int8", "int16", "int32", "uint8"])
def test_iinfo_as_torchs(name):
    ours, theirs = aotjax.iinfo(getattr(aotjax, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.max, ours.min, ours.dtype, repr(ours)) == (theirs.bits, theirs.max, theirs.min,
                                                                        theirs.dtype, repr(theirs))


def test_finfo_and_iinfo_refuse_the_other_kind_as_torch():
    for ours, theirs in [(lambda: aotjax.finfo(aotjax.int32), lambda: torch.finfo(torch.int32)),
                         (lambda: aotjax.iinfo(aotjax.float32), lambda: torch.iinfo(torch.float32)),
                         (lambda: aotjax.iinfo(aotjax.bool), lambda: torch.iinfo(torch.bool))]:
        assert type(_raises(ours)) is type(_raises(theirs)) is TypeError


_CLOSE_CASES = {
    "float-far": lambda T: (T.tensor([1.0, 2.0]), T.tensor([1.0, 2.1])),
    "float-near": lambda T: (T.tensor([1.0, 2.0]), T.tensor([1.0, 2.0 + 1e-6])),
    "shape": lambda T: (T.tensor([1.0]), T.tensor([1.0, 2.0])),
    "int": lambda T: (T.tensor([1, 2]), T.tensor([1, 3])),
    "list": lambda T: ([1.0, 2.0], [1.0, 2.5]),
    "dict-equal": lambda T: ({"a": T.tensor([1.0])}, {"a": T.tensor([1.0])}),
    "dict-far": lambda T: ({"a": T.tensor([1.0])}, {"a": T.tensor([1.5])}),
    "nan": lambda T: (T.tensor([float("nan")]), T.tensor([float("nan")])),
    "bfloat16": lambda T: (T.tensor([1.0]).to(T.bfloat16), T.tensor([1.01]).to(T.bfloat16)),
    "2d": lambda T: (T.tensor([[1.0, 5.0], [2.0, 3.0]]), T.tensor([[1.0, 5.5], [2.0, 3.2]])),
    "dtype": lambda T: (T.tensor([1.0]), T.tensor([1], dtype=T.int32)),
}


@pytest.mark.parametrize("case", list(_CLOSE_CASES))
def test_testing_assert_close_as_torchs(case):
    def outcome(T):
        try:
            T.testing.assert_close(*_CLOSE_CASES[case](T))
        except AssertionError as e:
            return str(e).replace("torch.", "").splitlines()[:3]
        return "close"

    ours, theirs = outcome(aotjax), outcome(torch)
    if case == "shape":  # NOTE: torch prints a torch.Size, aotjax a tuple
        assert ours[0].startswith("The values for attribute 'shape' do not match")
        assert theirs[0].startswith(ours[0][:40])
    else:
        assert ours == theirs


def test_tensor_questions_as_torchs():
    def answers(T):
        x = T.tensor([1.5, 2.0])
        out = [T.is_tensor(x), T.is_tensor(3), T.numel(x), T.is_floating_point(x), T.is_floating_point(T.tensor([1])),
               T.is_nonzero(T.tensor([0.0])), T.is_nonzero(T.tensor(2)), T.is_same_size(x, T.ones(2)),
               T.is_same_size(x, T.ones(3))]
        for bad in (lambda: T.is_nonzero(x), lambda: T.is_nonzero(T.tensor([])), lambda: T.numel([1])):
            out.append(type(_raises(bad)).__name__)
        return out
    assert answers(aotjax) == answers(torch)
