"""A stateful random generator, as PyTorch's: `Generator`, the default generator, `manual_seed`, and the draws
`rand`, `randn`, `randint`, `rand_like`, `randn_like`, `bernoulli`, in-place `uniform_`, `normal_`, `bernoulli_`.

A generator's state is a key tensor (`aotjax.random`'s `u32[2]`) that every draw updates in place: the draw splits
it, keeps one half as the new state and samples from the other. So the state is ordinary mutated state to every
transform: eagerly it advances call by call; under `jit` and `aot` a generator the function reads is live state (read
at each call, written back, donated), so consecutive compiled calls draw different numbers without retracing and the
same seed gives the same numbers eagerly and compiled; in a `scan` body each iteration draws differently.

Under `vmap`, `randomness=` decides (PyTorch's meanings): `"error"` (the default) refuses a draw, `"same"` draws one
value for every example, `"different"` draws per example (the key folded with the example's index). Draws with
explicit keys (`aotjax.random`) are not governed by it: a batched key draws per example, an unbatched one the same.

>>> g = aotjax.Generator().manual_seed(0)
>>> a = aotjax.rand(2, generator=g)
>>> b = aotjax.rand(2, generator=g.manual_seed(0))
>>> bool((a == b).all())
True
"""
from __future__ import annotations

import jax
import numpy as np

from aotjax.core.interpreter import stack_of_this_thread
from aotjax.core.source_info import where
from aotjax.interpreters.batching import BatchTrace, example_index
from aotjax.ops.base.casts import convert
from aotjax.ops.base.frontend import to_dtype
from aotjax.ops.base.promotion import category, default_float_dtype, default_int_dtype
from aotjax.ops.creation.factories import factory
from aotjax.ops.random import keys as random
from aotjax.tensor import Tensor, method

__all__ = ["Generator", "default_generator", "manual_seed", "initial_seed", "seed", "get_rng_state", "set_rng_state",
           "rand", "randn", "randint", "rand_like", "randn_like", "bernoulli"]

DEFAULT_SEED = 67280421310721  # PyTorch's default generator's initial seed
_SEED_RANGE = "[-2**63, 2**64 - 1]"  # PyTorch's: a seed is a uint64, and a negative one wraps around


def _checked_seed(seed, op: str) -> int:
    """`seed` as PyTorch's `Generator.manual_seed` takes it: an int in [-2**63, 2**64 - 1] (numpy's ints too), kept
    as the uint64 PyTorch keeps (`initial_seed()` of -1 is 2**64 - 1)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise RuntimeError(f"{op}: manual_seed expected a long, but got {type(seed).__name__}{where()}; pass an int "
                           f"(aotjax.manual_seed converts its argument with int(), as torch.manual_seed)")
    if not -2 ** 63 <= seed < 2 ** 64:
        raise ValueError(f"{op}: Overflow when unpacking long long: the seed {seed} is outside {_SEED_RANGE}"
                         f"{where()}")
    return int(seed) % 2 ** 64


def _key_seed(seed: int) -> int:
    """The int64 a key is made from for the uint64 `seed` (so -1 and 2**64 - 1 give one stream, as in PyTorch)."""
    return seed - 2 ** 64 if seed >= 2 ** 63 else seed


class Generator:
    """A random generator whose state is a key tensor updated in place by each draw (`state`)."""

    def __init__(self, seed: int = DEFAULT_SEED):
        self._seed = _checked_seed(seed, "Generator")
        self._state: Tensor | None = None  # NOTE: made at the first use: `import aotjax` compiles nothing

    @property
    def state(self) -> Tensor:
        """The key tensor (`u32[2]`) each draw updates in place."""
        if self._state is None:  # NOTE: eagerly, even when first used inside a trace: the state outlives it
            seed = np.int64(_key_seed(self._seed)).astype(default_int_dtype())
            self._state = Tensor._wrap(jax.random.PRNGKey(seed))
        return self._state

    def manual_seed(self, seed: int) -> "Generator":
        """Reset the state to the one `seed` gives (in place: compiled functions reading it see the reset). `seed` is an
        int in [-2**63, 2**64 - 1]; a negative one is taken as the uint64 it wraps to, as PyTorch's.

        >>> aotjax.Generator().manual_seed(-1).initial_seed()
        18446744073709551615
        """
        self._seed = _checked_seed(seed, "Generator.manual_seed")
        self.state.copy_(random.key(_key_seed(self._seed)))
        return self

    def initial_seed(self) -> int:
        return self._seed

    def seed(self) -> int:
        """Reseed from a nondeterministic source; returns the seed."""
        return self.manual_seed(int(np.random.SeedSequence().entropy % (2 ** 63))).initial_seed()

    def get_state(self) -> Tensor:
        return self.state.clone()

    def set_state(self, state: Tensor) -> "Generator":
        self.state.copy_(state)
        return self

    def next_key(self, op: str) -> Tensor:
        """A key for one draw of `op`: the state is split, one half written back as the new state. Inside `vmap`
        the key follows the vmaps' `randomness` (see the module's docstring)."""
        new_state, key = random.split(self.state)
        self.state.copy_(new_state)
        for main in [m for m in stack_of_this_thread() if m.trace_type is BatchTrace]:
            mode = main.global_data.randomness
            if mode == "error":
                raise RuntimeError(
                    f"vmap: {op} draws from a random generator while vmap's randomness is 'error' (the default)"
                    f"{where()}; pass randomness='same' (one draw for every example) or 'different' (one per "
                    f"example) to vmap, draw outside vmap, or pass an explicit key (aotjax.random)")
            if mode == "different":
                key = random.fold_in(key, example_index(main))
        return key

    def __repr__(self) -> str:
        return f"Generator(seed={self._seed})"


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (`torch.manual_seed`): `seed` is anything `int()` converts (a float is truncated,
    as PyTorch's) to an int in [-2**63, 2**64 - 1].

    >>> aotjax.manual_seed(3.7).initial_seed()
    3
    """
    try:
        value = int(seed)
    except (TypeError, ValueError) as e:
        raise type(e)(f"manual_seed: {e}{where()}; the seed must be an integer in {_SEED_RANGE} (or what int() "
                      f"converts to one)") from None
    return default_generator.manual_seed(_checked_seed(value, "manual_seed"))


def initial_seed() -> int:
    return default_generator.initial_seed()


def seed() -> int:
    return default_generator.seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(state: Tensor) -> None:
    default_generator.set_state(state)


def _size(size: tuple) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


def draw_key(op: str, generator: Generator | None = None, key: Tensor | None = None) -> Tensor:
    """The key a draw of `op` uses: `key` if given (`aotjax.random`), else the next key of `generator` (default: the
    default generator, whose state the draw advances)."""
    return key if key is not None else (generator or default_generator).next_key(op)


def _float(dtype) -> np.dtype:
    return default_float_dtype() if dtype is None else dtype


@factory
def rand(*size, generator: Generator | None = None, dtype=None) -> Tensor:
    """Uniform samples in [0, 1) of shape `size` (`torch.rand`)."""
    return random.uniform(draw_key("rand", generator), _size(size), _float(dtype))


@factory
def randn(*size, generator: Generator | None = None, dtype=None) -> Tensor:
    """Standard normal samples of shape `size` (`torch.randn`)."""
    return random.normal(draw_key("randn", generator), _size(size), _float(dtype))


@factory
def randint(low: int = 0, high: int | None = None, size=None, *, generator: Generator | None = None,
            dtype=None) -> Tensor:
    """Integers uniform in [low, high) of shape `size`, as `torch.randint(low=0, high, size)` (the default int
    dtype unless `dtype`)."""
    if high is None and size is not None:  # NOTE: randint(high, size=size)
        low, high = 0, low
    elif size is None:  # NOTE: randint(high, size)
        low, high, size = 0, low, high
    if size is None or high is None:
        raise TypeError(f"randint: a size is required: randint(low, high, size) or randint(high, size){where()}")
    if isinstance(low, int) and isinstance(high, int) and not low < high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}{where()}")
    dt = default_int_dtype() if dtype is None else to_dtype(dtype, "randint")
    drawn = default_int_dtype() if category(dt) in (0, 2) else dt  # NOTE: torch's float (bool) randint: whole numbers
    return convert(random.randint(draw_key("randint", generator), _size((size,)), low, high, drawn), dt)


@factory
def rand_like(input: Tensor, *, generator: Generator | None = None, dtype=None) -> Tensor:
    return rand(*input.shape, generator=generator, dtype=input.dtype if dtype is None else dtype)


@factory
def randn_like(input: Tensor, *, generator: Generator | None = None, dtype=None) -> Tensor:
    return randn(*input.shape, generator=generator, dtype=input.dtype if dtype is None else dtype)


def bernoulli(input: Tensor, p=None, *, generator: Generator | None = None) -> Tensor:
    """0s and 1s of `input`'s dtype and shape, each 1 with the probability `input` holds there (or `p`)."""
    prob = input if p is None else p
    draw = random.bernoulli(draw_key("bernoulli", generator), prob, tuple(input.shape))
    return draw.to(input.dtype)


def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    """Fill `self` in place with uniform samples in [a, b)."""
    return self.copy_(random.uniform(draw_key("uniform_", generator), tuple(self.shape), self.dtype, a, b))


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    """Fill `self` in place with normal samples of `mean` and `std`."""
    return self.copy_(random.normal(draw_key("normal_", generator), tuple(self.shape), self.dtype) * std + mean)


def bernoulli_(self: Tensor, p=0.5, *, generator: Generator | None = None) -> Tensor:
    """Fill `self` in place with 0s and 1s, each 1 with probability `p`."""
    return self.copy_(random.bernoulli(draw_key("bernoulli_", generator), p, tuple(self.shape)).to(self.dtype))


method(uniform_)
method(normal_)
method(bernoulli_)
method(bernoulli)
