"""`torch.testing.assert_close`, as tests written for torch call it: tensors (and numbers, sequences and mappings of
them) compared elementwise with `|actual - expected| <= atol + rtol * |expected|`, the tolerances by dtype as
torch's defaults, after checking shape and (with `check_dtype`) dtype; an `AssertionError` says what differs.

>>> aotjax.testing.assert_close(aotjax.tensor([1.0, 2.0]), aotjax.tensor([1.0, 2.0 + 1e-7]))
>>> aotjax.testing.assert_close(aotjax.tensor([1.0]), aotjax.tensor([1.1]))
Traceback (most recent call last):
...
AssertionError: Tensor-likes are not close!
<BLANKLINE>
Mismatched elements: 1 / 1 (100.0%)
Greatest absolute difference: 0.10000002384185791 at index (0,) (up to 1e-05 allowed)
Greatest relative difference: 0.09090910851955414 at index (0,) (up to 1.3e-06 allowed)
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from aotjax.tensor import Tensor

__all__ = ["assert_close"]

# dtype name -> (rtol, atol): torch's defaults
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


def assert_close(actual, expected, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False, msg=None) -> None:
    """Raise an AssertionError unless `actual` and `expected` are close (torch's arguments; `check_device`,
    `check_layout` and `check_stride` are accepted: aotjax compares values)."""
    if (rtol is None) != (atol is None):
        missing = "rtol" if rtol is None else "atol"
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}.")
    _compare(actual, expected, (), rtol, atol, equal_nan, check_dtype, msg)


def _compare(actual, expected, where: tuple, rtol, atol, equal_nan, check_dtype, msg) -> None:
    if isinstance(expected, Mapping) or isinstance(actual, Mapping):
        if not (isinstance(expected, Mapping) and isinstance(actual, Mapping)) or set(actual) != set(expected):
            _fail(f"The keys of the mappings do not match: {sorted(map(repr, actual))} != "
                  f"{sorted(map(repr, expected))}.", where, msg)
        for k in expected:
            _compare(actual[k], expected[k], where + (k,), rtol, atol, equal_nan, check_dtype, msg)
        return
    if _is_sequence(expected) or _is_sequence(actual):
        if not (_is_sequence(expected) and _is_sequence(actual)) or len(actual) != len(expected):
            _fail(f"The length of the sequences mismatch: {_len(actual)} != {_len(expected)}", where, msg)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, where + (i,), rtol, atol, equal_nan, check_dtype, msg)
        return
    scalars = not isinstance(actual, Tensor) and not isinstance(expected, Tensor)
    a, e = _array(actual), _array(expected)
    if a.shape != e.shape:
        _fail(f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.", where, msg)
    if check_dtype and a.dtype != e.dtype:
        _fail(f"The values for attribute 'dtype' do not match: {a.dtype} != {e.dtype}.", where, msg)
    if rtol is None:
        rtol, atol = _TOLERANCES.get(np.promote_types(a.dtype, e.dtype).name, (0.0, 0.0))
    wide = np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(e) else np.float64
    aw, ew = a.astype(wide), e.astype(wide)
    with np.errstate(invalid="ignore"):
        close = np.isclose(aw, ew, rtol=rtol, atol=atol, equal_nan=equal_nan) | (aw == ew)
    if close.all():
        return
    # NOTE: the differences in the inputs' dtype, as torch reports them (a float32 difference as a Python float)
    like = np.promote_types(a.dtype, e.dtype)
    if like.kind not in "fc" or like.itemsize < 4:
        like = np.dtype(np.float32 if like.kind in "biu" else np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.abs(a.astype(like) - e.astype(like))
        rel = diff / np.abs(e.astype(like))
    if a.dtype.kind in "biu" and e.dtype.kind in "biu":
        diff = np.abs(a.astype(np.int64) - e.astype(np.int64))
    if scalars:
        _fail(f"Scalars are not close!\n\nExpected {expected} but got {actual}.\nAbsolute difference: "
              f"{diff.item()} (up to {atol} allowed)\nRelative difference: {rel.item()} (up to {rtol} allowed)",
              where, msg)
    bad = int((~close).sum())
    at = np.unravel_index(int(np.argmax(np.where(close, -1.0, np.nan_to_num(diff.astype(np.float64), nan=np.inf)))),
                          a.shape)
    at_rel = np.unravel_index(int(np.argmax(np.where(close, -1.0, np.nan_to_num(rel.astype(np.float64), nan=np.inf)))),
                              a.shape)
    exact = rtol == 0 and atol == 0
    allowed = ("", "") if exact else (f" (up to {atol} allowed)", f" (up to {rtol} allowed)")
    _fail(f"Tensor-likes are not {'equal' if exact else 'close'}!\n\nMismatched elements: {bad} / {a.size} "
          f"({100 * bad / a.size:.1f}%)\nGreatest absolute difference: {diff[at].item()} at index "
          f"{tuple(int(i) for i in at)}{allowed[0]}\nGreatest relative difference: {rel[at_rel].item()} at index "
          f"{tuple(int(i) for i in at_rel)}{allowed[1]}", where, msg)


def _is_sequence(x) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes))


def _len(x):
    return len(x) if _is_sequence(x) else type(x).__name__


def _array(x) -> np.ndarray:
    if isinstance(x, Tensor):
        return np.asarray(x.detach().numpy())
    if isinstance(x, bool):
        return np.asarray(x)
    if isinstance(x, (int, float, complex)):
        from aotjax.core.avals import python_scalar_dtype
        return np.asarray(x, dtype=np.float64 if isinstance(x, float) else python_scalar_dtype(x))
    return np.asarray(x)


def _fail(text: str, where: tuple, msg) -> None:
    if where:
        text += "\n\nThe failure occurred for item " + "".join(f"[{k!r}]" for k in where)
    if callable(msg):
        text = msg(text)
    elif msg is not None:
        text = msg
    raise AssertionError(text)
