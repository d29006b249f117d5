"""An eager optimizer step on many parameters: aotjax's `opt.step()` (one compiled program over every parameter)
against torch's `foreach` step (its multi-tensor kernels), same parameters, same gradients, same run.

    python benchmarks/optimizer_step.py [--params 50] [--number 20] [--repeat 5] [--quick] [--all-threads]

Each optimizer steps `params` tensors of a transformer's shapes (matrices and vectors) whose `.grad` is set once;
printed per optimizer: the step time of each (min over `repeat` runs of `number` steps), the ratio (aotjax / torch)
and the largest difference between the two libraries' parameters after the same steps. One compute thread each
unless `--all-threads` (see benchmarks/imperative_step.py).
"""
from __future__ import annotations

import numpy as np
import torch
from timing import interleaved, parse_step_args, step_parser

import aotjax

OPTIMIZERS = {
    "AdamW": {"lr": 1e-3, "weight_decay": 0.01},
    "Adam": {"lr": 1e-3},
    "SGD": {"lr": 1e-2, "momentum": 0.9},  # NOTE: not nesterov: torch's foreach form adds into `.grad` in place
    "RMSprop": {"lr": 1e-3, "momentum": 0.5},
    "Adagrad": {"lr": 1e-2},
}


def shapes(n: int, d: int) -> list[tuple]:
    """`n` parameter shapes of a transformer of width `d`: per block two norms' weights and biases, four matrices."""
    block = [(d,), (d,), (3 * d, d), (d, d), (d,), (d,), (4 * d, d), (d, 4 * d)]
    return [block[k % len(block)] for k in range(n)]


def make(T, name: str, values: list, grads: list):
    params = [T.tensor(v).requires_grad_() for v in values]
    for p, g in zip(params, grads, strict=True):
        p.grad = T.tensor(g)
    options = dict(OPTIMIZERS[name])
    if T is torch:
        options["foreach"] = True
    return params, getattr(T.optim, name)(params, **options)


def main() -> None:
    parser = step_parser(__doc__, number=20, repeat=5)
    parser.add_argument("--params", type=int, default=50)
    parser.add_argument("--width", type=int, default=128)
    args = parse_step_args(parser)
    n, d = (8, 16) if args.quick else (args.params, args.width)
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype(np.float32) * 0.1 for s in shapes(n, d)]
    grads = [rng.standard_normal(s).astype(np.float32) * 0.01 for s in shapes(n, d)]
    size = sum(v.size for v in values)
    print(f"{n} parameters ({size} numbers, width {d}); eager opt.step() with .grad set; "
          f"{'default threads' if args.all_threads else 'one compute thread each'}")
    names = list(OPTIMIZERS)[:2] if args.quick else list(OPTIMIZERS)
    for name in names:
        ours, ours_opt = make(aotjax, name, values, grads)
        theirs, theirs_opt = make(torch, name, values, grads)

        def step_ours(opt=ours_opt, last=ours[-1]):
            opt.step()
            last.block_until_ready()

        def step_theirs(opt=theirs_opt):
            with torch.no_grad():
                opt.step()

        step_ours(), step_theirs()  # NOTE: the first step compiles ours
        times = interleaved({"aotjax": step_ours, "torch": step_theirs}, args.number, args.repeat)
        steps = 1 + args.number * args.repeat
        diff = max(float(np.abs(np.asarray(a.detach().numpy()) - b.detach().numpy()).max())
                   for a, b in zip(ours, theirs, strict=True))
        print(f"  {name:8s} aotjax {times['aotjax'] * 1e3:7.3f} ms   torch foreach {times['torch'] * 1e3:7.3f} ms   "
              f"ratio {times['aotjax'] / times['torch']:.2f}x   max param diff after {steps} steps {diff:.1e}")


if __name__ == "__main__":
    main()
