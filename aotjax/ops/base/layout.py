"""PyTorch's output layouts: the strides PyTorch gives the result of a functional op (metadata only).

XLA has no strides, but each Tensor records the ones PyTorch would give it, so that later view-or-copy
decisions (`reshape`, `flatten`, `contiguous`, `view`) match PyTorch's. A functional primitive whose
result keeps its operands' layout declares a `Primitive.layout_rule`; every interpreter applies it where
it makes the result (`aotjax.tensor.record_layout`), so the layout is the same under all of them.

- `elementwise_layout` (set by the `elementwise` combinator): PyTorch's TensorIterator. All operands
  contiguous: contiguous. All of one shape, non-overlapping and dense, with equal strides: those strides.
  Otherwise the dims are ordered by the operands' strides (operands in order; broadcast dims, of stride
  0, are ignored; equal strides put the smaller dim inner) and the result is dense in that order. A 0-d
  operand (a Python scalar is one) never decides the order, but rules out the equal-strides shortcut.
- `tensor_layout`: the same over the operands that are not 0-d, for ops whose PyTorch overloads take
  their scalars as numbers (`clamp(x, 0, 1)`, `lerp(a, b, 0.5)`; a 0-d tensor counts as a number here).
- `preserve_layout` (`clone`, `to`, `*_like`: PyTorch's `preserve_format`): a non-overlapping, dense
  operand keeps its strides; any other is made dense in its memory order.

>>> x = aotjax.zeros(2, 3).t()
>>> (x * 2).stride(), (x + aotjax.zeros(3, 2)).stride(), (aotjax.zeros(3, 2) + x).stride()
((1, 3), (1, 3), (2, 1))
"""
from __future__ import annotations

from typing import Sequence

from aotjax.core.source_info import where
from aotjax.tensor import contiguous_strides

__all__ = ["is_contiguous", "is_non_overlapping_and_dense", "infer_dense_strides", "tensor_iterator_strides",
           "elementwise_layout", "tensor_layout", "preserve_layout", "format_name", "format_strides",
           "is_contiguous_in", "suggest_format"]

Shape = tuple[int, ...]


# -- predicates (PyTorch's definitions: c10/core/Contiguity.h) ----------------------------------------
def is_contiguous(shape: Shape, strides: Shape) -> bool:
    """Row-major and dense; size-1 dims may have any stride, and an empty tensor is contiguous."""
    if 0 in shape:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def _is_channels_last_contiguous(shape: Shape, strides: Shape) -> bool:
    """A 4-d tensor dense in NHWC order (PyTorch's `is_contiguous(memory_format=torch.channels_last)`)."""
    return is_contiguous_in("channels_last", shape, strides)


def is_non_overlapping_and_dense(shape: Shape, strides: Shape) -> bool:
    """Whether a tensor of `shape` and `strides` covers a gap-free block of memory exactly once, in some order."""
    if is_contiguous(shape, strides) or _is_channels_last_contiguous(shape, strides):
        return True
    expected = 1
    for d in sorted((d for d in range(len(shape)) if shape[d] >= 2), key=lambda d: strides[d]):
        if strides[d] != expected:
            return False
        expected *= shape[d]
    return True


# -- memory order -----------------------------------------------------------------------------------
def _memory_order(shape: Shape, operand_strides: Sequence[Shape]) -> list[int]:
    """The dims of `shape`, innermost first, by PyTorch's insertion sort (TensorIterator's
    `reorder_dimensions`): dim a goes inside dim b at the first operand whose strides on them differ and
    are both nonzero; at equal strides the smaller dim goes inside; with no operand deciding, the
    row-major order stays."""
    def should_swap(d0: int, d1: int) -> int:  # 1: d1 goes inside d0
        for strides in operand_strides:
            s0, s1 = strides[d0], strides[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return 1 if s0 > s1 else -1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    order = list(range(len(shape) - 1, -1, -1))
    for i in range(1, len(order)):
        j = i
        for k in range(i - 1, -1, -1):
            c = should_swap(order[k], order[j])
            if c > 0:
                order[k], order[j] = order[j], order[k]
                j = k
            elif c < 0:
                break
    return order


def _dense_in_order(shape: Shape, order: list[int], empty_dims_as_one: bool) -> Shape:
    """Strides that pack `shape` densely, dims `order` innermost first."""
    strides, acc = [0] * len(shape), 1
    for d in order:
        strides[d] = acc
        acc *= max(shape[d], 1) if empty_dims_as_one else shape[d]
    return tuple(strides)


def infer_dense_strides(shape: Shape, strides: Shape) -> Shape:
    """Dense strides that keep the memory order of `strides` (PyTorch's `infer_dense_strides`)."""
    return _dense_in_order(shape, _memory_order(shape, [strides]), empty_dims_as_one=True)


# -- the rules ---------------------------------------------------------------------------------------
def tensor_iterator_strides(shapes: Sequence[Shape], strides: Sequence[Shape], shape: Shape) -> Shape:
    """The strides PyTorch's TensorIterator gives the result, of shape `shape`, of an elementwise op on
    operands of `shapes` and `strides` (broadcast to `shape`; a 0-d operand is a scalar).

    >>> tensor_iterator_strides([(3, 2), ()], [(1, 3), ()], (3, 2))   # x.t() * 2
    (1, 3)
    """
    if not shape:
        return ()
    if all(s == shape for s in shapes):
        if all(is_contiguous(s, st) for s, st in zip(shapes, strides)):
            return contiguous_strides(shape)
        if all(_is_channels_last_contiguous(s, st) for s, st in zip(shapes, strides)):
            n, c, h, w = shape
            return (h * w * c, 1, w * c, c)
        if all(st == strides[0] for st in strides) and is_non_overlapping_and_dense(shape, strides[0]):
            return tuple(strides[0])
    operand_strides = [_broadcast_strides(s, st, shape) for s, st in zip(shapes, strides) if s]
    order = _memory_order(shape, operand_strides)
    if order == list(range(len(shape) - 1, -1, -1)):
        return contiguous_strides(shape)
    return _dense_in_order(shape, order, empty_dims_as_one=False)


def _broadcast_strides(shape: Shape, strides: Shape, out_shape: Shape) -> list[int]:
    """An operand's strides over the dims of `out_shape`: 0 on the dims it is broadcast along."""
    lead = len(out_shape) - len(shape)
    return [0] * lead + [0 if size == 1 and n != 1 else stride
                         for size, stride, n in zip(shape, strides, out_shape[lead:])]


def _layouts(operands) -> tuple[list, list] | None:
    """The operands' shapes and strides, or None when every one is contiguous (then so is the result)."""
    strided = [getattr(x, "_strides", None) for x in operands]
    if all(s is None for s in strided):
        return None
    shapes = [tuple(getattr(x, "shape", ())) for x in operands]
    return shapes, [contiguous_strides(sh) if st is None else st for sh, st in zip(shapes, strided)]


def elementwise_layout(operands, shape: Shape, /, **params) -> Shape | None:
    """The `LayoutRule` of elementwise primitives: `tensor_iterator_strides` of the operands."""
    layouts = _layouts(operands)
    return None if layouts is None else tensor_iterator_strides(*layouts, shape)


def tensor_layout(operands, shape: Shape, /, **params) -> Shape | None:
    """As `elementwise_layout`, over the operands that are not 0-d (scalars PyTorch takes as numbers)."""
    return elementwise_layout([x for x in operands if getattr(x, "shape", ())] or operands, shape)


def preserve_layout(operands, shape: Shape, /, **params) -> Shape | None:
    """The `LayoutRule` of `preserve_format` (`clone`, `to`): operand 0's strides if it is non-overlapping
    and dense, else dense strides in its memory order."""
    strides = getattr(operands[0], "_strides", None)
    if strides is None:
        return None
    return strides if is_non_overlapping_and_dense(shape, strides) else infer_dense_strides(shape, strides)


# -- memory formats (`memory_format=`) ----------------------------------------------------------------
_FORMATS = {"contiguous_format": "contiguous", "preserve_format": "preserve", "channels_last": "channels_last",
            "channels_last_3d": "channels_last_3d", "contiguous": "contiguous", "preserve": "preserve"}
_CHANNELS_LAST_RANK = {"channels_last": 4, "channels_last_3d": 5}


def format_name(memory_format, op: str) -> str:
    """`"contiguous"`, `"preserve"`, `"channels_last"` or `"channels_last_3d"` for a memory format: aotjax's
    (`aotjax.channels_last`), torch's (`torch.channels_last`, read by name) or its name as a string.

    >>> format_name(aotjax.channels_last, "clone"), format_name("contiguous_format", "clone")
    ('channels_last', 'contiguous')
    """
    name = getattr(memory_format, "name", None) or str(memory_format).removeprefix("torch.")
    fmt = _FORMATS.get(name)
    if fmt is None:
        raise ValueError(f"{op}: unknown memory_format {memory_format!r}{where()}; use aotjax.contiguous_format, "
                         f"preserve_format, channels_last or channels_last_3d")
    return fmt


def _channels_last_strides(shape: Shape) -> Shape:
    """NHWC (4-d) or NDHWC (5-d) order: channels innermost, then the spatial dims, then the batch."""
    order = [1] + list(range(len(shape) - 1, 1, -1)) + [0]
    return _dense_in_order(shape, order, empty_dims_as_one=False)  # NOTE: as torch's get_channels_last_strides


def format_strides(fmt: str, shape: Shape, like=None, op: str = "") -> Shape | None:
    """The strides a result of `shape` gets in memory format `fmt` (a `format_name`): for `"preserve"`, those
    of `like` (`preserve_layout`); None means contiguous. A channels-last format needs a tensor of its rank.

    >>> format_strides("channels_last", (2, 3, 4, 5))
    (60, 1, 15, 3)
    """
    if fmt == "preserve":
        return None if like is None else preserve_layout([like], shape)
    if fmt == "contiguous":
        return None
    rank = _CHANNELS_LAST_RANK[fmt]
    if len(shape) != rank:
        raise ValueError(f"{op}: memory_format={fmt} needs a {rank}-d tensor, got shape {list(shape)}{where()}; "
                         f"use contiguous_format for other ranks")
    return _channels_last_strides(shape)


def is_contiguous_in(fmt: str, shape: Shape, strides: Shape) -> bool:
    """Whether a tensor of `shape` and `strides` is contiguous in memory format `fmt` (PyTorch's
    `is_contiguous(memory_format=...)`: size-1 dims may have any stride; another rank is never channels-last).

    >>> is_contiguous_in("channels_last", (1, 3, 2, 2), (12, 1, 6, 3))
    True
    """
    if fmt == "contiguous":
        return is_contiguous(shape, strides)
    if len(shape) != _CHANNELS_LAST_RANK.get(fmt, -1):
        return False
    expected = 1
    for d in [1] + list(range(len(shape) - 1, 1, -1)) + [0]:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def suggest_format(shape: Shape, strides: Shape) -> str:
    """The memory format PyTorch reads from strides (`suggest_memory_format`): channels-last when a 4-d (5-d)
    tensor's strides grow from channels through the spatial dims to the batch, with PyTorch's tie-breaks toward
    contiguous for ambiguous size-1 dims; else `"contiguous"`.

    >>> suggest_format((2, 3, 4, 5), (60, 1, 15, 3)), suggest_format((2, 3, 4, 5), (60, 1, 5, 20))
    ('channels_last', 'contiguous')
    """
    if len(shape) not in (4, 5) or strides[1] == 0:
        return "contiguous"
    smallest = 0
    for d in [1] + list(range(len(shape) - 1, 1, -1)) + [0]:
        if shape[d] == 0 or strides[d] < smallest or (d == 0 and smallest == strides[1]):
            return "contiguous"
        smallest = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return "channels_last" if len(shape) == 4 else "channels_last_3d"
