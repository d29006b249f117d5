"""KL divergences between distributions: `kl_divergence(p, q)` looks up the function that `register_kl` registered
for the pair of types, as `torch.distributions.kl`. Each family registers its pairs beside its definition
(`normal.py` holds KL(Normal ‖ Normal)).

>>> from aotjax.distributions import Normal, kl_divergence
>>> kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0))
tensor(0.5)
"""
from __future__ import annotations

import functools
import warnings
from typing import Callable

from aotjax.core.source_info import where
from aotjax.distributions.distribution import Distribution

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict[tuple[type, type], Callable] = {}  # (type_p, type_q) -> fn(p, q)


def register_kl(type_p: type, type_q: type) -> Callable:
    """A decorator registering `fn(p, q)` as KL(p ‖ q) for distributions of types `type_p` and `type_q`, and of
    their subclasses unless a more specific pair is registered.

    >>> from aotjax.distributions import Normal, register_kl
    >>> class Wide(Normal):
    ...     pass
    >>> @register_kl(Wide, Wide)
    ... def _kl_wide_wide(p, q):
    ...     return aotjax.zeros(p.batch_shape)
    >>> aotjax.distributions.kl_divergence(Wide(0.0, 1.0), Wide(1.0, 1.0))
    tensor(0.)
    """
    for name, t in (("type_p", type_p), ("type_q", type_q)):
        if not (isinstance(t, type) and issubclass(t, Distribution)):
            raise TypeError(f"register_kl: expected {name} to be a Distribution subclass but got {t!r}")

    def decorator(fn: Callable) -> Callable:
        _KL_REGISTRY[type_p, type_q] = fn
        _dispatch.cache_clear()
        return fn
    return decorator


@functools.lru_cache(maxsize=None)
def _dispatch(type_p: type, type_q: type) -> Callable | None:
    """The registered function of the most specific pair matching (type_p, type_q); None if no pair matches."""
    matches = [pair for pair in _KL_REGISTRY if issubclass(type_p, pair[0]) and issubclass(type_q, pair[1])]
    if not matches:
        return None
    depth = {pair: (type_p.__mro__.index(pair[0]), type_q.__mro__.index(pair[1])) for pair in matches}
    by_p = min(matches, key=lambda pair: depth[pair])
    by_q = min(matches, key=lambda pair: depth[pair][::-1])
    if _KL_REGISTRY[by_p] is not _KL_REGISTRY[by_q]:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}): both ({by_p[0].__name__}, "
                      f"{by_p[1].__name__}) and ({by_q[0].__name__}, {by_q[1].__name__}) match; using the first. "
                      f"Register the pair ({type_p.__name__}, {type_q.__name__}) to decide.", RuntimeWarning,
                      stacklevel=3)
    return _KL_REGISTRY[by_p]


def kl_divergence(p: Distribution, q: Distribution):
    """KL(p ‖ q) = E_p[log p(x) - log q(x)], per index of the batch shape (`torch.distributions.kl_divergence`)."""
    fn = _dispatch(type(p), type(q))
    if fn is None:
        P, Q = type(p).__name__, type(q).__name__
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {P} and q type {Q}{where()}; register "
                                  f"one with @aotjax.distributions.register_kl({P}, {Q}) over a function (p, q) -> "
                                  f"tensor")
    return fn(p, q)
