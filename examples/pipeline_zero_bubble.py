"""Pipeline parallelism from aot's split backward: a 1F1B schedule and a zero-bubble (ZB-H1-style) schedule.

    python examples/pipeline_zero_bubble.py [--stages 4] [--microbatches 8] [--width 256] [--quick]

A model of `stages` residual MLP blocks is cut into one stage per (simulated CPU) device. Each stage is an aot
function `stage(x, weights)` lowered once and split (`aot(stage).lower(...).split_backward(weights=1)`) into three
compiled programs: `forward`, `backward_inputs` (dI: the cotangent of the stage's input, which the previous stage
waits for) and `backward_weights` (dW: deferrable until the optimizer step).

- **1F1B**: each stage runs its warm-up forwards, then alternates one forward and one whole backward (dI then dW).
- **Zero bubble (ZB-H1-style)**: the backward is two ops. A stage runs a ready dI first (the previous stage waits for
  it), else a forward (no more in flight than 1F1B: the same memory), else a deferred dW: the dW work fills the gaps
  where 1F1B's stages wait for each other. The order is made by list scheduling on the measured op times.

The schedules run the real programs on the stages' devices, accumulating each stage's weight gradients over the
micro-batches; the script checks them against `aotjax.grad` of the unpipelined model (same loss: the mean over
micro-batches). The bubble fraction of each schedule comes from a simulated timeline in which every op takes the
time its program measured here (median of a few runs), each stage a device running its ops in schedule order.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def _ensure_devices(n: int) -> None:
    """Ask XLA for `n` CPU devices (before jax starts its CPU client)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if _DEVICES_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {_DEVICES_FLAG}={n}".strip()


def stage_fn(x, w):
    """One stage: a residual MLP block, `x + gelu(x @ w1) @ w2`."""
    import aotjax.nn.functional as F
    return x + F.gelu(x @ w["w1"]) @ w["w2"]


def last_stage_fn(x, w, target):
    """The last stage: its block, then the micro-batch's loss."""
    return (stage_fn(x, w) - target).square().mean()


def build(aotjax, stages: int, width: int, micro: int, microbatches: int, seed: int = 0):
    """Per stage: its device and weights; the micro-batches and their targets (on the first and last stage)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    devices = [aotjax.device(f"cpu:{s}") for s in range(stages)]

    def t(*shape, scale=1.0, device=None):
        return aotjax.tensor((rng.standard_normal(shape) * scale).astype(np.float32)).to(device)

    weights = [{"w1": t(width, 2 * width, scale=width ** -0.5, device=d),
                "w2": t(2 * width, width, scale=(2 * width) ** -0.5, device=d)} for d in devices]
    xs = [t(micro, width, device=devices[0]) for _ in range(microbatches)]
    targets = [t(micro, width, device=devices[-1]) for _ in range(microbatches)]
    return devices, weights, xs, targets


def split_stages(aotjax, weights, xs, targets):
    """Each stage's aot function lowered for a micro-batch and split: its `BackwardSplit`."""
    splits = []
    for s, w in enumerate(weights):
        x = xs[0].to(w["w1"].device)
        if s == len(weights) - 1:
            lowered = aotjax.aot(last_stage_fn).lower(x, w, targets[0])
        else:
            lowered = aotjax.aot(stage_fn).lower(x, w)
        splits.append(lowered.split_backward(weights=1))
    return splits


# -- schedules: per stage, the order of its ops ("F", i), ("B", i) (dI), ("W", i) (dW), ("BW", i) (both) ---------
def one_f_one_b(stages: int, microbatches: int) -> list[list[tuple[str, int]]]:
    orders = []
    for s in range(stages):
        warmup = min(stages - s - 1, microbatches)
        order = [("F", i) for i in range(warmup)]
        f, b = warmup, 0
        while b < microbatches:
            if f < microbatches:
                order.append(("F", f))
                f += 1
            order.append(("BW", b))
            b += 1
        orders.append(order)
    return orders


def zero_bubble(stages: int, microbatches: int, cost: dict) -> list[list[tuple[str, int]]]:
    """A ZB-H1-style order, by list scheduling on the op times `cost`: whenever a stage is free it starts, of its ops
    whose inputs are ready, a dI first (the previous stage waits for it), else a forward (no more in flight than
    1F1B allows: the memory stays 1F1B's), else a deferred dW; with none ready it waits for the first that will be.
    The dW work so fills the gaps 1F1B leaves while stages wait for each other."""
    done: dict = {}
    free = [0.0] * stages
    nxt = {"F": [0] * stages, "B": [0] * stages, "W": [0] * stages}
    orders: list[list] = [[] for _ in range(stages)]
    for _ in range(3 * stages * microbatches):
        best = None
        for s in range(stages):
            for rank, op in enumerate(_candidates(s, stages, microbatches, nxt)):
                ready = _ready_time(op, s, stages, done)
                if ready is not None:
                    key = (max(free[s], ready), rank, s)
                    if best is None or key < best[0]:
                        best = (key, s, op)
        (start, _, _), s, op = best
        done[(op[0], s, op[1])] = free[s] = start + cost[op[0]][s]
        orders[s].append(op)
        nxt[op[0]][s] += 1
    return orders


def _candidates(s, stages, microbatches, nxt) -> list:
    """Stage `s`'s possible next ops, by priority: its next dI, its next forward (within 1F1B's in-flight limit),
    its next dW."""
    f, b, w = nxt["F"][s], nxt["B"][s], nxt["W"][s]
    ops = []
    if b < f:
        ops.append(("B", b))
    if f < microbatches and f - b < stages - s:
        ops.append(("F", f))
    if w < b:
        ops.append(("W", w))
    return ops


def _ready_time(op, s, stages, done):
    """When `op` of stage `s` may start (its inputs are made), or None if they are not yet."""
    kind, i = op
    if kind == "F":
        return 0.0 if s == 0 else done.get(("F", s - 1, i))
    if kind in ("B", "BW"):
        dep = ("F", s, i) if s == stages - 1 else ("B", s + 1, i)
        if s < stages - 1 and dep not in done:
            dep = ("BW", s + 1, i)
        return done.get(dep)
    return done.get(("B", s, i))


def timeline(orders, cost: dict) -> tuple[float, float]:
    """`(makespan, bubble fraction)` of per-stage op orders when each op takes `cost[kind][stage]`."""
    stages = len(orders)
    done: dict = {}
    free = [0.0] * stages
    position = [0] * stages
    busy = 0.0
    while any(position[s] < len(orders[s]) for s in range(stages)):
        progressed = False
        for s in range(stages):
            if position[s] == len(orders[s]):
                continue
            op = orders[s][position[s]]
            ready = _ready_time(op, s, stages, done)
            if ready is None:
                continue
            c = cost[op[0]][s]
            done[(op[0], s, op[1])] = free[s] = max(free[s], ready) + c
            busy += c
            position[s] += 1
            progressed = True
        if not progressed:
            raise RuntimeError("the schedule deadlocks: an op waits on one that comes after it")
    makespan = max(free)
    return makespan, 1.0 - busy / (stages * makespan)


# -- running a schedule --------------------------------------------------------------------------------------------
def run_schedule(orders, splits, weights, xs, targets):
    """Run per-stage `orders` for real (in an order that respects their dependencies): the mean loss and each
    stage's weight gradients summed over micro-batches (divided by their count: the gradient of the mean)."""
    import aotjax
    stages, m = len(orders), len(xs)
    acts, saved, cts, pending_w = {}, {}, {}, {}
    grads = [None] * stages
    losses = []
    cost = {"F": [1.0] * stages, "B": [1.0] * stages, "W": [1.0] * stages, "BW": [2.0] * stages}
    events = []  # NOTE: execute in the timeline's start order, which respects every dependency
    done: dict = {}
    free = [0.0] * stages
    position = [0] * stages
    while any(position[s] < len(orders[s]) for s in range(stages)):
        for s in range(stages):
            if position[s] < len(orders[s]):
                op = orders[s][position[s]]
                ready = _ready_time(op, s, stages, done)
                if ready is not None:
                    start = max(free[s], ready)
                    done[(op[0], s, op[1])] = free[s] = start + cost[op[0]][s]
                    events.append((start, s, op))
                    position[s] += 1
    for _, s, (kind, i) in sorted(events, key=lambda e: (e[0], e[1])):
        split, w = splits[s], weights[s]
        device = w["w1"].device
        if kind == "F":
            x = (xs[i] if s == 0 else acts[(s - 1, i)]).to(device)
            args = (x, w, targets[i]) if s == stages - 1 else (x, w)
            primals = split.primals(*args)
            outs = split.forward(*primals)
            acts[(s, i)] = outs[0]
            saved[(s, i)] = (primals, outs)
            if s == stages - 1:
                losses.append(outs[0])
            continue
        if kind in ("B", "BW"):
            ct = aotjax.ones_like(acts[(s, i)]) / m if s == stages - 1 else cts[(s + 1, i)].to(device)
            bwd_in = split.backward_inputs_from(*saved.pop((s, i)), [ct])
            input_grads, pending_w[(s, i)] = split.split_results(bwd_in, split.backward_inputs(*bwd_in))
            cts[(s, i)] = input_grads[0] if input_grads else None
        if kind in ("W", "BW"):
            wg = split.backward_weights(*pending_w.pop((s, i)))
            grads[s] = wg if grads[s] is None else [a + b for a, b in zip(grads[s], wg)]
    return sum(float(v.item()) for v in losses) / m, grads


def measure(splits, weights, xs, targets, repeat: int) -> dict:
    """Per stage, the median time of its forward, dI and dW programs (seconds), each run `repeat` times."""
    import aotjax
    cost: dict = {"F": [], "B": [], "W": []}
    for s, split in enumerate(splits):
        w = weights[s]
        x = xs[0].to(w["w1"].device)
        args = (x, w, targets[0]) if s == len(splits) - 1 else (x, w)
        primals = split.primals(*args)
        outs = split.forward(*primals)
        bwd_in = split.backward_inputs_from(primals, outs, [aotjax.ones_like(outs[0])])
        _, w_in = split.split_results(bwd_in, split.backward_inputs(*bwd_in))
        for kind, fn, a in (("F", split.forward, primals), ("B", split.backward_inputs, bwd_in),
                            ("W", split.backward_weights, w_in)):
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                for o in fn(*a):
                    o.block_until_ready()
                times.append(time.perf_counter() - t0)
            cost[kind].append(statistics.median(times))
    cost["BW"] = [b + w for b, w in zip(cost["B"], cost["W"])]
    return cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--micro-batch-size", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.width, args.micro_batch_size = 16, 4
    _ensure_devices(args.stages)
    import numpy as np

    import aotjax
    devices, weights, xs, targets = build(aotjax, args.stages, args.width, args.micro_batch_size, args.microbatches)
    splits = split_stages(aotjax, weights, xs, targets)
    cost = measure(splits, weights, xs, targets, repeat=3 if args.quick else 10)

    def whole(weights, xs, targets):  # NOTE: the unpipelined model, on one device
        total = 0.0
        for x, tgt in zip(xs, targets):
            h = x
            for w in weights[:-1]:
                h = stage_fn(h, w)
            total = total + last_stage_fn(h, weights[-1], tgt)
        return total / len(xs)

    one = devices[0]
    on_one = ([{k: v.to(one) for k, v in w.items()} for w in weights], [x.to(one) for x in xs],
              [t.to(one) for t in targets])
    expected_loss = float(whole(*on_one).item())
    expected = aotjax.grad(whole)(*on_one)
    print(f"{args.stages} stages on {', '.join(str(d) for d in devices)}; {args.microbatches} micro-batches of "
          f"{args.micro_batch_size} x {args.width}")
    print("measured per stage (ms): " + "; ".join(
        f"F {1e3 * f:.2f} dI {1e3 * b:.2f} dW {1e3 * w:.2f}" for f, b, w in zip(cost["F"], cost["B"], cost["W"])))
    schedules = {"1F1B": one_f_one_b(args.stages, args.microbatches),
                 "zero bubble": zero_bubble(args.stages, args.microbatches, cost)}
    unit = {"F": [1.0] * args.stages, "B": [1.0] * args.stages, "W": [1.0] * args.stages,
            "BW": [2.0] * args.stages}  # NOTE: the schedules' own bubbles, whatever this machine measured
    for name, orders in schedules.items():
        loss, grads = run_schedule(orders, splits, weights, xs, targets)
        err = max(float(np.abs(g.numpy() - e[k].numpy()).max())
                  for g_stage, e in zip(grads, expected) for g, k in zip(g_stage, ("w1", "w2")))
        makespan, bubble = timeline(orders, cost)
        _, unit_bubble = timeline(orders, unit)
        print(f"  {name:12s} bubble {100 * bubble:5.1f}% (equal op times: {100 * unit_bubble:4.1f}%)  step "
              f"{1e3 * makespan:7.2f} ms (simulated)  loss {loss:.6f} (unpipelined {expected_loss:.6f})  "
              f"max |grad - unpipelined grad| {err:.2e}")
        if not np.isclose(loss, expected_loss, rtol=1e-4) or err > 1e-4:
            raise SystemExit(f"{name}: the pipelined gradients differ from the unpipelined ones")
        print(f"    stage 0 order: {' '.join(f'{k}{i}' for k, i in orders[0])}")


if __name__ == "__main__":
    main()
