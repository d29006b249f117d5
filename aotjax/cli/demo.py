"""Run a small two-layer MLP written PyTorch-style: eagerly, as a jaxpr, functionalized and compiled.

The model uses an in-place activation (`h.relu_()`) and writes through views (`h[:, 0].zero_()`,
`out[0].mul_(2)`). The demo runs it eagerly, prints its jaxpr as written (each equation with its
source line), the functionalized program and its call boundary, compiles it with `aotjax.jit`,
compiles an in-place SGD step whose weight is updated in its own buffer (donated), differentiates it
with `aotjax.grad` (and the functionalized program with `jax.grad` through `to_jax`), shows what the
forward saves for the backward, splits the gradient into a compiled forward and backward program with
`aotjax.aot` (AOTAutograd) and differentiates through them, and checks that all results agree.
"""
from __future__ import annotations

import argparse
import linecache
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

import aotjax
from aotjax.cli.stages import Program, describe, render

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

def sgd_step(w, g, lr):
    w.sub_(lr * g)            # in place: compiled, w's buffer is reused
    return (w * w).sum()
'''


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs and weights")
    parser.add_argument("--stablehlo", action="store_true", help="also print the StableHLO of the compiled model")


def load_model() -> dict:
    """Execute MODEL_SOURCE as the module `mlp_demo.py` and return its namespace."""
    linecache.cache[MODEL_FILE] = (len(MODEL_SOURCE), None, MODEL_SOURCE.splitlines(True), MODEL_FILE)
    namespace = {"__name__": "mlp_demo"}
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


def _signature(title: str, jaxpr, inputs: list[str], outputs: list[str]) -> str:
    """A program (without source lines) under `title`, then its input and output descriptors."""
    return "\n".join([f"  {title}:", textwrap.indent(str(jaxpr), "  "), _wrap("inputs:", inputs),
                      _wrap("outputs:", outputs)])


def _wrap(label: str, names: list[str], width: int = 110) -> str:
    """`label` and the comma-separated `names`, wrapped between names (never inside one)."""
    lines, line = [], []
    for name in names:
        if line and len(", ".join(line + [name])) > width - 11:
            lines.append(", ".join(line) + ",")
            line = []
        line.append(name)
    lines.append(", ".join(line))
    return "\n".join(f"  {label if i == 0 else '':9}{text}" for i, text in enumerate(lines))


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
    model = load_model()
    x, w1, w2 = (aotjax.tensor(a) for a in data)

    print(f"aotjax demo: a two-layer MLP written PyTorch-style ({MODEL_FILE})\n")
    print(_listing(MODEL_SOURCE))

    print("\n1. eager: out = mlp(x, w1, w2)")
    eager_out = model["mlp"](x, w1, w2)
    print(f"  x {describe(x)}, w1 {describe(w1)}, w2 {describe(w2)} -> out {describe(eager_out)}")

    print("\n2. traced with make_jaxpr (views and in-place ops kept as written):\n")
    program = Program(model["mlp"], (x, w1, w2))
    print(render(["jaxpr"], program))

    print("\n3. functionalized (jit(mlp).lower(...)): a pure program, and the call boundary:\n")
    print(render(["functionalized", "boundary"], program))

    print("\n4. compiled through XLA with aotjax.jit")
    jmlp = aotjax.jit(model["mlp"])
    compiled_out = jmlp(x, w1, w2)
    compiled = program.lowered.compile()
    flops = (compiled.cost_analysis() or {}).get("flops")
    print(f"  jit(mlp)(x, w1, w2) -> out {describe(compiled_out)}; {len(program.lowered.as_text().splitlines())} "
          f"lines of StableHLO" + (f", {flops:.0f} flops (XLA's estimate)" if flops is not None else ""))
    if args.stablehlo:
        print(render(["stablehlo"], program))
    w, g = aotjax.tensor(data[2]), aotjax.ones(hidden, d_out)
    old_buffer = w._storage.base
    norm = aotjax.jit(model["sgd_step"])(w, g, 0.5)
    print(f"  jit(sgd_step)(w, g, 0.5): w updated in place, |w|^2 = {float(norm):.3f}; w's old buffer was "
          f"{'donated to the program' if old_buffer.is_deleted() else 'copied'}")

    print("\n5. differentiated: aotjax.grad of the loss (functionalized first), and compiled: jit(grad(loss))")
    loss = lambda x, w1, w2: model["mlp"](x, w1, w2).sum()  # noqa: E731
    grad = aotjax.jit(aotjax.grad(loss, argnums=1))(x, w1, w2)
    print(f"  jit(grad(loss, argnums=1))(x, w1, w2) -> {describe(grad)}")
    print(render(["residuals"], Program(loss, (x, w1, w2))))
    lowered = aotjax.to_jax(program.lowered.jaxpr)
    jax_grad = jax.grad(lambda *a: lowered(*a)[0].sum(), argnums=1)(*data)
    print("  the functionalized program is also a jax function: jax.grad(to_jax(...)) works too")

    print("\n6. AOTAutograd: aot(loss) is split into a forward and a backward program, compiled apart;")
    print("   grad(aot(loss)) runs the forward (keeping its residuals), then the backward\n")
    aot_loss = aotjax.aot(loss)
    aot_grad = aotjax.grad(aot_loss, argnums=1)(x, w1, w2)
    aot_lowered = aot_loss.lower(x, w1, w2)
    print(_signature("forward", aot_lowered.forward, aot_lowered.forward_inputs, aot_lowered.forward_outputs))
    print(_signature("backward", aot_lowered.backward, aot_lowered.backward_inputs, aot_lowered.backward_outputs))
    print(f"  grad(aot(loss), argnums=1)(x, w1, w2) -> {describe(aot_grad)}; the forward saves "
          f"{len(aot_lowered.residuals)} residuals, {aot_lowered.residual_bytes} bytes")

    print("\n7. checks")
    ok = _agree("eager mlp vs NumPy", eager_out, numpy_reference(*data))
    ok &= _agree("compiled vs eager", compiled_out, eager_out)
    ok &= _agree("in-place step vs NumPy", w, data[2] - 0.5)
    reference = jax.grad(jax_reference_loss, argnums=1)(*data)
    ok &= _agree("aotjax grad vs jax.grad of jax.numpy", grad, reference)
    ok &= _agree("jax.grad of to_jax vs jax.grad of jax.numpy", jax_grad, reference)
    ok &= _agree("grad(aot(loss)) vs jax.grad of jax.numpy", aot_grad, reference)
    print("\nOK: the eager, compiled and differentiated results agree." if ok else "\nFAILED: the results differ.")
    return 0 if ok else 1
