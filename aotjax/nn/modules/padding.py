"""The padding layers of `F.pad`, as `torch.nn`'s: `ConstantPad1d/2d/3d` (a `value`), `ZeroPad1d/3d` (`ZeroPad2d` is in
`pooling.py`), `ReflectionPad1d/2d/3d`, `ReplicationPad1d/2d/3d` and `CircularPad1d/2d/3d`. `padding` is an int (the
same on every side) or a tuple of `2 * d` ints, the last dim's `(left, right)` first, as `F.pad` takes it."""
from __future__ import annotations

from aotjax.core.source_info import where
from aotjax.nn.module import Module
from aotjax.ops.nn.resampling import pad

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad3d", "ReflectionPad1d",
           "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
           "CircularPad1d", "CircularPad2d", "CircularPad3d"]


class _PadNd(Module):
    _mode, _dims = "constant", 1

    def __init__(self, padding, value: float = 0.0):
        super().__init__()
        self.padding = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * (2 * self._dims)
        if len(self.padding) != 2 * self._dims:
            raise ValueError(f"{type(self).__name__}: expected padding to be an int or {2 * self._dims} ints, got "
                             f"{padding!r}{where()}")
        if self._mode == "constant":
            self.value = value

    def forward(self, input):
        if self._mode == "constant":
            return pad(input, self.padding, "constant", self.value)
        return pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}" if self._mode == "constant" else f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float):
        super().__init__(padding, value)


class _ZeroPadNd(_PadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dim with `value`, as `torch.nn.ConstantPad1d`.

    >>> aotjax.nn.ConstantPad1d((1, 2), 9.0)(aotjax.ones(1, 2))
    tensor([[9., 1., 1., 9., 9.]])
    """

    _mode, _dims = "constant", 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two dims with `value`, as `torch.nn.ConstantPad2d`.

    >>> aotjax.nn.ConstantPad2d(1, 0.5)(aotjax.ones(1, 1, 2, 2)).shape
    (1, 1, 4, 4)
    """

    _mode, _dims = "constant", 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last three dims with `value`, as `torch.nn.ConstantPad3d`.

    >>> aotjax.nn.ConstantPad3d(1, 0.5)(aotjax.ones(1, 1, 2, 2, 2)).shape
    (1, 1, 4, 4, 4)
    """

    _mode, _dims = "constant", 3


class ZeroPad1d(_ZeroPadNd):
    """Pads the last dim with zeros, as `torch.nn.ZeroPad1d`.

    >>> aotjax.nn.ZeroPad1d((0, 1))(aotjax.ones(1, 2))
    tensor([[1., 1., 0.]])
    """

    _mode, _dims = "constant", 1


class ZeroPad3d(_ZeroPadNd):
    """Pads the last three dims with zeros, as `torch.nn.ZeroPad3d`.

    >>> aotjax.nn.ZeroPad3d(1)(aotjax.ones(1, 1, 2, 2, 2)).shape
    (1, 1, 4, 4, 4)
    """

    _mode, _dims = "constant", 3


class ReflectionPad1d(_PadNd):
    """Pads the last dim reflected at its edges (the edge not repeated), as `torch.nn.ReflectionPad1d`.

    >>> aotjax.nn.ReflectionPad1d(2)(aotjax.arange(3.0).reshape(1, 3))
    tensor([[2., 1., 0., 1., 2., 1., 0.]])
    """

    _mode, _dims = "reflect", 1


class ReflectionPad2d(_PadNd):
    """Pads the last two dims reflected at its edges (the edge not repeated), as `torch.nn.ReflectionPad2d`.

    >>> aotjax.nn.ReflectionPad2d(1)(aotjax.ones(1, 1, 2, 2)).shape
    (1, 1, 4, 4)
    """

    _mode, _dims = "reflect", 2


class ReflectionPad3d(_PadNd):
    """Pads the last three dims reflected at its edges (the edge not repeated), as `torch.nn.ReflectionPad3d`.

    >>> aotjax.nn.ReflectionPad3d(1)(aotjax.ones(1, 1, 2, 2, 2)).shape
    (1, 1, 4, 4, 4)
    """

    _mode, _dims = "reflect", 3


class ReplicationPad1d(_PadNd):
    """Pads the last dim with copies of the edge values, as `torch.nn.ReplicationPad1d`.

    >>> aotjax.nn.ReplicationPad1d((2, 1))(aotjax.arange(3.0).reshape(1, 3))
    tensor([[0., 0., 0., 1., 2., 2.]])
    """

    _mode, _dims = "replicate", 1


class ReplicationPad2d(_PadNd):
    """Pads the last two dims with copies of the edge values, as `torch.nn.ReplicationPad2d`.

    >>> aotjax.nn.ReplicationPad2d(1)(aotjax.ones(1, 1, 2, 2)).shape
    (1, 1, 4, 4)
    """

    _mode, _dims = "replicate", 2


class ReplicationPad3d(_PadNd):
    """Pads the last three dims with copies of the edge values, as `torch.nn.ReplicationPad3d`.

    >>> aotjax.nn.ReplicationPad3d(1)(aotjax.ones(1, 1, 2, 2, 2)).shape
    (1, 1, 4, 4, 4)
    """

    _mode, _dims = "replicate", 3


class CircularPad1d(_PadNd):
    """Pads the last dim circularly (wrapping around), as `torch.nn.CircularPad1d`.

    >>> aotjax.nn.CircularPad1d((1, 2))(aotjax.arange(3.0).reshape(1, 3))
    tensor([[2., 0., 1., 2., 0., 1.]])
    """

    _mode, _dims = "circular", 1


class CircularPad2d(_PadNd):
    """Pads the last two dims circularly (wrapping around), as `torch.nn.CircularPad2d`.

    >>> aotjax.nn.CircularPad2d(1)(aotjax.ones(1, 1, 2, 2)).shape
    (1, 1, 4, 4)
    """

    _mode, _dims = "circular", 2


class CircularPad3d(_PadNd):
    """Pads the last three dims circularly (wrapping around), as `torch.nn.CircularPad3d`.

    >>> aotjax.nn.CircularPad3d(1)(aotjax.ones(1, 1, 2, 2, 2)).shape
    (1, 1, 4, 4, 4)
    """

    _mode, _dims = "circular", 3
