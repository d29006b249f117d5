"""Probabilities and logits, the two parameterizations of Categorical and Bernoulli, each computed from the other
(as `torch.distributions.utils`: a multi-class logit is a log-probability up to a constant, a binary one the
log-odds).

>>> from aotjax.distributions.logits import logits_to_probs
>>> logits_to_probs(aotjax.tensor([0.0, 0.0]))
tensor([0.5, 0.5])
"""
from __future__ import annotations

from aotjax import ops
from aotjax.dtypes import finfo
from aotjax.tensor import Tensor

__all__ = ["clamp_probs", "logits_to_probs", "probs_to_logits"]


def clamp_probs(probs: Tensor) -> Tensor:
    """`probs` clamped into [eps, 1 - eps] of its dtype, so that their logs and log-odds are finite."""
    eps = finfo(probs.dtype).eps  # NOTE: aotjax's: NumPy's refuses bfloat16
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities from logits: the sigmoid of log-odds (`is_binary`), else the softmax over the last dim."""
    return ops.sigmoid(logits) if is_binary else ops.softmax(logits, dim=-1)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Logits from probabilities (clamped first): the log-odds (`is_binary`), else the logs."""
    p = clamp_probs(probs)
    return p.log() - (-p).log1p() if is_binary else p.log()
