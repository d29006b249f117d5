"""`GradScaler`: dynamic loss scaling for float16 training, with torch's algorithm and API.

`scale(loss)` multiplies the loss by the scale, so the backward's float16 gradients do not underflow;
`unscale_(opt)` divides the gradients back in place and notes whether any is inf or NaN; `step(opt)` steps the
optimizer unless one was; `update()` halves the scale after an overflow (`backoff_factor`) and doubles it after
`growth_interval` clean steps (`growth_factor`). The scale and the count of clean steps are 0-d tensors updated in
place, so a training step compiled whole with `aotjax.jit` carries them as state. Eagerly a skipped step is decided
on the host, as torch decides it; inside a compiled step it is data: the step runs and every parameter and
optimizer state tensor takes back its value from before where a gradient overflowed (no host synchronisation).
"""
from __future__ import annotations

import jax

from aotjax.core.interpreter import Tracer, grad_mode
from aotjax.core.source_info import where
from aotjax.ops import full, isfinite, logical_not
from aotjax.ops import where as select
from aotjax.tensor import Tensor

__all__ = ["GradScaler"]

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    """Scale the loss, unscale the gradients, skip overflowing steps, adapt the scale (torch's `GradScaler`).

    >>> w = aotjax.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = aotjax.optim.SGD([w], lr=0.1)
    >>> scaler = aotjax.amp.GradScaler("cpu", init_scale=1024.0)
    >>> scaler.scale((w * w).sum()).backward()
    >>> scaler.step(opt); scaler.update()
    >>> w, scaler.get_scale()
    (tensor([0.8, 1.6], requires_grad=True), 1024.0)
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self._device = device
        self._enabled = bool(enabled)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._scale = full((), float(init_scale))
        self._growth_tracker = full((), 0.0)  # NOTE: a float count: one dtype for the `where`s of `update`
        self._per_optimizer: dict = {}  # id(optimizer) -> {"stage": ..., "found_inf": 0-d tensor}

    # -- scaling ----------------------------------------------------------------------------------------------
    def scale(self, outputs):
        """`outputs` (a tensor, or a list/tuple of them, nested) times the scale (as they are when disabled)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer) -> None:
        """Divide `optimizer`'s gradients by the scale, in place, and note whether one is inf or NaN."""
        if not self._enabled:
            return
        state = self._state_of(optimizer)
        if state["stage"] is _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = 1.0 / self._scale
        found = full((), 0.0)
        with grad_mode(False):
            for p in _params(optimizer):
                g = p.grad
                if g is None:
                    continue
                found = found + logical_not(isfinite(g)).any().float()
                g.mul_(inv_scale.to(g.dtype))
        state["found_inf"], state["stage"] = found, _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """`optimizer.step(*args, **kwargs)` on the unscaled gradients (unscaling them first if `unscale_` was not
        called), unless one of them is inf or NaN; returns what the step returns (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state_of(optimizer)
        if state["stage"] is _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _READY:
            self.unscale_(optimizer)
        found = state["found_inf"]
        state["stage"] = _STEPPED
        if not isinstance(found, Tracer):  # NOTE: eagerly, decided on the host, as torch's
            return None if float(found) else optimizer.step(*args, **kwargs)
        tensors = _step_state(optimizer)  # NOTE: traced: step, then undo where a gradient overflowed
        before = [t.detach().clone() for t in tensors]
        out = optimizer.step(*args, **kwargs)
        overflowed = found > 0
        with grad_mode(False):
            for t, old in zip(tensors, before, strict=True):
                t.copy_(select(overflowed, old, t))
        return out

    def update(self, new_scale=None) -> None:
        """Adapt the scale after this iteration's steps (or set it to `new_scale`, a float or a 0-d tensor)."""
        if not self._enabled:
            return
        with grad_mode(False):
            if new_scale is not None:
                self._scale.fill_(float(new_scale) if not isinstance(new_scale, Tensor) else new_scale.item())
            else:
                found = [s["found_inf"] for s in self._per_optimizer.values() if s["found_inf"] is not None]
                if not found:
                    raise RuntimeError("No inf checks were recorded prior to update.")
                overflowed = sum(found[1:], found[0]) > 0
                clean = self._growth_tracker + 1.0
                grow = clean >= float(self._growth_interval)
                scale = self._scale
                grown = select(grow, scale * self._growth_factor, scale)
                grown = select(isfinite(grown), grown, scale)  # NOTE: never grows to inf, as torch's
                self._scale.copy_(select(overflowed, scale * self._backoff_factor, grown))
                self._growth_tracker.copy_(select(overflowed | grow, full((), 0.0), clean))
        self._per_optimizer.clear()

    # -- reading and setting ---------------------------------------------------------------------------------
    def get_scale(self) -> float:
        """The scale as a Python float (1.0 when disabled)."""
        return float(self._scale) if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        """torch's keys: `scale`, `growth_factor`, `backoff_factor`, `growth_interval`, `_growth_tracker`."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": int(float(self._growth_tracker))}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        with grad_mode(False):
            self._scale.fill_(float(state_dict["scale"]))
            self._growth_tracker.fill_(float(state_dict["_growth_tracker"]))
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])

    def _state_of(self, optimizer) -> dict:
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"GradScaler: {type(optimizer).__name__} is not an optimizer{where()}")
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": None})


def _params(optimizer) -> list:
    return [p for group in optimizer.param_groups for p in group["params"]]


def _step_state(optimizer) -> list:
    """The tensors `optimizer.step()` writes: its parameters and the tensors of its state."""
    tensors = list(_params(optimizer))
    seen = {id(t) for t in tensors}
    for leaf in jax.tree_util.tree_leaves(list(getattr(optimizer, "state", {}).values())):
        if isinstance(leaf, Tensor) and id(leaf) not in seen:
            seen.add(id(leaf))
            tensors.append(leaf)
    return tensors
