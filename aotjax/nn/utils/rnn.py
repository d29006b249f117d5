"""Variable-length sequences, as `torch.nn.utils.rnn`: padding (`pad_sequence`, `unpad_sequence`) and packing
(`PackedSequence`, `pack_padded_sequence`, `pad_packed_sequence`, `pack_sequence`, `unpack_sequence`).

A `PackedSequence` holds PyTorch's four fields with PyTorch's meanings: `data`, the steps of every sequence stacked in
time-major order (`(sum(lengths), *)`: step 0 of each sequence, longest first, then step 1 of those that have one, ...);
`batch_sizes`, a 1-d integer tensor of how many sequences have each step; `sorted_indices`, the batch order of
`data` (None when the input was sorted already) and `unsorted_indices`, its inverse.

The lengths set the shapes, so they are host values: a list, or an eager tensor (as PyTorch wants them on the CPU).
Inside a compiled function (`aotjax.jit`) these ops run on traced sequences as long as the lengths (and a packed
sequence's `batch_sizes`) are known when it is traced; a `PackedSequence` passed to a compiled function keeps its
`batch_sizes` out of the traced arguments (the function is traced again for new ones). Traced lengths raise an error.

>>> packed = aotjax.nn.utils.rnn.pack_sequence([aotjax.tensor([1, 2, 3]), aotjax.tensor([4, 5])])
>>> packed.data, packed.batch_sizes
(tensor([1, 4, 2, 5, 3]), tensor([2, 2, 1]))
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import numpy as np

from aotjax.core.errors import ConcretizationError, ShapeError
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import where
from aotjax.ops.base.data import tensor
from aotjax.ops.base.promotion import default_int_dtype
from aotjax.ops.creation.factories import full
from aotjax.ops.nn.resampling import constant_pad_nd
from aotjax.ops.shape.copies import cat, stack
from aotjax.tensor import Tensor

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "unpad_sequence",
           "pack_sequence", "unpack_sequence", "invert_permutation"]


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedFields):
    """A batch of sequences of different lengths, packed (see the module's docstring for its four fields). Made by
    `pack_padded_sequence` or `pack_sequence` rather than by hand; `PackedSequence(data, batch_sizes,
    sorted_indices)` fills in `unsorted_indices`, and `PackedSequence((data, batch_sizes))` is accepted as in PyTorch.
    `to()`, `cpu()`, `double()`, `float()`, ... convert `data` (the indices follow its device); `is_cuda` says
    whether it lives on a GPU.

    >>> p = aotjax.nn.utils.rnn.pack_sequence([aotjax.tensor([1.0]), aotjax.tensor([2.0, 3.0])], enforce_sorted=False)
    >>> p.data, p.batch_sizes, p.sorted_indices, p.unsorted_indices
    (tensor([2., 1., 3.]), tensor([2, 1]), tensor([1, 0]), tensor([1, 0]))
    """

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """`data.to(*args, **kwargs)` (`Tensor.to`), with the indices on its device; `self` if nothing changes. The
        dtype methods (`int()`, `float()`, ...) are `to(dtype=...)`.

        >>> p = aotjax.nn.utils.rnn.pack_sequence([aotjax.tensor([1.5, 2.5])])
        >>> p.int().data, p.to("cpu") is p
        (tensor([1, 2]), True)
        """
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        device = data.device
        moved = [None if i is None else i.to(device) for i in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, *moved)

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def cuda(self, device=None) -> PackedSequence:
        return self.to("cuda" if device is None else device)

    def double(self) -> PackedSequence:
        return self.to(dtype=np.float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=np.float32)

    def half(self) -> PackedSequence:
        return self.to(dtype=np.float16)

    def long(self) -> PackedSequence:
        return self.to(dtype=np.int64)

    def int(self) -> PackedSequence:
        return self.to(dtype=np.int32)

    def short(self) -> PackedSequence:
        return self.to(dtype=np.int16)

    def char(self) -> PackedSequence:
        return self.to(dtype=np.int8)

    def byte(self) -> PackedSequence:
        return self.to(dtype=np.uint8)

    @property
    def is_cuda(self) -> bool:
        """Whether `data` lives on a GPU."""
        device = self.data.device
        return device is not None and device.platform == "gpu"

    def is_pinned(self) -> bool:
        return False


# NOTE: a pytree whose `batch_sizes` is static (aux data): a compiled function taking a PackedSequence can read them
# (they set its shapes), and is traced again for other ones. Traced batch_sizes (packed under a transform) stay leaves.
_FIELD_KEYS = tuple(jax.tree_util.GetAttrKey(f) for f in _PackedFields._fields)


def _flatten_packed(p: PackedSequence):
    sizes = p.batch_sizes
    if isinstance(sizes, Tensor) and not isinstance(sizes, Tracer):
        static = (tuple(sizes.tolist()), sizes.dtype)
        keys = _FIELD_KEYS[:1] + _FIELD_KEYS[2:]
        return list(zip(keys, (p.data, p.sorted_indices, p.unsorted_indices))), static
    return list(zip(_FIELD_KEYS, p)), None


def _unflatten_packed(static, children) -> PackedSequence:
    if static is not None:
        data, sorted_indices, unsorted_indices = children
        children = (data, tensor(np.asarray(static[0], static[1])), sorted_indices, unsorted_indices)
    return tuple.__new__(PackedSequence, children)  # NOTE: the leaves may be any objects: no checks, no inversion


jax.tree_util.register_pytree_with_keys(PackedSequence, _flatten_packed, _unflatten_packed)


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a permutation (`out[permutation[i]] = i`); None stays None.

    >>> aotjax.nn.utils.rnn.invert_permutation(aotjax.tensor([2, 0, 1]))
    tensor([1, 2, 0])
    """
    if permutation is None:
        return None
    if isinstance(permutation, Tracer):
        return permutation.argsort()
    return _ints(np.argsort(permutation.numpy(), kind="stable"))


# -- host values ---------------------------------------------------------------------------------------------------
def _ints(values) -> Tensor:
    return tensor(np.asarray(values, default_int_dtype()))


_LENGTHS_FIX = ("Pass the lengths as a Python list or an eager tensor (computed outside the compiled function), or pad "
                "to a fixed length and mask instead of packing.")


def _host_ints(op: str, name: str, values, fix: str = _LENGTHS_FIX) -> np.ndarray:
    """`values` (a list, array or eager tensor) as a 1-d NumPy int64 array; an error for a traced tensor."""
    if isinstance(values, Tracer):
        raise ConcretizationError(
            f"{op}: `{name}` sets the shapes of the result, so it must be known when the function is traced, but it "
            f"is a traced tensor ({values.aval.str_short()}, traced by {type(values._trace).__name__}){where()}. "
            f"{fix}")
    array = np.asarray(values.numpy() if isinstance(values, Tensor) else values)
    if array.ndim != 1:
        raise RuntimeError(f"{op}: '{name}' argument should be a 1D CPU int64 tensor, but got a {array.ndim}D one "
                           f"(shape {list(array.shape)}){where()}")
    return array.astype(np.int64)


def _sort_lengths(op: str, lengths: np.ndarray, enforce_sorted: bool) -> np.ndarray | None:
    """The batch order that sorts `lengths` longest first (stable, as PyTorch's), or None when `enforce_sorted`
    (then they must be sorted already)."""
    if not enforce_sorted:
        return np.argsort(-lengths, kind="stable")
    if np.any(lengths[1:] > lengths[:-1]):
        raise RuntimeError(f"{op}: `lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                           f"You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                           f"sidestep this requirement if you do not need ONNX exportability.{where()}")
    return None


def _packing(op: str, lengths: np.ndarray, order: np.ndarray | None):
    """`(batch_sizes, steps, sequences)` of packing sequences of `lengths` in batch `order`: entry k of the packed
    data is step `steps[k]` of sequence `sequences[k]` (an index into the unsorted batch)."""
    if np.any(lengths <= 0):
        raise RuntimeError(f"{op}: Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           f"that is <= 0{where()}")
    sorted_lengths = lengths if order is None else lengths[order]
    steps, ranks = np.nonzero(sorted_lengths[None, :] > np.arange(sorted_lengths[0])[:, None])  # time-major
    batch_sizes = np.bincount(steps, minlength=sorted_lengths[0])
    return batch_sizes, steps, (ranks if order is None else order[ranks])


def _packed(data: Tensor, batch_sizes, order) -> PackedSequence:
    sorted_indices = None if order is None else _ints(order)
    return PackedSequence(data, _ints(batch_sizes), sorted_indices, invert_permutation(sorted_indices))


# -- packing and unpacking -----------------------------------------------------------------------------------------
def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch `input` (`(T, B, *)`, or `(B, T, *)` with `batch_first`) of sequences of `lengths`
    (host values: a list or an eager tensor) into a `PackedSequence`, for a recurrent layer to skip the padding.
    With `enforce_sorted` the lengths must be in decreasing order; otherwise the batch is sorted here and the
    order kept in `sorted_indices`. Differentiable in `input`.

    >>> x = aotjax.tensor([[1, 4], [2, 0], [3, 0]])
    >>> aotjax.nn.utils.rnn.pack_padded_sequence(x, [3, 1]).data
    tensor([1, 4, 2, 3])
    """
    op = "pack_padded_sequence"
    if input.ndim < 2:
        raise ShapeError(f"{op}: expected a padded batch of at least 2 dims ((T, B, *), or (B, T, *) with "
                         f"batch_first), got shape {list(input.shape)}{where()}")
    lengths = _host_ints(op, "lengths", lengths)
    order = _sort_lengths(op, lengths, enforce_sorted)
    time, batch = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
    if len(lengths) != batch:
        raise RuntimeError(f"{op}: Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                           f"(batch_size={batch}){where()}")
    if len(lengths) and lengths.max() > time:
        raise RuntimeError(f"{op}: a length ({lengths.max()}) is longer than the padded sequences ({time} steps, "
                           f"input of shape {list(input.shape)}{', batch_first' if batch_first else ''}){where()}")
    batch_sizes, steps, sequences = _packing(op, lengths, order)
    rows = sequences * time + steps if batch_first else steps * batch + sequences
    return _packed(input.flatten(0, 1).index_select(0, _ints(rows)), batch_sizes, order)


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences (`(L_i, *)` each) into a `PackedSequence`: `pack_padded_sequence` of their padded
    batch, without padding them first.

    >>> aotjax.nn.utils.rnn.pack_sequence([aotjax.tensor([1, 2]), aotjax.tensor([3])]).data
    tensor([1, 3, 2])
    """
    op = "pack_sequence"
    sequences = _sequences(op, sequences)
    lengths = np.asarray([s.shape[0] for s in sequences], np.int64)
    order = _sort_lengths(op, lengths, enforce_sorted)
    batch_sizes, steps, which = _packing(op, lengths, order)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return _packed(cat(sequences).index_select(0, _ints(starts[which] + steps)), batch_sizes, order)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """The padded batch of a `PackedSequence` (`(T, B, *)`, or `(B, T, *)` with `batch_first`; in the original batch
    order) and the sequences' lengths (a 1-d integer tensor): the inverse of `pack_padded_sequence`. Padding holds
    `padding_value`; `total_length` pads to that many steps (at least the longest sequence's). Differentiable in
    `sequence.data`.

    >>> packed = aotjax.nn.utils.rnn.pack_sequence([aotjax.tensor([1, 2, 3]), aotjax.tensor([4])])
    >>> aotjax.nn.utils.rnn.pad_packed_sequence(packed, batch_first=True, padding_value=-1)
    (tensor([[ 1,  2,  3],
            [ 4, -1, -1]]), tensor([3, 1]))
    """
    op = "pad_packed_sequence"
    batch_sizes = _host_ints(op, "batch_sizes", sequence.batch_sizes)
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"{op}: Expected total_length to be at least the length of the longest sequence in "
                             f"input, but got total_length={total_length} and max sequence length being "
                             f"{steps}{where()}")
        steps = total_length
    data, batch = sequence.data, int(batch_sizes[0]) if len(batch_sizes) else 0
    sizes = np.zeros(steps, np.int64)
    sizes[:len(batch_sizes)] = batch_sizes
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ranks = np.arange(batch)
    valid = ranks[None, :] < sizes[:, None]  # (T, B), in the sorted batch order
    rows = np.where(valid, starts[:, None] + ranks[None, :], data.shape[0])  # NOTE: row N is the padding row
    rows = rows.T if batch_first else rows
    padding = full((1, *data.shape[1:]), padding_value, dtype=data.dtype)
    padded = cat([data, padding]).index_select(0, _ints(rows.reshape(-1))).unflatten(0, rows.shape)
    lengths = valid.sum(0)
    unsorted = sequence.unsorted_indices
    if unsorted is None:
        return padded, _ints(lengths)
    padded = padded.index_select(0 if batch_first else 1, unsorted)
    if isinstance(unsorted, Tracer):
        return padded, _ints(lengths).index_select(0, unsorted)
    return padded, _ints(lengths[unsorted.numpy()])


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The sequences of a `PackedSequence`, as a list of tensors `(L_i, *)` in the original batch order: the inverse
    of `pack_sequence`.

    >>> packed = aotjax.nn.utils.rnn.pack_sequence([aotjax.tensor([1]), aotjax.tensor([2, 3])], enforce_sorted=False)
    >>> aotjax.nn.utils.rnn.unpack_sequence(packed)
    [tensor([1]), tensor([2, 3])]
    """
    if isinstance(packed_sequences.unsorted_indices, Tracer):  # NOTE: the list's shapes follow the batch order
        _host_ints("unpack_sequence", "unsorted_indices", packed_sequences.unsorted_indices,
                   "A PackedSequence passed to a compiled function has traced indices: pack it inside the function, "
                   "or unpack it outside.")
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


# -- padding and unpadding -----------------------------------------------------------------------------------------
def _sequences(op: str, sequences) -> list[Tensor]:
    """The sequences as a list (a tensor: its rows, as PyTorch iterates it), each at least 1-d, of one trailing
    shape."""
    sequences = list(sequences.unbind(0) if isinstance(sequences, Tensor) else sequences)
    if not sequences:
        raise RuntimeError(f"{op}: received an empty list of sequences{where()}")
    trailing = {tuple(s.shape[1:]) if s.ndim else None for s in sequences}
    if None in trailing or len(trailing) > 1:
        raise RuntimeError(f"{op}: every sequence must be a tensor (L_i, *) with the same trailing dims *, got shapes "
                           f"{[list(s.shape) for s in sequences]}{where()}")
    return sequences


def pad_sequence(sequences: Sequence[Tensor] | Tensor, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """The sequences (`(L_i, *)` each) padded with `padding_value` to the longest one's length and stacked: `(T, B,
    *)`, or `(B, T, *)` with `batch_first`. `padding_side='left'` puts the padding before each sequence. The result
    has the first sequence's dtype.

    >>> aotjax.nn.utils.rnn.pad_sequence([aotjax.tensor([1, 2]), aotjax.tensor([3])], batch_first=True)
    tensor([[1, 2],
            [3, 0]])
    >>> aotjax.nn.utils.rnn.pad_sequence([aotjax.tensor([1, 2]), aotjax.tensor([3])], True, -1, "left")
    tensor([[ 1,  2],
            [-1,  3]])
    """
    op = "pad_sequence"
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"{op}: Expected padding_side to be one of left or right, but got {padding_side}."
                           f"{where()}")
    sequences = _sequences(op, sequences)
    longest, dtype = max(s.shape[0] for s in sequences), sequences[0].dtype
    trailing = [0, 0] * (sequences[0].ndim - 1)

    def padded(s: Tensor) -> Tensor:
        short = longest - s.shape[0]
        return constant_pad_nd(s.to(dtype), trailing + ([0, short] if padding_side == "right" else [short, 0]),
                               padding_value)

    return stack([padded(s) for s in sequences], 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list[Tensor]:
    """The sequences of a padded batch (`(T, B, *)`, or `(B, T, *)` with `batch_first`), each cut to its length
    (`lengths`: host values, a list or an eager tensor), each a new tensor: the inverse of `pad_sequence`.

    >>> padded = aotjax.tensor([[1, 2], [3, 0]])
    >>> aotjax.nn.utils.rnn.unpad_sequence(padded, [2, 1], batch_first=True)
    [tensor([1, 2]), tensor([3])]
    """
    lengths = _host_ints("unpad_sequence", "lengths", lengths)
    batch = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [batch[i, :length].clone() for i, length in enumerate(lengths.tolist())]  # NOTE: copies, as torch's
