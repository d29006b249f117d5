"""Optimizers, two ways (see README "Optimizers"):

- torch-style classes `SGD`, `Adam`, `AdamW` (`aotjax.optim.optimizers`) that update parameters in place, with
  state made in the constructor and hyperparameters held as 0-d Tensors, traceable whole by `aotjax.jit`;
- pure transforms `sgd`, `adam`, `adamw` with optax's `GradientTransformation` protocol
  (`aotjax.optim.transforms`), on pytrees of jax arrays or of aotjax Tensors, with `apply_updates`.

Both share one update function per algorithm (`aotjax.optim.updates`).
"""
from aotjax.optim.optimizer import Optimizer, ParamGroup
from aotjax.optim.optimizers import SGD, Adam, AdamW
from aotjax.optim.transforms import AdamState, GradientTransformation, SgdState, adam, adamw, apply_updates, sgd

__all__ = ["Optimizer", "ParamGroup", "SGD", "Adam", "AdamW", "GradientTransformation", "SgdState", "AdamState",
           "sgd", "adam", "adamw", "apply_updates"]
