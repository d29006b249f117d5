"""Optimizers, two ways (see README "Optimizers"):

- torch-style classes that update parameters in place, with state made in the constructor and hyperparameters held
  as 0-d Tensors, traceable whole by `aotjax.jit`: `SGD`, `ASGD`, `Adam`, `AdamW`, `Adamax`, `NAdam`, `RAdam`
  (`aotjax.optim.optimizers`), `RMSprop`, `Adagrad`, `Adadelta`, `Rprop` (`aotjax.optim.adaptive`), and `LBFGS`
  (`aotjax.optim.lbfgs`, eager only);
- pure transforms `sgd`, `adam`, `adamw` with optax's `GradientTransformation` protocol
  (`aotjax.optim.transforms`), on pytrees of jax arrays or of aotjax Tensors, with `apply_updates`.

Both share one update function per algorithm (`aotjax.optim.updates`).
"""
from aotjax.optim import lr_scheduler
from aotjax.optim.adaptive import Adadelta, Adagrad, RMSprop, Rprop
from aotjax.optim.lbfgs import LBFGS
from aotjax.optim.optimizer import Optimizer, ParamGroup
from aotjax.optim.optimizers import ASGD, SGD, Adam, Adamax, AdamW, NAdam, RAdam
from aotjax.optim.transforms import AdamState, GradientTransformation, SgdState, adam, adamw, apply_updates, sgd

__all__ = ["Optimizer", "ParamGroup", "SGD", "Adam", "AdamW", "ASGD", "Adamax", "NAdam", "RAdam", "RMSprop",
           "Adagrad", "Adadelta", "Rprop", "LBFGS", "GradientTransformation", "SgdState", "AdamState",
           "sgd", "adam", "adamw", "apply_updates", "lr_scheduler"]
