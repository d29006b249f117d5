"""`LBFGS`, as `torch.optim.LBFGS`: limited-memory BFGS over all parameters as one flat vector, with a fixed step
or a strong-Wolfe line search, driven by a closure that recomputes the loss and the gradients.

Eager only: every iteration decides what to do next from values (convergence tests, the line search's
brackets), so a step cannot be traced into one program; the closure can still call compiled code.
"""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.interpreter import Tracer, grad_mode, staging
from aotjax.core.source_info import where
from aotjax.ops.base.data import tensor
from aotjax.ops.shape.copies import cat
from aotjax.optim.optimizer import Optimizer, _as_number, _check_nonnegative, _check_scalar
from aotjax.tensor import Tensor

__all__ = ["LBFGS"]


class LBFGS(Optimizer):
    """L-BFGS, as `torch.optim.LBFGS`: `step(closure)` runs up to `max_iter` iterations (`max_eval` closure
    calls, default `max_iter * 5 // 4`), each a quasi-Newton direction from the last `history_size` steps and
    gradient changes, moved along by `lr` (the first iteration by `min(1, 1 / |g|_1) * lr`) or by a step a
    strong-Wolfe line search finds (`line_search_fn='strong_wolfe'`); it stops early when the largest gradient
    entry is at most `tolerance_grad`, or the step or the change of the loss is below `tolerance_change`.
    `closure` zeroes the gradients, computes the loss, calls `backward()` and returns the loss; `step` returns
    its first value. One parameter group only. The state, `state_dict()['state'][0]` (torch's keys: `'d'`,
    `'t'`, `'old_dirs'`, `'old_stps'`, `'ro'`, `'H_diag'`, `'prev_flat_grad'`, `'prev_loss'`, `'al'`,
    `'n_iter'`, `'func_evals'`), is made at the first step, as torch's, with torch's types (its scalars are 0-d
    tensors where torch's are: the float32 arithmetic of the line search is torch's).

    Eager only: stepping inside `aotjax.jit` (or another transform) raises; step outside it, with a closure that
    may call compiled functions.

    >>> w = aotjax.tensor([0.0, 1.0], requires_grad=True)
    >>> opt = aotjax.optim.LBFGS([w], line_search_fn='strong_wolfe')
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((w - aotjax.tensor([3.0, -1.0])) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> float(opt.step(closure)), [round(v, 4) for v in w.tolist()]
    (13.0, [3.0, -1.0])
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        given = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                     tolerance_change=tolerance_change, history_size=history_size)
        for key, value in given.items():
            if value is not None or key != "max_eval":
                _check_scalar(LBFGS, key, value)
        super().__init__(params, dict(lr=lr, max_iter=max_iter,
                                      max_eval=max_iter * 5 // 4 if max_eval is None else max_eval,
                                      tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                                      history_size=history_size, line_search_fn=line_search_fn))

    @classmethod
    def _validate(cls, v):
        _check_nonnegative(cls, {"lr": _as_number(v["lr"])}, "lr")
        if v["line_search_fn"] not in (None, "strong_wolfe"):
            raise RuntimeError(f"LBFGS: only 'strong_wolfe' is supported (line_search_fn={v['line_search_fn']!r}); "
                               f"pass line_search_fn='strong_wolfe' or None{where()}")

    def add_param_group(self, param_group: dict) -> None:
        if self.param_groups:
            raise ValueError(f"LBFGS doesn't support per-parameter options (parameter groups): it optimizes one "
                             f"flat vector of all parameters. Build it with a single group{where()}")
        super().add_param_group(param_group)

    def _init_state(self, group, param):
        return {}

    def _import_state(self, index, group, param, saved):
        state = self.state[index]
        state.clear()
        state.update({k: _imported(v) for k, v in saved.items()})

    def step(self, closure=None):
        """Run one L-BFGS optimization (up to `max_iter` iterations) with `closure`; return the closure's first
        loss."""
        _check_eager(self, closure)
        group = self.param_groups[0]
        with grad_mode(False):
            return _minimize(_Objective(group["params"], closure), self.state[0], group)


def _check_eager(opt: LBFGS, closure) -> None:
    if not callable(closure):
        raise TypeError(f"LBFGS.step() missing 1 required positional argument: 'closure' (a function that zeroes "
                        f"the gradients, computes the loss, calls backward() and returns the loss; got "
                        f"{type(closure).__name__}){where()}")
    if staging() or any(isinstance(p, Tracer) for p in opt.param_groups[0]["params"]):
        raise RuntimeError(f"LBFGS.step cannot run inside aotjax.jit or another transform: each iteration decides "
                           f"what to do next (line search, stopping tests) from values. Call opt.step(closure) "
                           f"eagerly, outside the compiled function; the closure may call compiled code{where()}")


def _imported(value):
    """A loaded state value as ours: tensors copied (a torch tensor converted), lists element by element."""
    if isinstance(value, (list, tuple)):
        return [_imported(v) for v in value]
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, Tensor):
        return value.clone()
    return tensor(np.array(value.detach().cpu() if hasattr(value, "detach") else value))


class _Objective:
    """The parameters as one flat vector: the closure's loss and flat gradient, and moves along a direction."""

    def __init__(self, params, closure):
        self.params, self.closure = params, closure

    def evaluate(self):
        with grad_mode(True):
            return self.closure()

    def flat_grad(self) -> Tensor:
        return cat([p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel()) for p in self.params])

    def move(self, t: float, d: Tensor) -> None:
        offset = 0
        for p in self.params:
            p.add_(d[offset:offset + p.numel()].view_as(p), alpha=t)
            offset += p.numel()

    def along(self, d: Tensor):
        """`phi(t) -> (loss, flat gradient)` at the parameters moved by `t * d`; the parameters are restored."""
        start = [p.clone() for p in self.params]

        def phi(t):
            self.move(t, d)
            loss = float(self.evaluate())
            flat_grad = self.flat_grad()
            for p, x in zip(self.params, start):
                p.copy_(x)
            return loss, flat_grad
        return phi


def _max_abs(x: Tensor) -> Tensor:
    return x.abs().max()


def _minimize(objective: _Objective, state: dict, group) -> Tensor:
    lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
    tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
    state.setdefault("func_evals", 0)
    state.setdefault("n_iter", 0)
    first_loss = objective.evaluate()
    loss, flat_grad, evals = float(first_loss), objective.flat_grad(), 1
    state["func_evals"] += 1
    if _max_abs(flat_grad) <= tolerance_grad:
        return first_loss
    d, t = state.get("d"), state.get("t")
    old_dirs, old_stps, ro, h_diag = (state.get(k) for k in ("old_dirs", "old_stps", "ro", "H_diag"))
    prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
    for n_iter in range(1, max_iter + 1):
        state["n_iter"] += 1
        if state["n_iter"] == 1:
            d, old_dirs, old_stps, ro, h_diag = -flat_grad, [], [], [], 1
        else:
            y, s = flat_grad - prev_flat_grad, d * t
            ys = y.dot(s)
            if ys > 1e-10:  # NOTE: keep the pair only where the curvature is positive (the update stays positive)
                if len(old_dirs) == group["history_size"]:
                    del old_dirs[0], old_stps[0], ro[0]
                old_dirs.append(y)
                old_stps.append(s)
                ro.append(1.0 / ys)
                h_diag = ys / y.dot(y)
            al = state.setdefault("al", [None] * group["history_size"])
            d = _two_loop(flat_grad, old_dirs, old_stps, ro, h_diag, al)
        prev_flat_grad, prev_loss = flat_grad.clone(), loss
        t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if state["n_iter"] == 1 else lr
        gtd = flat_grad.dot(d)
        if gtd > -tolerance_change:  # not a descent direction
            break
        if group["line_search_fn"] == "strong_wolfe":
            loss, flat_grad, t, ls_evals = _strong_wolfe(objective.along(d), t, d, loss, flat_grad, gtd)
            objective.move(t, d)
            converged = _max_abs(flat_grad) <= tolerance_grad
        else:
            objective.move(t, d)
            ls_evals, converged = 0, False
            if n_iter != max_iter:  # NOTE: the last iteration's loss is the next step's first
                loss, flat_grad, ls_evals = float(objective.evaluate()), objective.flat_grad(), 1
                converged = _max_abs(flat_grad) <= tolerance_grad
        evals += ls_evals
        state["func_evals"] += ls_evals
        if n_iter == max_iter or evals >= max_eval or converged:
            break
        if _max_abs(d * t) <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
            break
    state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                 prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
    return first_loss


def _two_loop(flat_grad: Tensor, old_dirs: list, old_stps: list, ro: list, h_diag, al: list) -> Tensor:
    """The L-BFGS direction `-H g` by the two-loop recursion over the stored (s, y) pairs, `H_0 = h_diag * I`;
    `al` receives the first loop's coefficients (torch keeps them in the state)."""
    q = -flat_grad
    for i in reversed(range(len(old_dirs))):
        al[i] = old_stps[i].dot(q) * ro[i]
        q = q.add(old_dirs[i], alpha=-al[i])
    r = q * h_diag
    for i in range(len(old_dirs)):
        be_i = old_dirs[i].dot(r) * ro[i]
        r = r.add(old_stps[i], alpha=al[i] - be_i)
    return r


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer within `bounds` (default: between x1 and x2) of the cubic through (x1, f1) and (x2, f2)
    with slopes g1 and g2 (Nocedal & Wright, eq. 3.59); the middle of the bounds where the cubic has none.
    Numbers or 0-d tensors (then computed in their dtype, as torch's)."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    try:
        d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
        d2_square = d1 ** 2 - g1 * g2
        if not d2_square >= 0:
            return (lo + hi) / 2
        d2 = d2_square.sqrt() if isinstance(d2_square, Tensor) else math.sqrt(d2_square)
        if x1 <= x2:
            x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    except ZeroDivisionError:
        return (lo + hi) / 2
    return min(max(x, lo), hi)


def _strong_wolfe(phi, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step `t` along `d` meeting the strong Wolfe conditions (sufficient decrease `c1`, curvature `c2`):
    bracketing with cubic extrapolation, then zooming with safeguarded cubic interpolation (Nocedal & Wright,
    algorithms 3.5 and 3.6). `phi(t) -> (loss, flat gradient)`; returns `(loss, flat gradient, t, evaluations)`."""
    d_norm = _max_abs(d)
    f_new, g_new = phi(t)
    evals, ls_iter, done = 1, 0, False
    gtd_new = g_new.dot(d)
    prev = (0, f, g, gtd)
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= prev[1]):
            bracket = [prev, (t, f_new, g_new, gtd_new)]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, done = [(t, f_new, g_new, gtd_new)], True
            break
        if gtd_new >= 0:
            bracket = [prev, (t, f_new, g_new, gtd_new)]
            break
        bounds = (t + 0.01 * (t - prev[0]), t * 10)
        t, prev = _cubic_minimum(prev[0], prev[1], prev[3], t, f_new, gtd_new, bounds), (t, f_new, g_new, gtd_new)
        f_new, g_new = phi(t)
        evals, ls_iter, gtd_new = evals + 1, ls_iter + 1, g_new.dot(d)
    if ls_iter == max_ls:
        bracket = [(0, f, g, gtd), (t, f_new, g_new, gtd_new)]
    low, high = (0, 1) if bracket[0][1] <= bracket[-1][1] else (1, 0)
    insufficient_progress = False
    while not done and ls_iter < max_ls:
        (t0, f0, _, gtd0), (t1, f1, _, gtd1) = bracket
        if abs(t1 - t0) * d_norm < tolerance_change:
            break
        t, insufficient_progress = _safeguarded(_cubic_minimum(t0, f0, gtd0, t1, f1, gtd1), min(t0, t1),
                                                max(t0, t1), insufficient_progress)
        f_new, g_new = phi(t)
        evals, ls_iter, gtd_new = evals + 1, ls_iter + 1, g_new.dot(d)
        if f_new > f + c1 * t * gtd or f_new >= bracket[low][1]:
            bracket[high] = (t, f_new, g_new, gtd_new)
            low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high][0] - bracket[low][0]) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = (t, f_new, g_new, gtd_new)
    t, f_new, g_new, _ = bracket[low]
    return f_new, g_new, t, evals


def _safeguarded(t, lo, hi, insufficient_progress: bool) -> tuple:
    """Keep an interpolated step at least a tenth of the bracket from its ends once it has been near one (or
    is outside): `(t, whether progress was insufficient)`."""
    eps = 0.1 * (hi - lo)
    if min(hi - t, t - lo) >= eps:
        return t, False
    if not (insufficient_progress or t >= hi or t <= lo):
        return t, True
    return (hi - eps if abs(t - hi) < abs(t - lo) else lo + eps), False
