"""Lowering: jaxpr -> plain jax function -> XLA executable. The lowering rule table itself lives in the
interpreter layer (`aotjax.interpreters.lowering`); its names are re-exported here."""
from aotjax.interpreters.lowering import LoweringRule, eval_jaxpr_jax, lowering_rule, lowering_rules, register_lowering
from aotjax.lowering.to_jax import Compiled, check_lowerable, compile, to_jax

__all__ = ["LoweringRule", "lowering_rule", "lowering_rules", "register_lowering", "Compiled", "check_lowerable",
           "compile", "eval_jaxpr_jax", "to_jax"]
