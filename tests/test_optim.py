"""aotjax.optim: the torch-style optimizers against torch.optim (same parameters, same gradients, 5 steps),
eagerly and jitted; the optax-style transforms against optax inside jax.jit and optax.chain, and on Tensors
inside aotjax.jit; hyperparameter changes without retracing; state_dict round trips (torch's too); errors."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch

import aotjax
from aotjax import optim
from tests.helpers import FLOAT, by_mode

RTOL, ATOL = by_mode((1e-9, 1e-11), (1e-5, 1e-6))
TORCH_DTYPE = torch.float64 if FLOAT == np.float64 else torch.float32
SHAPES = [(3,), (2, 3)]
STEPS = 5


def _initial():
    rng = np.random.default_rng(0)
    return [rng.normal(size=s).astype(FLOAT) for s in SHAPES]


def _grads(skip=True):
    """5 steps of gradients; with `skip`, parameter 1 has none at step 0 and step 2 (torch: `p.grad is None`)."""
    rng = np.random.default_rng(1)
    out = [[rng.normal(size=s).astype(FLOAT) for s in SHAPES] for _ in range(STEPS)]
    if skip:
        out[0][1] = out[2][1] = None
    return out


def _torch_run(cls, kwargs, groups=None, skip=True):
    params = [torch.tensor(x, dtype=TORCH_DTYPE, requires_grad=True) for x in _initial()]
    opt = cls(params if groups is None else [{"params": [p], **g} for p, g in zip(params, groups)], **kwargs)
    for grads in _grads(skip):
        for p, g in zip(params, grads):
            p.grad = None if g is None else torch.tensor(g, dtype=TORCH_DTYPE)
        opt.step()
    return [p.detach().numpy() for p in params], opt.state_dict()


def _ours(cls, kwargs, groups=None):
    params = [aotjax.tensor(x) for x in _initial()]
    opt = cls(params if groups is None else [{"params": [p], **g} for p, g in zip(params, groups)], **kwargs)
    return params, opt


def _as_ours(grads):
    return [None if g is None else aotjax.tensor(g) for g in grads]


def _check_against_torch(params, opt, torch_params, torch_state):
    for p, t in zip(params, torch_params):
        np.testing.assert_allclose(np.asarray(p), t, rtol=RTOL, atol=ATOL)
    ours = opt.state_dict()["state"]
    assert set(ours) == set(torch_state["state"])
    for i, entries in torch_state["state"].items():
        for key, value in entries.items():
            np.testing.assert_allclose(np.asarray(ours[i][key]), value.numpy(), rtol=RTOL, atol=ATOL,
                                       err_msg=f"state[{i}][{key}]")


CONFIGS = {
    "sgd": (optim.SGD, torch.optim.SGD, dict(lr=0.1), None),
    "sgd-momentum": (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9), None),
    "sgd-dampening": (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.3), None),
    "sgd-nesterov": (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True), None),
    "sgd-weight-decay": (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.5, weight_decay=0.1), None),
    "sgd-maximize": (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.5, maximize=True), None),
    "adam": (optim.Adam, torch.optim.Adam, dict(lr=0.05), None),
    "adam-weight-decay": (optim.Adam, torch.optim.Adam, dict(lr=0.05, weight_decay=0.1), None),
    "adam-amsgrad": (optim.Adam, torch.optim.Adam, dict(lr=0.05, betas=(0.8, 0.9), amsgrad=True), None),
    "adamw": (optim.AdamW, torch.optim.AdamW, dict(lr=0.05, weight_decay=0.1), None),
    "adamw-maximize": (optim.AdamW, torch.optim.AdamW, dict(lr=0.05, maximize=True), None),
    "sgd-groups": (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9), [{}, {"lr": 0.01, "momentum": 0.5}]),
    "adam-groups": (optim.Adam, torch.optim.Adam, dict(lr=0.05), [{"lr": 0.2}, {"betas": (0.5, 0.6)}]),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_matches_torch_eagerly(name):
    ours_cls, torch_cls, kwargs, groups = CONFIGS[name]
    params, opt = _ours(ours_cls, kwargs, groups)
    for grads in _grads():
        assert opt.step(_as_ours(grads)) is None
    _check_against_torch(params, opt, *_torch_run(torch_cls, kwargs, groups))


def _counting_step():
    traces = []

    def step(opt, grads):
        traces.append(1)
        opt.step(grads)
    return aotjax.jit(step), traces


@pytest.mark.parametrize("name", ["sgd-dampening", "adam-amsgrad"])
def test_matches_torch_jitted(name):
    ours_cls, torch_cls, kwargs, groups = CONFIGS[name]
    params, opt = _ours(ours_cls, kwargs, groups)
    views = [p.view(-1) for p in params]
    step, traces = _counting_step()
    for grads in _grads():
        step(opt, _as_ours(grads))
    assert len(traces) == 2  # one program with parameter 1's gradient, one without: the None is structure
    _check_against_torch(params, opt, *_torch_run(torch_cls, kwargs, groups))
    for v, p in zip(views, params):  # the caller's tensors were written in place: their views see it
        np.testing.assert_array_equal(np.asarray(v), np.asarray(p).reshape(-1))


def test_changing_hyperparameters_does_not_retrace():
    w = aotjax.tensor(np.ones(3, FLOAT))
    opt = optim.Adam([w], lr=0.1, betas=(0.9, 0.99))
    reference = optim.Adam([aotjax.tensor(np.ones(3, FLOAT))], lr=0.1, betas=(0.9, 0.99))
    step, traces = _counting_step()
    lr_tensor = opt.param_groups[0]["lr"]
    for i, grads in enumerate(_grads(skip=False)[:3]):
        for o in (opt, reference):
            o.param_groups[0]["lr"] = 0.1 / (i + 1)  # what an LR scheduler does
            o.param_groups[0]["betas"] = (0.9 - 0.1 * i, 0.99)
        step(opt, [aotjax.tensor(grads[0])])
        reference.step([aotjax.tensor(grads[0])])
    assert len(traces) == 1
    assert opt.param_groups[0]["lr"] is lr_tensor and float(lr_tensor) == pytest.approx(0.1 / 3)
    np.testing.assert_allclose(np.asarray(w), np.asarray(reference.param_groups[0]["params"][0]), rtol=RTOL)
    assert float(opt.state[0]["step"]) == 3


def test_params_as_given_and_in_place():
    w, b = aotjax.tensor(np.ones((2, 2), FLOAT)), aotjax.tensor(np.zeros(2, FLOAT))
    row = w[0]  # a view: the in-place update shows through it
    g = {"w": aotjax.tensor(np.ones((2, 2), FLOAT)), "b": aotjax.tensor(np.ones(2, FLOAT))}
    optim.SGD([("w", w), ("b", b)], lr=0.5).step(g)  # named_parameters(): a dict of gradients
    optim.SGD({"w": w, "b": b}, lr=0.5).step({"w": g["w"], "b": None})  # a dict; None skips b
    optim.SGD([w, b], lr=0.5).step([g["w"], jnp.ones(2, FLOAT)])  # a list; jax arrays are fine
    groups = optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.25}], lr=0.5)
    groups.step([[g["w"]], [g["b"]]])  # a list per group
    groups.step([g["w"], g["b"]])  # or flat, in parameter order
    assert w.tolist() == [[-1.5, -1.5], [-1.5, -1.5]] and row.tolist() == [-1.5, -1.5]
    assert b.tolist() == [-1.5, -1.5]
    one_group = optim.SGD([{"params": [w, b], "lr": 1.0}])
    one_group.zero_grad()  # a no-op: there is no .grad
    assert one_group.step([[g["w"], None]], closure=lambda: "loss") == "loss"  # torch's closure: called first
    assert w.tolist() == [[-2.5, -2.5], [-2.5, -2.5]] and b.tolist() == [-1.5, -1.5]


def test_state_is_made_in_the_constructor_and_is_a_pytree():
    w = aotjax.tensor(np.ones(2, FLOAT))
    opt = optim.Adam([w], amsgrad=True)
    assert sorted(opt.state[w]) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    paths = [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(opt)[0]]
    assert ".param_groups[0]['lr']" in paths and ".param_groups[0]['params'][0]" in paths
    assert ".state[0]['exp_avg']" in paths and len(paths) == 1 + 5 + 4  # params, hyperparameters, state
    again = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(opt), jax.tree_util.tree_leaves(opt))
    assert type(again) is optim.Adam and again.param_groups[0]["params"][0] is w
    assert again.param_groups[0]["amsgrad"] is True and again.state[w]["step"] is opt.state[0]["step"]


def test_a_whole_train_step_compiles_once_and_matches_eager():
    def loss_fn(params, x):
        return ((x @ params["w"] + params["b"]) ** 2).mean()

    calls = []

    def train_step(params, opt, x):
        calls.append(1)
        loss, grads = aotjax.value_and_grad(loss_fn)(params, x)
        opt.step(grads)  # the same tensors as `params`: one input each, written back once
        return loss
    x = aotjax.tensor(np.arange(6, dtype=FLOAT).reshape(2, 3) / 6)
    runs = []
    for step in (train_step, aotjax.jit(train_step)):
        params = {"w": aotjax.tensor(np.ones((3, 2), FLOAT)), "b": aotjax.tensor(np.zeros(2, FLOAT))}
        opt = optim.AdamW(params, lr=0.1)
        runs.append(([float(step(params, opt, x)) for _ in range(3)], params, opt.state_dict()["state"]))
    (eager_losses, *eager), (jit_losses, *jitted) = runs
    assert len(calls) == 3 + 1  # three eager calls, one trace
    np.testing.assert_allclose(jit_losses, eager_losses, rtol=RTOL)
    assert eager_losses[2] < eager_losses[0]
    for a, b in zip(jax.tree_util.tree_leaves(eager), jax.tree_util.tree_leaves(jitted)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("cls,torch_cls,kwargs", [
    (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    (optim.Adam, torch.optim.Adam, dict(lr=0.1)),
    (optim.AdamW, torch.optim.AdamW, dict(lr=0.1, weight_decay=0.0)),
])
def test_a_zero_weight_decay_is_skipped_as_in_torch(cls, torch_cls, kwargs):
    values = np.array([np.inf, 1.0], FLOAT)
    p, t = aotjax.tensor(values), torch.tensor(values, dtype=TORCH_DTYPE, requires_grad=True)
    t.grad = torch.ones(2, dtype=TORCH_DTYPE)
    torch_cls([t], **kwargs).step()
    cls([p], **kwargs).step([aotjax.ones(2, dtype=p.dtype)])  # weight_decay is a tensor holding 0: not 0 * inf
    np.testing.assert_allclose(np.asarray(p), t.detach().numpy(), rtol=RTOL)


def test_the_step_is_not_differentiated():
    def f(w):
        optim.SGD([w], lr=0.25).step([w * 2])  # w <- w - 0.5 * w, the update's dependence on w detached
        return (w * w).sum()
    x = aotjax.tensor(np.array([1.0, 2.0], FLOAT))
    np.testing.assert_allclose(np.asarray(aotjax.grad(f)(x)), [1.0, 2.0])  # 2 * w_new, w_new = w / 2
    assert x.tolist() == [0.5, 1.0]


def _run_steps(opt, grads_list):
    for grads in grads_list:
        opt.step(_as_ours(grads))


def test_state_dict_round_trip():
    grads = _grads(skip=False)
    params, opt = _ours(optim.Adam, dict(lr=0.05, amsgrad=True))
    _run_steps(opt, grads[:2])
    copies, fresh = _ours(optim.Adam, dict(lr=0.5, amsgrad=True))
    for c, p in zip(copies, params):
        c.copy_(p)
    saved = opt.state_dict()
    assert saved["param_groups"][0]["params"] == [0, 1] and float(saved["param_groups"][0]["lr"]) == pytest.approx(0.05)
    fresh.load_state_dict(saved)
    _run_steps(opt, grads[2:])
    _run_steps(fresh, grads[2:])
    for a, b in zip(params, copies):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("cls,torch_cls,kwargs", [
    (optim.Adam, torch.optim.Adam, dict(lr=0.05, weight_decay=0.1)),
    (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.5)),
])
def test_loads_a_torch_state_dict(cls, torch_cls, kwargs):
    grads = _grads()
    tparams = [torch.tensor(x, dtype=TORCH_DTYPE, requires_grad=True) for x in _initial()]
    topt = torch_cls(tparams, **kwargs)
    for step_grads in grads:
        for p, g in zip(tparams, step_grads):
            p.grad = None if g is None else torch.tensor(g, dtype=TORCH_DTYPE)
        topt.step()
        if step_grads is grads[0]:  # after one step parameter 1 has no state yet: it must start fresh
            convert = lambda v: aotjax.tensor(v.numpy().copy()) if isinstance(v, torch.Tensor) else v  # noqa: E731
            saved = jax.tree_util.tree_map(convert, topt.state_dict())
            params = [aotjax.tensor(p.detach().numpy().copy()) for p in tparams]
    assert 1 not in saved["state"]
    opt = cls(params, **{**kwargs, "lr": 1.0})  # the loaded lr replaces it
    opt.load_state_dict(saved)
    _run_steps(opt, grads[1:])
    for p, t in zip(params, tparams):
        np.testing.assert_allclose(np.asarray(p), t.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_torch_loads_our_sgd_state_dict():
    kwargs = dict(lr=0.1, momentum=0.9, dampening=0.5)
    grads = _grads()
    params, opt = _ours(optim.SGD, kwargs)
    _run_steps(opt, grads[:1])  # parameter 1 has not stepped: its buffer is left out, as torch would have none
    to_torch = lambda v: (float(v) if v.ndim == 0 else torch.tensor(np.asarray(v))) if isinstance(  # noqa: E731
        v, aotjax.Tensor) else v
    saved = jax.tree_util.tree_map(to_torch, opt.state_dict())
    assert set(saved["state"]) == {0}
    tparams = [torch.tensor(np.asarray(p), requires_grad=True) for p in params]
    topt = torch.optim.SGD(tparams, **kwargs)
    topt.load_state_dict(saved)
    _run_steps(opt, grads[1:])
    for step_grads in grads[1:]:
        for p, g in zip(tparams, step_grads):
            p.grad = None if g is None else torch.tensor(g, dtype=TORCH_DTYPE)
        topt.step()
    for p, t in zip(params, tparams):
        np.testing.assert_allclose(np.asarray(p), t.detach().numpy(), rtol=RTOL, atol=ATOL)


def _tree(values):
    return {"w": values[1], "b": values[0]}


def _optax_pairs():
    schedule = optax.linear_schedule(0.1, 0.01, 4)
    return {
        "sgd": (optim.sgd(0.1), optax.sgd(0.1)),
        "sgd-momentum": (optim.sgd(0.1, momentum=0.9), optax.sgd(0.1, momentum=0.9)),
        "sgd-nesterov": (optim.sgd(0.1, momentum=0.9, nesterov=True), optax.sgd(0.1, momentum=0.9, nesterov=True)),
        "adam": (optim.adam(0.05, b1=0.8, b2=0.9), optax.adam(0.05, b1=0.8, b2=0.9)),
        "adam-schedule": (optim.adam(schedule), optax.adam(schedule)),
        "adamw": (optim.adamw(0.05, weight_decay=0.1), optax.adamw(0.05, weight_decay=0.1)),
        "adamw-mask": (optim.adamw(0.05, weight_decay=0.1, mask={"w": True, "b": False}),
                       optax.adamw(0.05, weight_decay=0.1, mask={"w": True, "b": False})),
        "chain": (optax.chain(optax.clip_by_global_norm(1.0), optim.adamw(0.05, weight_decay=0.1)),
                  optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(0.05, weight_decay=0.1))),
    }


def _train(tx, params, grads_list, apply=optax.apply_updates):
    state = tx.init(params)
    for grads in grads_list:
        updates, state = tx.update(grads, state, params)
        params = apply(params, updates)
    return params


def test_transforms_match_optax_in_jax_jit():
    grads = jnp.asarray(np.stack([np.concatenate([g.ravel() for g in step]) for step in _grads(skip=False)]))

    def unpack(flat):
        return _tree([flat[:3], flat[3:].reshape(2, 3)])
    pairs = _optax_pairs()

    @jax.jit
    def run_all(grads):
        params = _tree([jnp.asarray(x) for x in _initial()])
        steps = [unpack(g) for g in grads]
        return {name: [_train(tx, params, steps) for tx in pair] for name, pair in pairs.items()}
    for name, (ours, theirs) in run_all(grads).items():
        for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=name)


def test_transforms_on_tensors_in_aotjax_jit():
    tx = optim.adamw(lambda count: 0.05 * 0.9 ** count.to(FLOAT), weight_decay=0.1, amsgrad=True)
    traces = []

    @aotjax.jit
    def train_step(params, state, grads):
        traces.append(1)
        updates, state = tx.update(grads, state, params)
        optim.apply_updates(params, updates)  # in place: the caller's tensors are written back
        return state
    params = _tree([aotjax.tensor(x) for x in _initial()])
    state = tx.init(params)
    assert isinstance(state.count, aotjax.Tensor) and state.max_exp_avg_sq is not None
    for grads in _grads(skip=False):
        state = train_step(params, state, _tree(_as_ours(grads)))
    assert len(traces) == 1 and int(state.count) == STEPS
    # the same transform on jax arrays, eagerly (its schedule written for them)
    tx = optim.adamw(lambda count: 0.05 * 0.9 ** count.astype(FLOAT), weight_decay=0.1, amsgrad=True)
    expected = _train(tx, _tree([jnp.asarray(x) for x in _initial()]),
                      [_tree([jnp.asarray(g) for g in step]) for step in _grads(skip=False)])
    for key in params:
        np.testing.assert_allclose(np.asarray(params[key]), expected[key], rtol=RTOL, atol=ATOL)
    # on Tensors eagerly, against torch's AdamW (a constant lr)
    tparams, _ = _torch_run(torch.optim.AdamW, dict(lr=0.05, weight_decay=0.1, amsgrad=True), skip=False)
    ours = _train(optim.adamw(0.05, weight_decay=0.1, amsgrad=True), [aotjax.tensor(x) for x in _initial()],
                  [_as_ours(step) for step in _grads(skip=False)], optim.apply_updates)
    for p, t in zip(ours, tparams):
        np.testing.assert_allclose(np.asarray(p), t, rtol=RTOL, atol=ATOL)


def test_errors():
    w = aotjax.tensor(np.ones(2, FLOAT))
    with pytest.raises(TypeError, match="single Tensor"):
        optim.SGD(w)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(ValueError, match="appears twice"):
        optim.SGD([w, w])
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        optim.SGD([w], momentum=0, nesterov=True)
    with pytest.raises(ValueError, match="invalid lr"):
        optim.Adam([w], lr=-1)
    with pytest.raises(ValueError, match="invalid beta parameter at index 1"):
        optim.Adam([w], betas=(0.9, 1.0))
    opt = optim.SGD({"w": w}, lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match=r"shape \(3,\), but the parameter has shape \(2,\)"):
        opt.step({"w": aotjax.ones(3)})
    with pytest.raises(ValueError, match="not parameters of the optimizer"):
        opt.step({"w": aotjax.ones(2), "v": aotjax.ones(2)})
    with pytest.raises(ValueError, match="no entry for parameter 'w'"):
        opt.step({})
    with pytest.raises(ValueError, match="a flat sequence of 1 gradients"):
        opt.step([aotjax.ones(2), aotjax.ones(2)])
    with pytest.raises(ValueError, match="static flag fixed at construction"):
        opt.param_groups[0]["nesterov"] = True
    with pytest.raises(ValueError, match="drop its momentum buffers"):
        opt.param_groups[0]["momentum"] = 0.0
    with pytest.raises(ValueError, match="cannot be replaced"):
        opt.param_groups[0]["params"] = [w]
    with pytest.raises(ValueError, match="different|2 parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}, {"params": [1]}]})
    assert w.tolist() == [1.0, 1.0]  # nothing was written by the failed calls
    with pytest.raises(ValueError, match="weight decay needs the parameters"):
        tx = optim.adamw(0.1)
        tx.update([jnp.ones(2)], tx.init([jnp.ones(2)]))
    with pytest.raises(TypeError, match="Write the schedule with Tensor operations"):
        tx = optim.adam(optax.linear_schedule(0.1, 0.0, 10))
        tx.update([w], tx.init([w]))


def test_step_takes_a_dict_keyed_by_the_parameters_for_groups_of_bare_tensors():
    w, b = aotjax.ones(2), aotjax.zeros(1)
    opt = aotjax.optim.SGD([w, b], lr=0.1)
    opt.step({w: aotjax.tensor([1.0, -1.0])})  # NOTE: b, missing, is not updated
    np.testing.assert_allclose(np.asarray(w.numpy()), [0.9, 1.1], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(b.numpy()), [0.0])
    with pytest.raises(ValueError, match="none of this optimizer's parameters"):
        opt.step({aotjax.ones(2): aotjax.ones(2)})
