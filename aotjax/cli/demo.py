"""Run a small two-layer MLP written PyTorch-style: eagerly, as a jaxpr, and compiled through XLA.

The model uses an in-place activation (`h.relu_()`) and writes through views (`h[:, 0].zero_()`,
`out[0].mul_(2)`). The demo runs it eagerly, prints its jaxpr as written (each equation with its
source line), compiles the same model through XLA, differentiates it with `jax.grad` through `to_jax`, and
checks that all results agree.
"""
from __future__ import annotations

import argparse
import linecache

import jax
import jax.numpy as jnp
import numpy as np

import aotjax
from aotjax.cli.stages import Program, describe, render
from aotjax.core.errors import UnsupportedError

# NOTE: the model is user code, so it is compiled under its own file name: aotjax attributes each
# equation to the first stack frame outside its own package, and this module is inside it.
MODEL_FILE = "mlp_demo.py"
MODEL_SOURCE = '''\
import aotjax

def mlp(x, w1, w2):
    h = x @ w1
    h.relu_()                 # in place
    h[:, 0].zero_()           # written through a view: column 0 of h
    out = h @ w2
    out[0].mul_(2)            # written through a view: row 0 of out
    return out

def mlp_pure(x, w1, w2):
    h = (x @ w1).relu()
    h = h * COLUMN_MASK       # zero column 0 (a constant of the program)
    out = h @ w2
    return out * ROW_SCALE    # double row 0
'''


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs and weights")
    parser.add_argument("--stablehlo", action="store_true", help="also print the StableHLO of the compiled model")


def load_model(batch: int, hidden: int) -> dict:
    """Execute MODEL_SOURCE as the module `mlp_demo.py` and return its namespace."""
    linecache.cache[MODEL_FILE] = (len(MODEL_SOURCE), None, MODEL_SOURCE.splitlines(True), MODEL_FILE)
    namespace = {"__name__": "mlp_demo",
                 "COLUMN_MASK": aotjax.tensor([0.0] + [1.0] * (hidden - 1)),
                 "ROW_SCALE": aotjax.tensor([[2.0]] + [[1.0]] * (batch - 1))}
    exec(compile(MODEL_SOURCE, MODEL_FILE, "exec"), namespace)
    return namespace


def numpy_reference(x, w1, w2) -> np.ndarray:
    h = np.maximum(x @ w1, 0)
    h[:, 0] = 0
    out = h @ w2
    out[0] *= 2
    return out


def jax_reference_loss(x, w1, w2):
    h = jnp.maximum(x @ w1, 0).at[:, 0].set(0)
    return (h @ w2).at[0].multiply(2).sum()


def _listing(source: str) -> str:
    return "\n".join(f"{i:3} | {line}" for i, line in enumerate(source.splitlines(), 1))


def _agree(name: str, got, expected) -> bool:
    got, expected = np.asarray(got), np.asarray(expected)
    ok = got.shape == expected.shape and bool(np.allclose(got, expected, rtol=1e-5, atol=1e-5))
    diff = float(np.max(np.abs(got - expected))) if got.shape == expected.shape else float("nan")
    print(f"  {name}: {'agree' if ok else 'DIFFER'} (max |difference| = {diff:.2e})")
    return ok


def run(args: argparse.Namespace) -> int:
    rng = np.random.default_rng(args.seed)
    batch, d_in, hidden, d_out = 4, 8, 16, 3
    data = [rng.normal(size=s).astype(np.float32) for s in ((batch, d_in), (d_in, hidden), (hidden, d_out))]
    model = load_model(batch, hidden)
    x, w1, w2 = (aotjax.tensor(a) for a in data)

    print(f"aotjax demo: a two-layer MLP written PyTorch-style ({MODEL_FILE})\n")
    print(_listing(MODEL_SOURCE))

    print("\n1. eager: out = mlp(x, w1, w2)")
    eager_out = model["mlp"](x, w1, w2)
    print(f"  x {describe(x)}, w1 {describe(w1)}, w2 {describe(w2)} -> out {describe(eager_out)}")

    print("\n2. traced with make_jaxpr (views and in-place ops kept as written):\n")
    program = Program(model["mlp"], (x, w1, w2))
    print(render(["jaxpr"], program))

    print("\n3. lowered through XLA")
    try:
        aotjax.compile(program.jaxpr)
        print("  (the jaxpr with in-place ops lowered directly)")
        lowered_fn = model["mlp"]
    except UnsupportedError as e:
        print(f"  as written it cannot be lowered yet:\n    UnsupportedError: {e}")
        print("  so we compile `mlp_pure`, the same model without in-place ops (what functionalize will "
              "derive automatically):\n")
        lowered_fn = model["mlp_pure"]
    pure = Program(lowered_fn, (x, w1, w2))
    print(render(["jaxpr"], pure))
    compiled = aotjax.compile(pure.jaxpr)
    text = compiled.as_text()
    flops = (compiled.cost_analysis() or {}).get("flops")
    print(f"\n  compiled: {compiled}; {len(text.splitlines())} lines of StableHLO"
          + (f", {flops:.0f} flops (XLA's estimate)" if flops is not None else ""))
    if args.stablehlo:
        print(render(["stablehlo"], pure))
    compiled_out = compiled(x, w1, w2)

    print("\n4. the lowered model is a jax function: to_jax composes with jax.grad")
    lowered = aotjax.to_jax(pure.jaxpr)
    grad = jax.grad(lambda *a: lowered(*a).sum(), argnums=1)(*data)
    print(f"  jax.grad(lambda x, w1, w2: to_jax(mlp_pure)(x, w1, w2).sum(), argnums=1) -> {describe(grad)}")

    print("\n5. checks")
    ok = _agree("eager mlp vs NumPy", eager_out, numpy_reference(*data))
    ok &= _agree("compiled vs eager", compiled_out, eager_out)
    ok &= _agree("grad of to_jax vs grad of jax.numpy", grad, jax.grad(jax_reference_loss, argnums=1)(*data))
    print("\nOK: the eager, compiled and differentiated results agree." if ok else "\nFAILED: the results differ.")
    return 0 if ok else 1
