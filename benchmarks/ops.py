"""Op benchmarks: conv2d forward+backward, aotjax.jit(aotjax.grad(loss)) vs jax.jit(jax.grad(loss)), same math.

    python benchmarks/ops.py [--number 10] [--repeat 5] [--quick]

The loss is two 3x3 convolutions (the second strided, both with bias) with a ReLU between and a squared mean,
on a batch of images, differentiated with respect to the weights and the input. Printed: the step time of each
library (min over `repeat` runs of `number` calls, every gradient leaf blocked on), their ratio, and the largest
absolute difference between the gradients. `--quick` uses tiny sizes (a smoke test of the script).
"""
from __future__ import annotations

import argparse
import timeit

import jax
import jax.numpy as jnp
import numpy as np

import aotjax
import aotjax.nn.functional as F


def loss(p, x):
    h = F.conv2d(x, p["w1"], p["b1"], padding=1).relu()
    return (F.conv2d(h, p["w2"], p["b2"], stride=2, padding=1) ** 2).mean()


def _conv_jnp(x, w, b, stride, padding):
    out = jax.lax.conv_general_dilated(x, w, (stride, stride), ((padding, padding),) * 2,
                                       dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return out + b[None, :, None, None]


def loss_jnp(p, x):
    h = jax.nn.relu(_conv_jnp(x, p["w1"], p["b1"], 1, 1))
    return (_conv_jnp(h, p["w2"], p["b2"], 2, 1) ** 2).mean()


def _time(fn, args, number: int, repeat: int) -> float:
    jax.block_until_ready(jax.tree.leaves(fn(*args)))

    def run():
        for _ in range(number):
            out = fn(*args)
        jax.block_until_ready([getattr(v, "_value", v) for v in jax.tree.leaves(out)])
    return min(timeit.repeat(run, number=1, repeat=repeat)) / number


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    batch, c, size = (2, 4, 8) if args.quick else (32, 32, 32)
    rng = np.random.default_rng(0)
    p = {"w1": rng.normal(size=(c, 3, 3, 3)).astype(np.float32) * 0.2, "b1": np.zeros(c, np.float32),
         "w2": rng.normal(size=(c, c, 3, 3)).astype(np.float32) * 0.1, "b2": np.zeros(c, np.float32)}
    x = rng.normal(size=(batch, 3, size, size)).astype(np.float32)
    ours = aotjax.jit(aotjax.grad(loss, argnums=(0, 1)))
    theirs = jax.jit(jax.grad(loss_jnp, argnums=(0, 1)))
    ours_args = ({k: aotjax.tensor(v) for k, v in p.items()}, aotjax.tensor(x))
    theirs_args = ({k: jnp.asarray(v) for k, v in p.items()}, jnp.asarray(x))
    t_ours = _time(ours, ours_args, args.number, args.repeat)
    t_theirs = _time(theirs, theirs_args, args.number, args.repeat)
    g_ours, g_theirs = ours(*ours_args), theirs(*theirs_args)
    diff = max(float(np.max(np.abs(np.asarray(aotjax.tensor(a).numpy()) - np.asarray(b))))
               for a, b in zip(jax.tree.leaves(g_ours), jax.tree.leaves(g_theirs)))
    print(f"conv2d fwd+bwd [{batch}x3x{size}x{size}, {c} channels]: aotjax {t_ours * 1e3:.3f} ms, "
          f"jax {t_theirs * 1e3:.3f} ms, ratio {t_ours / t_theirs:.3f}x, max |grad diff| {diff:.2e}")


if __name__ == "__main__":
    main()
