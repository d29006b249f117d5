"""Lowering: jaxpr -> plain jax function -> XLA executable."""
from aotjax.lowering.rules import lowering_rule, lowering_rules, register_lowering
