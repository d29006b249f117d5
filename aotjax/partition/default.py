"""`default_partition`: the forward saves exactly the values the backward reads."""
from __future__ import annotations

from aotjax.partition.split import JointInfo, Partitioned, needed_by_backward, split


def default_partition(joint: JointInfo) -> Partitioned:
    """Save what the backward reads (the residuals of the linearization), recompute nothing but
    constants and what a checkpoint region asks for.

    >>> from aotjax.partition import default_partition
    >>> lowered = aotjax.aot(lambda x: x.cos().cos().sum(), partition=default_partition).lower(aotjax.ones(3))
    >>> [r.why for r in lowered.residuals]
    ['sin at <doctest ...>:1 (<lambda>)', 'sin at <doctest ...>:1 (<lambda>)']
    """
    return split(joint, needed_by_backward(joint))
