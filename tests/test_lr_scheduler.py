"""aotjax.optim.lr_scheduler against torch.optim.lr_scheduler: every scheduler in several configurations driven
side by side with torch's for 35 epochs (lrs, momentum/betas, parameters); state_dict round trips (ours and
torch's, same keys and values); resuming with last_epoch; ReduceLROnPlateau on metric sequences; a jitted
training step that follows the schedule without retracing; torch's errors and warnings."""
import types
import warnings

import numpy as np
import pytest
import torch
from torch.optim import lr_scheduler as theirs

import aotjax
from aotjax.optim import lr_scheduler as ours
from tests.helpers import FLOAT, by_mode

EPOCHS = 35
RTOL = 1e-6  # the lrs are Python doubles in both; this leaves room for a different order of operations
PARAM_RTOL, PARAM_ATOL = by_mode((1e-9, 1e-11), (1e-5, 1e-6))
TORCH_DTYPE = torch.float64 if FLOAT == np.float64 else torch.float32
GRADS = [np.linspace(-1.0, 1.0, 3).astype(FLOAT), np.linspace(0.5, 1.5, 3).astype(FLOAT)]


def _optimizers(lrs, kind):
    """A torch optimizer and ours over equal parameters, one group per lr."""
    cls, kwargs = {"sgd": ("SGD", dict(momentum=0.9)), "adam": ("Adam", {})}[kind]
    tparams = [torch.ones(3, dtype=TORCH_DTYPE, requires_grad=True) for _ in lrs]
    aparams = [aotjax.ones(3, dtype=FLOAT) for _ in lrs]
    topt = getattr(torch.optim, cls)([{"params": [p], "lr": lr} for p, lr in zip(tparams, lrs)], **kwargs)
    aopt = getattr(aotjax.optim, cls)([{"params": [p], "lr": lr} for p, lr in zip(aparams, lrs)], **kwargs)
    return topt, aopt, tparams, aparams


def _step_optimizers(topt, aopt, tparams, grads=True):
    """`optimizer.step()` on both, with gradients, or without (a step that changes nothing, faster)."""
    for p, g in zip(tparams, GRADS):
        p.grad = torch.tensor(g) if grads else None
    topt.step()
    aopt.step([aotjax.tensor(g) if grads else None for g in GRADS[:len(tparams)]])


def _assert_same(tsched, asched, topt, aopt, what=""):
    lrs = asched.get_last_lr()
    assert all(type(lr) is float for lr in lrs), lrs
    np.testing.assert_allclose(lrs, tsched.get_last_lr(), rtol=RTOL, atol=1e-15, err_msg=what)
    for tg, ag in zip(topt.param_groups, aopt.param_groups):
        np.testing.assert_allclose(float(ag["lr"]), tg["lr"], rtol=RTOL, atol=1e-15, err_msg=what)
        for key in ("initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum"):
            assert (key in ag) == (key in tg), key
            if key in tg:
                np.testing.assert_allclose(ag[key], tg[key], rtol=RTOL, err_msg=f"{what} {key}")
        if "momentum" in tg:
            np.testing.assert_allclose(float(ag["momentum"]), tg["momentum"], rtol=RTOL, err_msg=what)
        if "betas" in tg:
            np.testing.assert_allclose([float(b) for b in ag["betas"]], tg["betas"], rtol=RTOL, err_msg=what)


def _assert_state_equal(a, t, path="state_dict"):
    """Same keys and values, recursively (numbers to RTOL)."""
    if isinstance(t, dict):
        assert isinstance(a, dict) and set(a) == set(t), f"{path}: keys {sorted(a)} != torch's {sorted(t)}"
        for key in t:
            _assert_state_equal(a[key], t[key], f"{path}[{key!r}]")
    elif isinstance(t, (list, tuple)):
        assert isinstance(a, (list, tuple)) and len(a) == len(t), f"{path}: {a} != torch's {t}"
        for i, (x, y) in enumerate(zip(a, t)):
            _assert_state_equal(x, y, f"{path}[{i}]")
    elif isinstance(t, float) and not isinstance(a, bool):
        np.testing.assert_allclose(a, t, rtol=RTOL, atol=1e-15, err_msg=path)
    else:
        assert a == t and type(a) is type(t), f"{path}: {a!r} != torch's {t!r}"


class Warmup:
    """A callable object as lr_lambda: its attributes are saved in state_dict (a function's are not)."""

    def __init__(self, epochs):
        self.epochs = epochs

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.epochs)


def _schedules():
    """(id, make(S, optimizer, **kw) -> scheduler, group lrs, optimizer kind, resumable with last_epoch)."""
    one, two = (0.1,), (0.1, 0.02)
    return [
        ("StepLR", lambda S, o, **k: S.StepLR(o, 3, **k), one, "sgd", True),
        ("StepLR-2groups", lambda S, o, **k: S.StepLR(o, step_size=1, gamma=0.8, **k), two, "sgd", True),
        ("MultiStepLR", lambda S, o, **k: S.MultiStepLR(o, [2, 5, 5, 11], gamma=0.5, **k), one, "sgd", True),
        ("MultiStepLR-unsorted", lambda S, o, **k: S.MultiStepLR(o, [9, 3], **k), two, "adam", True),
        ("ExponentialLR", lambda S, o, **k: S.ExponentialLR(o, 0.9, **k), one, "sgd", True),
        ("ExponentialLR-2groups", lambda S, o, **k: S.ExponentialLR(o, gamma=1.05, **k), two, "adam", True),
        ("CosineAnnealingLR", lambda S, o, **k: S.CosineAnnealingLR(o, 10, **k), one, "sgd", True),
        ("CosineAnnealingLR-eta_min", lambda S, o, **k: S.CosineAnnealingLR(o, T_max=7, eta_min=0.01, **k), two,
         "sgd", True),
        ("CosineAnnealingLR-T_max1", lambda S, o, **k: S.CosineAnnealingLR(o, 1, **k), one, "sgd", True),
        ("CosineAnnealingWarmRestarts", lambda S, o, **k: S.CosineAnnealingWarmRestarts(o, 5, **k), one, "sgd",
         True),
        ("CosineAnnealingWarmRestarts-T_mult", lambda S, o, **k: S.CosineAnnealingWarmRestarts(
            o, T_0=3, T_mult=2, eta_min=0.001, **k), two, "adam", True),
        ("LambdaLR", lambda S, o, **k: S.LambdaLR(o, lambda e: 0.95 ** e, **k), one, "sgd", True),
        ("LambdaLR-per-group", lambda S, o, **k: S.LambdaLR(o, [lambda e: 1 / (e + 1), Warmup(8)], **k), two,
         "sgd", True),
        ("MultiplicativeLR", lambda S, o, **k: S.MultiplicativeLR(o, lambda e: 0.9, **k), one, "sgd", True),
        ("MultiplicativeLR-per-group", lambda S, o, **k: S.MultiplicativeLR(
            o, [lambda e: 0.9, lambda e: 1.1 if e % 2 else 0.8], **k), two, "adam", True),
        ("LinearLR", lambda S, o, **k: S.LinearLR(o, **k), one, "sgd", True),
        ("LinearLR-decay", lambda S, o, **k: S.LinearLR(o, start_factor=1.0, end_factor=0.05, total_iters=20, **k),
         two, "sgd", True),
        ("ConstantLR", lambda S, o, **k: S.ConstantLR(o, **k), one, "sgd", True),
        ("ConstantLR-long", lambda S, o, **k: S.ConstantLR(o, factor=0.5, total_iters=10, **k), two, "adam", True),
        ("PolynomialLR", lambda S, o, **k: S.PolynomialLR(o, **k), one, "sgd", True),
        ("PolynomialLR-power", lambda S, o, **k: S.PolynomialLR(o, total_iters=20, power=2.0, **k), two, "sgd",
         True),
        ("OneCycleLR", lambda S, o, **k: S.OneCycleLR(o, 1.0, total_steps=40, **k), one, "sgd", False),
        ("OneCycleLR-three-phase-adam", lambda S, o, **k: S.OneCycleLR(
            o, [0.5, 1.0], epochs=4, steps_per_epoch=10, anneal_strategy="linear", three_phase=True,
            base_momentum=(0.8, 0.85), **k), two, "adam", False),
        ("OneCycleLR-no-momentum", lambda S, o, **k: S.OneCycleLR(
            o, 0.3, total_steps=36, pct_start=0.25, cycle_momentum=False, div_factor=10.0, final_div_factor=100.0,
            **k), one, "sgd", False),
        ("CyclicLR", lambda S, o, **k: S.CyclicLR(o, 0.01, 0.1, step_size_up=4, **k), one, "sgd", True),
        ("CyclicLR-triangular2", lambda S, o, **k: S.CyclicLR(
            o, [0.01, 0.001], [0.1, 0.05], step_size_up=3, step_size_down=5, mode="triangular2",
            base_momentum=[0.7, 0.8], **k), two, "sgd", True),
        ("CyclicLR-exp_range-adam", lambda S, o, **k: S.CyclicLR(
            o, 0.001, 0.01, step_size_up=5, mode="exp_range", gamma=0.97, **k), one, "adam", True),
        ("CyclicLR-scale_fn", lambda S, o, **k: S.CyclicLR(
            o, 0.01, 0.1, step_size_up=2, scale_fn=lambda x: 0.9 ** x, scale_mode="iterations",
            cycle_momentum=False, **k), one, "sgd", True),
        ("SequentialLR", lambda S, o, **k: S.SequentialLR(
            o, [S.LinearLR(o, 0.1, total_iters=5), S.CosineAnnealingLR(o, T_max=20)], milestones=[5], **k), two,
         "sgd", False),
        ("SequentialLR-three", lambda S, o, **k: S.SequentialLR(
            o, [S.ConstantLR(o, 0.5, 4), S.ExponentialLR(o, 0.9), S.MultiplicativeLR(o, lambda e: 0.95)],
            milestones=[3, 10], **k), one, "adam", False),
        ("SequentialLR-restarts", lambda S, o, **k: S.SequentialLR(
            o, [S.ExponentialLR(o, 0.5), S.CosineAnnealingWarmRestarts(o, 3)], milestones=[2], **k), one, "sgd",
         False),
        ("SequentialLR-one-cycle", lambda S, o, **k: S.SequentialLR(
            o, [S.ExponentialLR(o, 0.5), S.OneCycleLR(o, 0.5, total_steps=40)], milestones=[2], **k), one, "sgd",
         False),
        ("ChainedScheduler", lambda S, o, **k: S.ChainedScheduler(
            [S.ConstantLR(o, factor=0.1, total_iters=20), S.ExponentialLR(o, gamma=0.9)], **k), one, "sgd", False),
        ("ChainedScheduler-three", lambda S, o, **k: S.ChainedScheduler(
            [S.LinearLR(o, 0.2, total_iters=4), S.CosineAnnealingLR(o, 12, eta_min=0.001), S.StepLR(o, 5, 0.5)],
            optimizer=o, **k), two, "sgd", False),
    ]


SCHEDULES = _schedules()
IDS = [case[0] for case in SCHEDULES]


def _pair(make, lrs, kind, **kwargs):
    topt, aopt, tparams, aparams = _optimizers(lrs, kind)
    return make(theirs, topt, **kwargs), make(ours, aopt, **kwargs), topt, aopt, tparams, aparams


def _advance(tsched, asched, topt, aopt, tparams, epochs, what, grads=False):
    for epoch in range(epochs):
        _step_optimizers(topt, aopt, tparams, grads)
        tsched.step()
        asched.step()
        _assert_same(tsched, asched, topt, aopt, f"{what}, epoch {epoch}")


@pytest.mark.parametrize("name, make, lrs, kind, resumable", SCHEDULES, ids=IDS)
def test_schedule_matches_torch(name, make, lrs, kind, resumable):
    tsched, asched, topt, aopt, tparams, aparams = _pair(make, lrs, kind)
    assert asched.optimizer is aopt and type(asched).__name__ == type(tsched).__name__
    _assert_same(tsched, asched, topt, aopt, f"{name}, built")
    _advance(tsched, asched, topt, aopt, tparams, EPOCHS, name, grads=True)
    if hasattr(tsched, "base_lrs"):
        np.testing.assert_allclose(asched.base_lrs, tsched.base_lrs, rtol=RTOL)
    for a, t in zip(aparams, tparams):  # the optimizer stepped with the scheduled lrs
        np.testing.assert_allclose(np.asarray(a), t.detach().numpy(), rtol=PARAM_RTOL, atol=PARAM_ATOL)


def _torch_optimizer_state_as_ours(state_dict):
    state = {i: {k: aotjax.tensor(v.detach().numpy()) for k, v in s.items()} for i, s in state_dict["state"].items()}
    return {"state": state, "param_groups": state_dict["param_groups"]}


@pytest.mark.parametrize("source", ["ours", "torch"])
@pytest.mark.parametrize("name, make, lrs, kind, resumable", SCHEDULES, ids=IDS)
def test_state_dict_resumes(name, make, lrs, kind, resumable, source):
    tsched, asched, topt, aopt, tparams, _ = _pair(make, lrs, kind)
    _advance(tsched, asched, topt, aopt, tparams, 12, name)
    saved = asched.state_dict()
    _assert_state_equal(saved, tsched.state_dict())
    _, fresh_opt, _, _ = _optimizers(lrs, kind)
    fresh = make(ours, fresh_opt)
    if source == "ours":
        fresh_opt.load_state_dict(aopt.state_dict())
        fresh.load_state_dict(saved)
    else:
        fresh_opt.load_state_dict(_torch_optimizer_state_as_ours(topt.state_dict()))
        fresh.load_state_dict(tsched.state_dict())
    _assert_state_equal(fresh.state_dict(), tsched.state_dict())
    _advance(tsched, fresh, topt, fresh_opt, tparams, EPOCHS - 12, f"{name} resumed from {source}'s state")


@pytest.mark.parametrize("name, make, lrs, kind", [c[:4] for c in SCHEDULES if c[4]], ids=[c[0] for c in SCHEDULES
                                                                                           if c[4]])
def test_resume_with_last_epoch(name, make, lrs, kind):
    topt, aopt, tparams, _ = _optimizers(lrs, kind)
    for groups in (topt.param_groups, aopt.param_groups):
        for group, lr in zip(groups, lrs):
            group["initial_lr"] = 3 * lr
    tsched, asched = make(theirs, topt, last_epoch=5), make(ours, aopt, last_epoch=5)
    assert asched.last_epoch == tsched.last_epoch
    _assert_same(tsched, asched, topt, aopt, f"{name}, resumed")
    _advance(tsched, asched, topt, aopt, tparams, 20, f"{name}, resumed")


def test_lambda_state_dict_saves_callable_objects_only():
    _, opt, _, _ = _optimizers((0.1, 0.02), "sgd")
    warmup = Warmup(8)
    sched = ours.LambdaLR(opt, [lambda e: 1.0, warmup])
    assert sched.state_dict()["lr_lambdas"] == [None, {"epochs": 8}]
    warmup.epochs = 3
    sched.load_state_dict({**sched.state_dict(), "lr_lambdas": [None, {"epochs": 5}]})
    assert warmup.epochs == 5 and sched.lr_lambdas[1] is warmup


# -- the deprecated step(epoch), initial_lr, and other paths ---------------------------------------------------
@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR-eta_min",
                                  "LinearLR", "ConstantLR", "PolynomialLR-power", "LambdaLR", "CyclicLR"])
def test_step_with_epoch_matches_torch(name):
    _, make, lrs, kind, _ = SCHEDULES[IDS.index(name)]
    tsched, asched, topt, aopt, tparams, _ = _pair(make, lrs, kind)
    for epoch in [3, 4, 10, 2, 17, 18]:
        with pytest.warns(UserWarning, match="epoch parameter in `scheduler.step\\(\\)`"):
            asched.step(epoch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tsched.step(epoch)
        _assert_same(tsched, asched, topt, aopt, f"{name}, step({epoch})")
        tsched.step()
        asched.step()
        _assert_same(tsched, asched, topt, aopt, f"{name}, step() after step({epoch})")


def test_warm_restarts_with_fractional_epochs():
    topt, aopt, _, _ = _optimizers((0.1,), "sgd")
    tsched = theirs.CosineAnnealingWarmRestarts(topt, T_0=3, T_mult=2, eta_min=0.01)
    asched = ours.CosineAnnealingWarmRestarts(aopt, T_0=3, T_mult=2, eta_min=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NOTE: a fractional epoch is this scheduler's API, not deprecated
        for epoch in [0.5, 1.25, 2.9, 3.0, 7.5, 20.0, 4.2]:
            tsched.step(epoch)
            asched.step(epoch)
            _assert_same(tsched, asched, topt, aopt, f"step({epoch})")
            assert (asched.T_cur, asched.T_i, asched.last_epoch) == (tsched.T_cur, tsched.T_i, tsched.last_epoch)
            tsched.step()
            asched.step()
            _assert_same(tsched, asched, topt, aopt, f"step() after step({epoch})")
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        asched.step(-1)


def test_initial_lr_is_set_by_the_first_scheduler():
    _, opt, _, _ = _optimizers((0.1,), "sgd")
    ours.ExponentialLR(opt, 0.5).step()
    assert opt.param_groups[0]["initial_lr"] == 0.1
    second = ours.StepLR(opt, 2)  # NOTE: as torch: initial_lr is kept, and base_lrs come from it
    assert opt.param_groups[0]["initial_lr"] == 0.1 and second.base_lrs == [0.1]
    assert second.get_last_lr() == [0.05]


def test_recursive_schedules_do_not_drift_in_float32():
    """The lr tensor rounds each value to the mode's float width; the schedule keeps torch's doubles."""
    topt, aopt, _, _ = _optimizers((0.1, 0.03), "sgd")
    tsched, asched = theirs.ExponentialLR(topt, 0.97), ours.ExponentialLR(aopt, 0.97)
    tcos, acos = theirs.CosineAnnealingLR(topt, 50, eta_min=0.001), ours.CosineAnnealingLR(aopt, 50, eta_min=0.001)
    for _ in range(300):
        topt.step()
        for s in (tsched, asched, tcos, acos):
            s.step()
    np.testing.assert_allclose(acos.get_last_lr(), tcos.get_last_lr(), rtol=1e-13)


def test_custom_subclass_and_torch_optimizer():
    class Halving(ours.LRScheduler):
        def get_lr(self):
            return [base_lr * 0.5 ** self.last_epoch for base_lr in self.base_lrs]

    assert ours._LRScheduler is ours.LRScheduler
    _, opt, _, _ = _optimizers((0.1, 0.02), "sgd")
    sched = Halving(opt)
    for _ in range(3):
        sched.step()
    assert sched.get_last_lr() == [0.0125, 0.0025]
    topt, _, _, _ = _optimizers((0.1,), "sgd")  # a torch optimizer has the protocol: ours drive it too
    sched = ours.StepLR(topt, 2, gamma=0.5)
    for _ in range(4):
        sched.step()
    assert topt.param_groups[0]["lr"] == 0.025 and sched.get_last_lr() == [0.025]


def test_get_lr_outside_step_warns():
    _, opt, _, _ = _optimizers((0.1,), "sgd")
    sched = ours.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        sched.get_lr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()


# -- ReduceLROnPlateau -------------------------------------------------------------------------------------------
def _metrics(mode, n=40):
    """Improving, then a plateau with small ups and downs, then improving again, then flat."""
    rng = np.random.default_rng(0)
    values = np.concatenate([np.linspace(10, 8, 8), 8 + 0.05 * rng.standard_normal(14), np.linspace(7.9, 7, 6),
                             np.full(n - 28, 7.0)])
    return [float(v) for v in (values if mode == "min" else -values)]


PLATEAUS = [
    ("default", dict(), (0.1,)),
    ("max-patience2", dict(mode="max", factor=0.5, patience=2), (0.1,)),
    ("abs-cooldown", dict(threshold_mode="abs", threshold=0.1, patience=1, cooldown=2), (0.1, 0.02)),
    ("max-abs", dict(mode="max", threshold_mode="abs", threshold=0.01, patience=0, factor=0.7), (0.1,)),
    ("min_lr-list", dict(patience=0, factor=0.5, min_lr=[0.01, 0.005]), (0.1, 0.02)),
    ("min_lr-eps", dict(patience=1, factor=0.5, min_lr=0.003, eps=1e-3), (0.1, 0.02)),
    ("rel-threshold", dict(threshold=0.01, patience=3, cooldown=1), (0.1,)),
]


@pytest.mark.parametrize("name, kwargs, lrs", PLATEAUS, ids=[p[0] for p in PLATEAUS])
def test_reduce_on_plateau_matches_torch(name, kwargs, lrs):
    topt, aopt, tparams, _ = _optimizers(lrs, "sgd")
    tsched, asched = theirs.ReduceLROnPlateau(topt, **kwargs), ours.ReduceLROnPlateau(aopt, **kwargs)
    metrics = _metrics(kwargs.get("mode", "min"))
    for i, metric in enumerate(metrics):
        _step_optimizers(topt, aopt, tparams)
        tsched.step(metric)
        asched.step(aotjax.tensor(metric) if i % 2 else metric)  # a 0-d tensor works as a metric too
        _assert_same(tsched, asched, topt, aopt, f"{name}, step {i}")
        assert (asched.best, asched.num_bad_epochs, asched.cooldown_counter, asched.in_cooldown,
                asched.last_epoch) == pytest.approx((tsched.best, tsched.num_bad_epochs, tsched.cooldown_counter,
                                                     tsched.in_cooldown, tsched.last_epoch), rel=1e-6)
        if i == 20:  # a round trip through state_dict continues the same
            _assert_state_equal(asched.state_dict(), tsched.state_dict())
            _, fresh_opt, _, _ = _optimizers(lrs, "sgd")
            fresh_opt.load_state_dict(aopt.state_dict())
            fresh = ours.ReduceLROnPlateau(fresh_opt)
            fresh.load_state_dict(asched.state_dict())
            asched, aopt = fresh, fresh_opt
    assert asched.get_last_lr() != list(lrs) or name == "default"


def test_reduce_on_plateau_with_epoch_and_new_groups():
    topt, aopt, _, _ = _optimizers((0.1,), "sgd")
    tsched, asched = (S.ReduceLROnPlateau(o, patience=0, min_lr=[0.01]) for S, o in ((theirs, topt), (ours, aopt)))
    with pytest.warns(UserWarning, match="epoch parameter"):
        asched.step(1.0, epoch=4)
    assert asched.last_epoch == 4
    aopt.add_param_group({"params": [aotjax.zeros(1)], "lr": 0.5})
    with pytest.raises(RuntimeError, match="differs from when `ReduceLROnPlateau` was initialized"):
        asched.step(2.0)  # NOTE: a reduction, and min_lr was given per group


# -- a compiled training step ----------------------------------------------------------------------------------
def _models():
    aotjax.manual_seed(0)
    model = aotjax.nn.Linear(3, 2)
    tmodel = torch.nn.Linear(3, 2)  # NOTE: float32 in both modes, as modules are made
    with torch.no_grad():
        tmodel.weight.copy_(torch.tensor(np.asarray(model.weight)))
        tmodel.bias.copy_(torch.tensor(np.asarray(model.bias)))
    return model, tmodel


JITTED = [
    ("SGD", dict(lr=0.1, momentum=0.9), lambda S, o: S.OneCycleLR(o, max_lr=0.5, total_steps=12)),
    ("Adam", dict(lr=0.05), lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=2)),  # betas[0] cycles too
    ("SGD", dict(lr=0.1), lambda S, o: S.StepLR(o, 2, gamma=0.5)),
]


@pytest.mark.slow
@pytest.mark.parametrize("optimizer, kwargs, make", JITTED, ids=["OneCycleLR-SGD", "CyclicLR-Adam", "StepLR-SGD"])
def test_jitted_step_follows_the_schedule_without_retracing(optimizer, kwargs, make):
    model, tmodel = _models()
    opt = getattr(aotjax.optim, optimizer)(model.parameters(), **kwargs)
    topt = getattr(torch.optim, optimizer)(tmodel.parameters(), **kwargs)
    sched, tsched = make(ours, opt), make(theirs, topt)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal((8, 2)).astype(np.float32)

    @aotjax.jit
    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    for i in range(10):
        loss = step(aotjax.tensor(x), aotjax.tensor(y))
        topt.zero_grad()
        tloss = ((tmodel(torch.tensor(x)) - torch.tensor(y)) ** 2).mean()
        tloss.backward()
        topt.step()
        sched.step()
        tsched.step()
        np.testing.assert_allclose(float(loss), float(tloss.detach()), rtol=1e-5, atol=1e-6, err_msg=f"step {i}")
        _assert_same(tsched, sched, topt, opt, f"step {i}")
    np.testing.assert_allclose(np.asarray(model.weight), tmodel.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert step.trace_count == 1


# -- errors ----------------------------------------------------------------------------------------------------
def _sgd(S, n=1):
    if S is theirs:
        return torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)]} for _ in range(n)], lr=0.1,
                               momentum=0.9)
    return aotjax.optim.SGD([{"params": [aotjax.zeros(1)]} for _ in range(n)], lr=0.1, momentum=0.9)


BAD = [
    ("resume-without-initial_lr", lambda S: S.StepLR(_sgd(S), 3, last_epoch=5)),
    ("ConstantLR-factor", lambda S: S.ConstantLR(_sgd(S), factor=1.5)),
    ("LinearLR-start", lambda S: S.LinearLR(_sgd(S), start_factor=0)),
    ("LinearLR-end", lambda S: S.LinearLR(_sgd(S), end_factor=1.5)),
    ("CAWR-T_0", lambda S: S.CosineAnnealingWarmRestarts(_sgd(S), 0)),
    ("CAWR-T_0-float", lambda S: S.CosineAnnealingWarmRestarts(_sgd(S), 2.0)),
    ("CAWR-T_mult", lambda S: S.CosineAnnealingWarmRestarts(_sgd(S), 2, T_mult=0)),
    ("CAWR-eta_min", lambda S: S.CosineAnnealingWarmRestarts(_sgd(S), 2, eta_min="a")),
    ("LambdaLR-count", lambda S: S.LambdaLR(_sgd(S), [lambda e: 1, lambda e: 1])),
    ("MultiplicativeLR-count", lambda S: S.MultiplicativeLR(_sgd(S), [lambda e: 1, lambda e: 1])),
    ("MultiplicativeLR-not-callable", lambda S: S.MultiplicativeLR(_sgd(S), 3)),
    ("OneCycleLR-no-total", lambda S: S.OneCycleLR(_sgd(S), 1.0)),
    ("OneCycleLR-total", lambda S: S.OneCycleLR(_sgd(S), 1.0, total_steps=0)),
    ("OneCycleLR-epochs", lambda S: S.OneCycleLR(_sgd(S), 1.0, epochs=0, steps_per_epoch=3)),
    ("OneCycleLR-steps_per_epoch", lambda S: S.OneCycleLR(_sgd(S), 1.0, epochs=2, steps_per_epoch=2.5)),
    ("OneCycleLR-pct_start", lambda S: S.OneCycleLR(_sgd(S), 1.0, total_steps=10, pct_start=1.5)),
    ("OneCycleLR-anneal", lambda S: S.OneCycleLR(_sgd(S), 1.0, total_steps=10, anneal_strategy="x")),
    ("OneCycleLR-max_lr", lambda S: S.OneCycleLR(_sgd(S), [1.0, 2.0], total_steps=10)),
    ("OneCycleLR-momentum", lambda S: S.OneCycleLR(_sgd(S), 1.0, total_steps=10, max_momentum=(0.8, 0.9))),
    ("CyclicLR-mode", lambda S: S.CyclicLR(_sgd(S), 0.01, 0.1, mode="x")),
    ("CyclicLR-base_lr", lambda S: S.CyclicLR(_sgd(S), [0.01, 0.02], 0.1)),
    ("CyclicLR-momentum", lambda S: S.CyclicLR(_sgd(S), 0.01, 0.1, base_momentum=[0.1, 0.2])),
    ("Plateau-factor", lambda S: S.ReduceLROnPlateau(_sgd(S), factor=1.0)),
    ("Plateau-mode", lambda S: S.ReduceLROnPlateau(_sgd(S), mode="x")),
    ("Plateau-threshold_mode", lambda S: S.ReduceLROnPlateau(_sgd(S), threshold_mode="x")),
    ("Plateau-min_lr", lambda S: S.ReduceLROnPlateau(_sgd(S), min_lr=[0.1, 0.2])),
    ("SequentialLR-empty", lambda S: S.SequentialLR(_sgd(S), [], [])),
    ("SequentialLR-milestones", lambda S: (lambda o: S.SequentialLR(o, [S.StepLR(o, 2), S.StepLR(o, 2)], [2, 3]))(
        _sgd(S))),
    ("SequentialLR-plateau", lambda S: (lambda o: S.SequentialLR(o, [S.ReduceLROnPlateau(o), S.StepLR(o, 2)], [2]))(
        _sgd(S))),
    ("SequentialLR-not-a-scheduler", lambda S: (lambda o: S.SequentialLR(o, [3, S.StepLR(o, 2)], [2]))(_sgd(S))),
    ("SequentialLR-optimizers", lambda S: S.SequentialLR(_sgd(S), [S.StepLR(_sgd(S), 2)], [])),
    ("ChainedScheduler-empty", lambda S: S.ChainedScheduler([])),
    ("ChainedScheduler-optimizers", lambda S: S.ChainedScheduler([S.StepLR(_sgd(S), 2), S.StepLR(_sgd(S), 2)])),
    ("OneCycleLR-too-many-steps", lambda S: [s.step() for s in [S.OneCycleLR(_sgd(S), 1.0, total_steps=2)]
                                             for _ in range(3)]),
]


@pytest.mark.x32_only
@pytest.mark.parametrize("name, build", BAD, ids=[b[0] for b in BAD])
def test_errors_are_torchs(name, build):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as expected:
            build(theirs)
    with pytest.raises(expected.type) as got:
        build(ours)
    message, torch_message = got.value.args[0], expected.value.args[0]
    if "has SGD (" in torch_message:  # NOTE: torch's message prints the optimizer, whose repr differs
        torch_message = torch_message.split(" has SGD (")[0]
    assert message.startswith(torch_message), (message, torch_message)
    assert "test_lr_scheduler.py:" in message, message  # the user's line


@pytest.mark.x32_only
@pytest.mark.parametrize("build", [
    lambda: ours.StepLR(object(), 3), lambda: ours.LambdaLR(object(), lambda e: 1.0),
    lambda: ours.OneCycleLR(object(), 1.0, total_steps=10), lambda: ours.CyclicLR(object(), 0.01, 0.1),
    lambda: ours.ReduceLROnPlateau(object()), lambda: ours.CosineAnnealingWarmRestarts(object(), 2)])
def test_not_an_optimizer(build):
    with pytest.raises(TypeError, match=r"^object is not an Optimizer \(at test_lr_scheduler.py:\d+"):
        build()


@pytest.mark.x32_only
def test_momentum_cycling_needs_momentum_buffers():
    opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=0.1)  # NOTE: torch would add momentum; ours has no buffers
    with pytest.raises(ValueError, match=r"OneCycleLR: cycle_momentum=True .* momentum=0 .*cycle_momentum=False"):
        ours.OneCycleLR(opt, 1.0, total_steps=10)
    ours.OneCycleLR(opt, 1.0, total_steps=10, cycle_momentum=False)
    with pytest.raises(TypeError, match="lr_lambda should be a function, but got int"):
        ours.LambdaLR(opt, 3)


def test_public_names_have_examples():
    for name in ours.__all__:
        obj = getattr(ours, name)
        assert isinstance(obj, type) and ">>>" in (obj.__doc__ or ""), name
    assert isinstance(aotjax.optim.lr_scheduler, types.ModuleType) and "lr_scheduler" in aotjax.optim.__all__
