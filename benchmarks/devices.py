"""A data-parallel training step on 1 vs 8 simulated CPU devices: aotjax.jit(train_step) with the batch sharded
over a `data` axis and the parameters replicated (the gradient's all-reduce left to XLA), vs jax.jit of the same
math (SGD with momentum in plain JAX, donated buffers), each device count in its own process.

    python benchmarks/devices.py [--devices 1 8] [--number 20] [--repeat 5] [--quick]

Each device count runs in a subprocess with `XLA_FLAGS=--xla_force_host_platform_device_count=N` (the count is fixed
when jax starts). The model is train_step.py's MLP (Linear -> GELU -> Linear -> GELU -> Linear, cross-entropy), the
same initial weights and batch in both. Simulated devices share the host's cores: the figures measure what the
partitioned program costs (collectives, per-device dispatch), not a speedup real devices would give.

Printed per device count: the step time of each (min over `repeat` runs of `number` steps, interleaved), the ratio
(aotjax / JAX), the first call (trace + compile), the largest difference of the parameters after the same steps;
then each one's time on N devices relative to 1.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

LR, MOMENTUM = 0.05, 0.9


def measure(args) -> dict:
    """In a process with `args.devices` devices: the two steps' times and their parameters' difference."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    from timing import block_all, interleaved, once
    from train_step import _weights, jax_loss, make_model, train_step

    import aotjax

    assert len(jax.devices()) == args.devices, (len(jax.devices()), args.devices)
    batch, sizes = (16, [16, 32, 32, 4]) if args.quick else (512, [128, 512, 512, 10])
    mesh = Mesh(np.array(jax.devices()), ("data",))
    rows, rep = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    rng = np.random.default_rng(0)
    weights = _weights(rng, sizes)
    x_np = rng.normal(size=(batch, sizes[0])).astype(np.float32)
    y_np = rng.integers(0, sizes[-1], size=batch).astype(np.int32)

    model = make_model(sizes)
    model.load_state_dict(weights)
    with aotjax.no_grad():  # the parameters replicated on every device, in place
        for p in model.parameters():
            p.copy_(aotjax.device_put(p, rep))
    opt = aotjax.optim.SGD(model.named_parameters(), lr=LR, momentum=MOMENTUM)
    step = aotjax.jit(train_step)
    x, y = aotjax.device_put(aotjax.tensor(x_np), rows), aotjax.device_put(aotjax.tensor(y_np), rows)

    n_layers = len(sizes) - 1

    def jax_step(params, bufs, x, y, first):
        loss, grads = jax.value_and_grad(jax_loss)(params, x, y, n_layers)
        # NOTE: torch's SGD: the first step's buffer is the gradient itself, later ones momentum * buf + grad
        bufs = jax.tree_util.tree_map(lambda b, g: jnp.where(first, g, MOMENTUM * b + g), bufs, grads)
        params = jax.tree_util.tree_map(lambda p, b: p - LR * b, params, bufs)
        return params, bufs, loss

    jstep = jax.jit(jax_step, donate_argnums=(0, 1))
    state = {"params": jax.device_put({k: jnp.asarray(v) for k, v in weights.items()}, rep)}
    state["bufs"] = jax.tree_util.tree_map(jnp.zeros_like, state["params"])
    state["first"] = True
    jx, jy = jax.device_put(jnp.asarray(x_np), rows), jax.device_put(jnp.asarray(y_np), rows)

    def ours():
        block_all([step(model, opt, x, y), model[0].weight])

    def theirs():
        state["params"], state["bufs"], loss = jstep(state["params"], state["bufs"], jx, jy, state["first"])
        state["first"] = False
        block_all([loss, state["params"]])

    first = {"aotjax": once(ours), "jax": once(theirs)}
    times = interleaved({"aotjax": ours, "jax": theirs}, args.number, args.repeat)
    ours_params = {k: np.asarray(v.numpy()) for k, v in model.state_dict().items()}
    diff = max(float(np.abs(ours_params[k] - np.asarray(v)).max()) for k, v in state["params"].items())
    assert len(model[0].weight.devices()) == args.devices  # the written-back parameters stay replicated
    return {"devices": args.devices, "times": times, "first": first, "diff": diff, "batch": batch, "sizes": sizes,
            "traced": step.trace_count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        (args.devices,) = args.devices
        print(json.dumps(measure(args)))
        return
    results = {}
    for n in args.devices:
        env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={n}", JAX_PLATFORMS="cpu")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--devices", str(n), "--number",
               str(args.number), "--repeat", str(args.repeat), *(["--quick"] if args.quick else [])]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode:
            sys.exit(f"the {n}-device run failed:\n{proc.stdout}\n{proc.stderr}")
        results[n] = json.loads(proc.stdout.strip().splitlines()[-1])
    some = next(iter(results.values()))
    print(f"data-parallel MLP {some['sizes']}, batch {some['batch']} sharded over the devices, SGD momentum "
          f"{MOMENTUM}; {1 + args.repeat * args.number} steps each")
    for n, r in results.items():
        t, f = r["times"], r["first"]
        print(f"  {n} device(s)  step  aotjax {t['aotjax'] * 1e3:8.3f} ms   jax {t['jax'] * 1e3:8.3f} ms   "
              f"ratio {t['aotjax'] / t['jax']:.2f}x   first call aotjax {f['aotjax']:.2f} s  jax {f['jax']:.2f} s   "
              f"max abs diff {r['diff']:.1e}  traced {r['traced']}")
    base = results[args.devices[0]]["times"]
    for n, r in results.items():
        if n != args.devices[0]:
            print(f"  {n} vs {args.devices[0]} device(s): aotjax {r['times']['aotjax'] / base['aotjax']:.2f}x the "
                  f"time, jax {r['times']['jax'] / base['jax']:.2f}x")


if __name__ == "__main__":
    main()
