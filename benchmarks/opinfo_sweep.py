"""aotjax against PyTorch's OpInfo database: every sample of every op both have, run by both, values compared.

For each entry of `torch.testing._internal.common_methods_invocations.op_db` that aotjax has (the name mapping is
`op_coverage.aotjax_op`'s), and each sample of `op.sample_inputs("cpu", dtype)` for float32 (and int64 and bool
where the OpInfo lists them), runs torch and aotjax eagerly on the same values and compares results: structure,
shapes, dtypes (as aotjax's mode gives them: without x64, 64-bit results are 32-bit), values (allclose with float32
tolerances, NaN and inf where torch has them; random ops by shape and dtype only). An OpInfo entry whose `op` is a
wrapper (`lambda x, n: torch.polygamma(n, x)`) is run with `torch` in the wrapper meaning `aotjax`, as
`import aotjax as torch` would. A sample torch refuses is skipped; a crash never stops the sweep.

    python benchmarks/opinfo_sweep.py                        # needs torch: pip install ".[test]" (the test extra)
    python benchmarks/opinfo_sweep.py --ops cov,diff --grad  # also torch.autograd.grad vs aotjax.autograd.grad
    python benchmarks/opinfo_sweep.py --jit --limit-samples 3
    JAX_ENABLE_X64=1 python benchmarks/opinfo_sweep.py       # in jax's x64 mode (int64/float64 as torch)

Prints one line per class of difference (op, what differs, how many samples, the first sample) and a summary:
samples run, agree, mismatched values, aotjax raised where torch ran, torch raised (skipped).
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
import types
import warnings
from pathlib import Path

import jax
import numpy as np

import aotjax

sys.path.insert(0, str(Path(__file__).parent))
from op_coverage import aotjax_op, load_op_db, torch_missing  # noqa: E402  (a sibling script)

RANDOM = ("bernoulli", "cauchy", "dropout", "empty", "exponential", "fractional_max_pool", "geometric", "log_normal",
          "multinomial", "normal", "rand", "rrelu", "uniform", "svd_lowrank", "pca_lowrank")
RTOL, ATOL = 1e-4, 1e-5  # float32 (and complex64): XLA's and ATen's kernels round differently


# -- values both ways -----------------------------------------------------------------------------------------------
def to_aotjax(x, torch, memo: dict):
    """torch's `x` with every tensor, dtype, Size and memory format made aotjax's, through lists, tuples and dicts.
    The same torch tensor gives the same aotjax tensor (`memo`); one that requires grad gives one that does too."""
    if isinstance(x, torch.Tensor):
        if id(x) not in memo:
            value = x.detach().resolve_conj().resolve_neg().numpy()
            memo[id(x)] = (aotjax.tensor(value, requires_grad=x.requires_grad), x)
        return memo[id(x)][0]
    if isinstance(x, torch.dtype):
        return getattr(aotjax, str(x).removeprefix("torch."))
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, (torch.memory_format, torch.layout)):
        return getattr(aotjax, str(x).removeprefix("torch."), None)
    if isinstance(x, torch.device):
        return str(x)
    if isinstance(x, dict):
        return {k: to_aotjax(v, torch, memo) for k, v in x.items()}
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(to_aotjax(v, torch, memo) for v in x)
    return x


def as_aotjax_code(fn, torch):
    """An OpInfo wrapper (a lambda of torch's test code) with `torch` meaning `aotjax`; other callables as they are."""
    if not isinstance(fn, types.FunctionType) or not fn.__module__.startswith("torch.testing"):
        return fn
    names = {**fn.__globals__, "torch": aotjax, "F": aotjax.nn.functional}
    return types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, fn.__closure__)


def mode_dtype(torch_dtype) -> np.dtype:
    """The dtype aotjax gives where torch gives `torch_dtype` in jax's current mode."""
    d = np.dtype(str(torch_dtype).removeprefix("torch."))
    narrow = {np.dtype(np.int64): np.int32, np.dtype(np.float64): np.float32, np.dtype(np.complex128): np.complex64}
    return d if jax.config.jax_enable_x64 or d not in narrow else np.dtype(narrow[d])


# -- comparing ------------------------------------------------------------------------------------------------------
def difference(ref, out, torch, values: bool = True, at: str = "") -> str | None:
    """What differs between torch's result `ref` and aotjax's `out` (None when they agree)."""
    if isinstance(ref, torch.Tensor):
        if not isinstance(out, aotjax.Tensor):
            return f"{at or 'out'}: a {type(out).__name__}, torch gives a Tensor"
        if tuple(out.shape) != tuple(ref.shape):
            return f"{at or 'out'}: shape {tuple(out.shape)}, torch's {tuple(ref.shape)}"
        if out.dtype != mode_dtype(ref.dtype):
            return f"{at or 'out'}: dtype {out.dtype}, torch's {ref.dtype}"
        if values and ref.numel():
            return value_difference(as_numpy(ref), np.asarray(out.detach()).astype(np.float64)
                                    if out.dtype.itemsize == 2 else np.asarray(out.detach()), at)
        return None
    if isinstance(ref, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(ref):
            return f"{at or 'out'}: {type(out).__name__} of {len(out) if isinstance(out, (tuple, list)) else 1}, " \
                   f"torch's {type(ref).__name__} of {len(ref)}"
        diffs = (difference(r, o, torch, values, f"{at}[{i}]") for i, (r, o) in enumerate(zip(ref, out)))
        return next((d for d in diffs if d), None)
    if isinstance(ref, (bool, int, float, complex)) and not isinstance(ref, torch.Tensor):
        got = out.item() if isinstance(out, aotjax.Tensor) and out.numel() == 1 else out
        if not isinstance(got, (bool, int, float, complex)):
            return f"{at or 'out'}: a {type(out).__name__}, torch gives a {type(ref).__name__}"
        return value_difference(np.asarray(ref), np.asarray(got), at) if values else None
    return None if ref == out or (isinstance(ref, torch.Size) and tuple(ref) == tuple(out)) else \
        f"{at or 'out'}: {out!r:.60}, torch's {ref!r:.60}"


def as_numpy(t) -> np.ndarray:
    """torch's tensor `t` as numpy's (16-bit floats widened: numpy has no bfloat16)."""
    t = t.detach().resolve_conj().resolve_neg()
    return (t.double() if t.is_floating_point() and t.element_size() == 2 else t).numpy()


def value_difference(ref: np.ndarray, got: np.ndarray, at: str) -> str | None:
    if ref.dtype.kind in "biu" and got.dtype.kind in "biu":
        bad = ref != got
    else:
        wide = max(ref.dtype.itemsize, got.dtype.itemsize) >= 8 and jax.config.jax_enable_x64
        rtol, atol = (1e-7, 1e-9) if wide else (RTOL, ATOL)
        ref, got = ref.astype(np.complex128), got.astype(np.complex128)
        bad = ~np.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any():
        return None
    i = tuple(int(k) for k in np.argwhere(bad)[0]) if bad.ndim else ()
    g, r = got[i], ref[i]
    show = (lambda v: f"{v.real:.6g}") if not np.iscomplexobj(ref) or not np.iscomplex(r) else (lambda v: f"{v:.4g}")
    return f"{at or 'values'}: {int(bad.sum())} of {bad.size} differ, e.g. at {list(i)}: {show(g)}, torch's {show(r)}"


# -- one sample -----------------------------------------------------------------------------------------------------
def float_sum(out, lib):
    """The sum of every floating-point tensor in `out` that carries a gradient (None if there is none)."""
    leaves = out if isinstance(out, (tuple, list)) else [out]
    parts = [o.sum() for o in leaves if isinstance(o, lib.Tensor) and o.is_floating_point() and o.requires_grad]
    return sum(parts[1:], parts[0]) if parts else None


def run_sample(op, fn, sample, torch, mode: str):
    """("torch raised"|"agree"|"mismatch"|"aotjax raised", detail) for one sample in `mode` (eager, jit or grad)."""
    values = not any(r in op.name for r in RANDOM)
    args = (sample.input, *sample.args)
    memo: dict = {}  # NOTE: converted before torch runs: an in-place op changes its input
    a_args, a_kwargs = to_aotjax(args, torch, memo), to_aotjax(sample.kwargs, torch, memo)
    try:
        ref = op.op(*args, **sample.kwargs)
        if mode == "grad":
            ref = sample.output_process_fn_grad(ref)
            total = float_sum(ref, torch)
            inputs = [t for t in torch.utils._pytree.tree_leaves((args, sample.kwargs))
                      if isinstance(t, torch.Tensor) and t.requires_grad]
            if total is None or not inputs:
                return "torch raised", "no float output or input with a gradient"
            ref = torch.autograd.grad(total, inputs, allow_unused=True)
    except Exception as e:  # noqa: BLE001  (any refusal of torch's skips the sample)
        return "torch raised", f"{type(e).__name__}: {str(e)[:80]}"
    try:
        if mode == "jit":
            out = jitted(fn, a_args, a_kwargs)
        else:
            out = fn(*a_args, **a_kwargs)
        if mode == "grad":
            out = as_aotjax_code(sample.output_process_fn_grad, torch)(out)
            by_id = {id(t): a for a, t in memo.values()}
            out = aotjax.autograd.grad(float_sum(out, aotjax), [by_id[id(t)] for t in inputs], allow_unused=True)
            ref = [torch.zeros_like(t) if r is None else r for r, t in zip(ref, inputs)]
            out = [aotjax.zeros_like(a) if o is None else o for o, a in zip(out, (by_id[id(t)] for t in inputs))]
    except Exception as e:  # noqa: BLE001  (a crash is what the sweep reports)
        return "aotjax raised", f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    try:
        why = difference(ref, out, torch, values)
    except Exception as e:  # noqa: BLE001  (results the comparison cannot read: a crash of aotjax's side)
        return "aotjax raised", f"{type(e).__name__} comparing: {str(e)[:100]}"
    return ("mismatch", why) if why else ("agree", "")


def jitted(fn, args, kwargs):
    """`fn(*args, **kwargs)` under `aotjax.jit`, the tensors as its arguments and everything else fixed."""
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs), is_leaf=lambda x: isinstance(x, aotjax.Tensor))
    where = [i for i, x in enumerate(leaves) if isinstance(x, aotjax.Tensor)]

    def call(*tensors):
        filled = list(leaves)
        for i, t in zip(where, tensors):
            filled[i] = t
        a, k = jax.tree_util.tree_unflatten(tree, filled)
        return fn(*a, **k)
    return aotjax.jit(call)(*(leaves[i] for i in where))


def describe(sample) -> str:
    shapes = [tuple(t.shape) if hasattr(t, "shape") else t for t in (sample.input, *sample.args)]
    text = f"{shapes} {sample.kwargs}" if sample.kwargs else f"{shapes}"
    return text if len(text) < 110 else text[:107] + "..."


# -- the sweep ------------------------------------------------------------------------------------------------------
def sweep(ops: list, modes: list[str], limit: int | None, torch, counts: collections.Counter, classes: dict,
          progress: bool = False) -> None:
    """Run the samples, counting each outcome per mode (`counts`) and each class of difference (`classes`)."""
    for k, op in enumerate(ops):
        if progress:
            print(f"[{k + 1}/{len(ops)}] {op.name} {op.variant_test_name}", file=sys.stderr, flush=True)
        plain = op.op is getattr_path(torch, op.name) or op.op is getattr(torch.Tensor, op.name, None)
        fn = aotjax_op(op.name) if plain else as_aotjax_code(op.op, torch)
        dtypes = [d for d in (torch.float32, torch.int64, torch.bool) if d in op.supported_dtypes("cpu")]
        for mode in modes:
            for dtype in dtypes if mode != "grad" else [torch.float32] * op.supports_autograd:
                try:
                    samples = list(op.sample_inputs("cpu", dtype, requires_grad=mode == "grad"))[:limit]
                except Exception:  # noqa: BLE001
                    continue
                for sample in samples:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        try:
                            status, why = run_sample(op, fn, sample, torch, mode)
                        except Exception as e:  # noqa: BLE001  (converting the sample failed: aotjax's side)
                            status, why = "aotjax raised", f"{type(e).__name__} converting: {str(e)[:100]}"
                    counts[mode, status] += 1
                    if status in ("mismatch", "aotjax raised"):
                        key = (mode, op.name, op.variant_test_name, status, re.sub(r"\d+", "#", why)[:60])
                        classes.setdefault(key, [0, f"{dtype} {describe(sample)}", why])[0] += 1


def X64() -> bool:
    return bool(jax.config.jax_enable_x64)


def getattr_path(owner, name: str):
    for part in name.split("."):
        owner = getattr(owner, part, None)
    return owner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", help="comma-separated op_db names (default: every op aotjax has)")
    parser.add_argument("--limit-samples", type=int, help="at most this many samples per op and dtype")
    parser.add_argument("--grad", action="store_true", help="also compare gradients of the float outputs' sum")
    parser.add_argument("--jit", action="store_true", help="also run aotjax under aotjax.jit")
    parser.add_argument("--progress", action="store_true", help="name each op on stderr as it starts")
    args = parser.parse_args(argv)
    if (why := torch_missing()) is not None:
        print(why.replace("op_coverage", "opinfo_sweep").replace("op_coverage.py", "opinfo_sweep.py"),
              file=sys.stderr)
        return 2
    import torch  # only as the oracle: aotjax itself never imports torch
    wanted = set(args.ops.split(",")) if args.ops else None
    ops = [op for op in load_op_db() if (wanted is None or op.name in wanted) and aotjax_op(op.name) is not None
           and not op.name.startswith(("_", "jiterator_", "torch."))]
    modes = ["eager"] + ["jit"] * args.jit + ["grad"] * args.grad
    counts, classes = collections.Counter(), {}
    try:
        sweep(ops, modes, args.limit_samples, torch, counts, classes, args.progress)
    except KeyboardInterrupt:  # NOTE: Ctrl-C: the summary of what ran so far
        print("interrupted: the counts below are of the samples run so far", file=sys.stderr)
    for (mode, name, variant, status, _), (n, sample, why) in sorted(classes.items(), key=lambda kv: -kv[1][0]):
        op = f"{name}.{variant}" if variant else name
        print(f"{mode:5} {op}: {status} x{n}: {why}  [first: {sample}]")
    for mode in modes:
        run = sum(counts[mode, s] for s in ("agree", "mismatch", "aotjax raised"))
        print(f"\n{mode}: {run} samples run by torch, {counts[mode, 'agree']} agree, {counts[mode, 'mismatch']} "
              f"mismatched values, {counts[mode, 'aotjax raised']} aotjax raised where torch ran; "
              f"{counts[mode, 'torch raised']} torch raised (skipped)  [{len(ops)} ops, x64={X64()}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
