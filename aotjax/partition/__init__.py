"""Partitioners: how a joint forward+backward program is split into a forward and a backward program.

A partitioner is any function `partition(joint: JointInfo) -> Partitioned` (see `split`): it decides
which forward values the forward saves for the backward; `split(joint, saved)` builds the two
programs from that choice.
"""
from aotjax.partition.default import default_partition
from aotjax.partition.min_cut import min_cut_partition
from aotjax.partition.split import JointInfo, Partitioned, split

__all__ = ["default_partition", "min_cut_partition", "JointInfo", "Partitioned", "split"]
