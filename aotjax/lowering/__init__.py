"""Lowering: jaxpr -> plain jax function -> XLA executable."""
from aotjax.lowering.rules import lowering_rule, lowering_rules, register_lowering
from aotjax.lowering.to_jax import Compiled, check_lowerable, compile, eval_jaxpr_jax, to_jax

__all__ = ["lowering_rule", "lowering_rules", "register_lowering", "Compiled", "check_lowerable", "compile",
           "eval_jaxpr_jax", "to_jax"]
