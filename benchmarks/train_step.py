"""A whole training step compiled as one program: aotjax.jit(train_step)(model, opt, x, y) with an `nn.Module` and
`optim.AdamW` updating in place, vs jax.jit of the same math with optax.adamw and donated buffers, same run.

    python benchmarks/train_step.py [--number 20] [--repeat 7] [--quick]

The model is an MLP (Linear -> GELU -> Linear -> GELU -> Linear, cross-entropy loss), the same initial weights in
both. aotjax's step is PyTorch-shaped code: `value_and_grad` of the loss through `functional_call`, then
`opt.step(grads)`; its parameters and AdamW state are written back into the caller's tensors (donated buffers).
JAX's is the functional step `(params, opt_state, x, y) -> (params, opt_state, loss)` with `donate_argnums`.

Printed: the step time of each (min over `repeat` runs of `number` steps, blocked on the loss and the parameters),
the ratio (aotjax / JAX), the first-call (trace + compile) times, and the largest difference between the
parameters after the timed steps. Needs optax (in the `test` extra). `--quick` uses tiny sizes.
"""
from __future__ import annotations

import argparse
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import aotjax
import aotjax.nn as nn
import aotjax.nn.functional as F
from aotjax.func import functional_call

LR, WD = 1e-3, 1e-2


def _weights(rng, sizes):
    out = {}
    for k, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        out[f"{2 * k}.weight"] = (rng.normal(size=(n, m)) / math.sqrt(m)).astype(np.float32)
        out[f"{2 * k}.bias"] = np.zeros(n, np.float32)
    return out


# -- aotjax: PyTorch-shaped ----------------------------------------------------------------------------
def make_model(sizes):
    layers = []
    for k, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers += [nn.Linear(m, n)] + ([nn.GELU()] if k < len(sizes) - 2 else [])
    return nn.Sequential(*layers)


def train_step(model, opt, x, y):
    loss, grads = aotjax.value_and_grad(lambda p: F.cross_entropy(functional_call(model, p, (x,)), y))(
        dict(model.named_parameters()))
    opt.step(grads)
    return loss


# -- JAX: functional --------------------------------------------------------------------------------------
def jax_loss(params, x, y, n_layers):
    h = x
    for k in range(n_layers):
        h = h @ params[f"{2 * k}.weight"].T + params[f"{2 * k}.bias"]
        if k < n_layers - 1:
            h = jax.nn.gelu(h, approximate=False)
    return optax.softmax_cross_entropy_with_integer_labels(h, y).mean()


def make_jax_step(n_layers, tx):
    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(jax_loss)(params, x, y, n_layers)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    return jax.jit(step, donate_argnums=(0, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    batch, sizes = (8, [16, 32, 32, 4]) if args.quick else (256, [128, 512, 512, 10])
    rng = np.random.default_rng(0)
    weights = _weights(rng, sizes)
    x_np = rng.normal(size=(batch, sizes[0])).astype(np.float32)
    y_np = rng.integers(0, sizes[-1], size=batch).astype(np.int32)

    model = make_model(sizes)
    model.load_state_dict(weights)
    opt = aotjax.optim.AdamW(model.named_parameters(), lr=LR, weight_decay=WD)
    step = aotjax.jit(train_step)
    x, y = aotjax.tensor(x_np), aotjax.tensor(y_np)

    tx = optax.adamw(LR, weight_decay=WD)
    params = {k: jnp.asarray(v) for k, v in weights.items()}
    state = {"params": params, "opt": tx.init(params)}
    jstep = make_jax_step(len(sizes) - 1, tx)
    jx, jy = jnp.asarray(x_np), jnp.asarray(y_np)

    def ours():
        loss = step(model, opt, x, y)
        loss.block_until_ready()
        model[0].weight.block_until_ready()

    def theirs():
        state["params"], state["opt"], loss = jstep(state["params"], state["opt"], jx, jy)
        loss.block_until_ready()
        jax.tree_util.tree_leaves(state["params"])[0].block_until_ready()

    first = {}
    for name, fn in (("aotjax", ours), ("jax", theirs)):
        t0 = time.perf_counter()
        fn()
        first[name] = time.perf_counter() - t0
    times = {"aotjax": math.inf, "jax": math.inf}
    for _ in range(args.repeat):
        for name, fn in (("aotjax", ours), ("jax", theirs)):
            t0 = time.perf_counter()
            for _ in range(args.number):
                fn()
            times[name] = min(times[name], (time.perf_counter() - t0) / args.number)
    ours_params = {k: np.asarray(v.numpy()) for k, v in model.state_dict().items()}
    diff = max(float(np.abs(ours_params[k] - np.asarray(v)).max()) for k, v in state["params"].items())
    print(f"MLP {sizes}, batch {batch}, AdamW; {1 + args.repeat * args.number} steps each")
    print(f"  step        aotjax {times['aotjax'] * 1e3:8.3f} ms   jax+optax {times['jax'] * 1e3:8.3f} ms   "
          f"ratio {times['aotjax'] / times['jax']:.2f}x")
    print(f"  first call  aotjax {first['aotjax']:8.3f} s    jax+optax {first['jax']:8.3f} s")
    print(f"  traced {step.trace_count} time(s); max abs diff of the parameters after the same steps: {diff:.2e}")


if __name__ == "__main__":
    main()
