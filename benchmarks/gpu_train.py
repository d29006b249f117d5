"""GPT-2 small trained for a few steps on one device, in one command: aotjax's compiled step (`jit(step)`, and with
its blocks as one `nn.scan_layers`) against torch.compile, torch eager and the same math hand-written in JAX.

    python benchmarks/gpu_train.py [--steps 20] [--batch 8] [--no-torch-compile] [--quick]

The model is `imperative_step.make_model` at GPT-2 small's shape: 12 layers, 12 heads, width 768, context 1024,
vocab 50257, the head's weight tied to the token embedding (124M parameters, plus the head's bias); AdamW (lr 1e-3,
weight decay 0.01); mixed precision as torch runs it, the forward under `autocast(dtype=bfloat16)` (aotjax's
`aotjax.autocast` inside the compiled step; JAX's hand-written dense layers and attention in bfloat16, the residual
stream, norms and loss in float32), parameters and optimizer state in float32. Every contender starts from torch's
initial weights and trains on the same batch (random tokens) for `steps` steps:

    torch eager    `with autocast: loss = model(x, y)`; `loss.backward(); opt.step(); opt.zero_grad()`
    torch.compile  the same with `torch.compile(model)`
    aotjax jit     `aotjax.jit(step)` of the same step: forward, backward and AdamW as one program
    aotjax scan    the same, the model's blocks an `aotjax.nn.LayerStack` run as one `aotjax.nn.scan_layers` (one
                   layer's program; the weights stored stacked, updated in place by AdamW)
    jax            `jax.jit` of `jax.value_and_grad` plus AdamW in jnp, the state donated

Printed per contender: the first step's time (tracing and compiling), the mean time of the other steps (each step
waited on), tokens/s, MFU, the ratio to torch.compile's step (to torch eager's when torch.compile did not run),
the first and last loss, and memory: the device's peak (`Device.memory_stats()`; jax's allocator, which aotjax and
jax share, so it is the peak of the process so far) and torch's (`torch.cuda.max_memory_allocated`, reset per
contender).

MFU = FLOPs per step / step time / the device's peak, with nanoGPT's count of a step's FLOPs:
`(6 N + 12 L H hd T) * tokens`, N the parameters less the position embedding, L layers, H heads, hd the head
width, T the context, tokens = batch * T (forward and backward; the causal mask's skipped half is counted). Peak:
989 TFLOP/s dense bf16 on H100 and H200, 312 on A100; on a CPU (or another device) MFU is printed as n/a.

Torch runs on CUDA when both torch and jax have a GPU; on a CPU-only torch it runs on the CPU in `--quick` only, and
is skipped with the reason on the full model. `--quick`: a tiny model on the CPU in seconds (what CI runs; XLA at
its lowest optimization level; torch.compile skipped). Timing on a GPU needs one command: `python
benchmarks/gpu_train.py` (compiles take most of its few minutes).
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import traceback
import types

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # NOTE: torch and jax share the device's memory
if "--quick" in sys.argv:  # NOTE: a smoke test: XLA's cheapest compiles (read when its client starts)
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()

try:
    import torch
except ImportError:  # NOTE: imperative_step and vs_torch import torch at their top; only their other parts run then
    torch = None
    sys.modules["torch"] = types.ModuleType("torch")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from imperative_step import make_model  # noqa: E402
from vs_torch import BETAS, EPS, LR, WD, JaxTrainer, layer_stack, scanned  # noqa: E402

import aotjax  # noqa: E402

GPT2_SMALL = {"vocab": 50257, "d": 768, "heads": 12, "layers": 12, "ctx": 1024}
QUICK = {"vocab": 64, "d": 32, "heads": 2, "layers": 2, "ctx": 16}
PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12}  # dense TFLOP/s, by a word of `device_kind`
TIED = {"head.weight": "tok.weight"}


def peak_flops(device) -> float | None:
    if device.platform != "gpu":
        return None
    return next((v for k, v in PEAK_BF16.items() if k in device.device_kind), None)


def flops_per_step(n_params: int, cfg: dict, batch: int) -> float:
    hd = cfg["d"] // cfg["heads"]
    return (6 * n_params + 12 * cfg["layers"] * cfg["heads"] * hd * cfg["ctx"]) * batch * cfg["ctx"]


# -- the contenders -----------------------------------------------------------------------------------------------
def gpt(T, cfg: dict):
    model = make_model(T, cfg["vocab"], cfg["d"], cfg["heads"], cfg["layers"], cfg["ctx"])
    model.head.weight = model.tok.weight  # GPT-2's tied embedding
    return model


def step_of(T, model, opt, device_type: str):
    """PyTorch's mixed-precision training step, for either library."""
    def step(idx, targets):
        with T.autocast(device_type, dtype=T.bfloat16):
            loss = model(idx, targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    return step


def torch_contender(weights: dict, cfg: dict, device: str, compiled: bool):
    model = gpt(torch, cfg).to(device)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.tensor(weights[name]))
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    step = step_of(torch, torch.compile(model) if compiled else model, opt, device)

    def run(idx, targets):
        loss = step(idx, targets)
        if device == "cuda":
            torch.cuda.synchronize()
        return loss
    return run


def aotjax_contender(weights: dict, cfg: dict, scan: bool):
    model = gpt(aotjax, cfg)
    with aotjax.no_grad():
        for name, p in model.named_parameters():
            p.copy_(aotjax.tensor(weights[name]))
    if scan:  # NOTE: the blocks' weights stored stacked: the scan and AdamW run over them as they are
        model = layer_stack(model)
    opt = aotjax.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    device_type = "cuda" if jax.devices()[0].platform == "gpu" else "cpu"
    step = aotjax.jit(step_of(aotjax, scanned(model) if scan else model, opt, device_type))
    return lambda idx, targets: step(idx, targets).block_until_ready()


def jax_contender(weights: dict, cfg: dict):
    trainer = JaxTrainer({k: w for k, w in weights.items() if k not in TIED}, cfg["layers"], cfg["heads"],
                         jnp.bfloat16, TIED)
    return lambda idx, targets: trainer(idx, targets).block_until_ready()


# -- running ------------------------------------------------------------------------------------------------------
def train(run, idx, targets, steps: int) -> dict:
    start = time.perf_counter()
    losses = [float(run(idx, targets))]
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steps - 1):
        loss = run(idx, targets)
    rest = (time.perf_counter() - start) / max(steps - 1, 1)
    losses.append(float(loss) if steps > 1 else losses[0])
    return {"first": first, "step": rest, "losses": losses}


def _jax_peak() -> str:
    stats = jax.devices()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return f"{peak / 2 ** 30:.2f} GiB (process so far)" if peak is not None else "n/a"


def torch_device(args) -> tuple[str | None, str]:
    """Where torch runs, or None and why not."""
    if torch is None:
        return None, "torch is not installed"
    if jax.devices()[0].platform == "gpu" and torch.cuda.is_available():
        return "cuda", ""
    if args.quick:
        return "cpu", ""
    return None, "torch has no CUDA device here (a CPU run of the full model would take hours)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--no-torch-compile", dest="torch_compile", action="store_false")
    parser.add_argument("--no-torch-eager", dest="torch_eager", action="store_false")
    parser.add_argument("--quick", action="store_true", help="a tiny model on the CPU: a smoke test of the script")
    args = parser.parse_args()
    cfg, batch, steps = (QUICK, 2, min(args.steps, 3)) if args.quick else (GPT2_SMALL, args.batch, args.steps)
    device = jax.devices()[0]
    if device.platform == "cpu" and not args.quick:
        sys.exit("gpu_train.py: jax found no GPU; the full GPT-2 run needs one (on a CPU, run it with --quick)")
    t_device, why_not = torch_device(args)
    if t_device == "cpu":
        torch.set_num_threads(1)  # NOTE: torch's default pool spins on a small shared CPU

    if torch is not None:
        torch.manual_seed(0)
    else:  # NOTE: no torch: aotjax's initialization (the same distributions)
        aotjax.manual_seed(0)
    lib = torch if torch is not None else aotjax
    weights = {k: np.asarray(p.detach().numpy()).copy() for k, p in gpt(lib, cfg).named_parameters()}
    weights["tok.weight"] *= 0.02  # NOTE: GPT-2's embedding (the head's weight too) has std 0.02, not nn.Embedding's 1
    n_params = sum(w.size for k, w in weights.items() if k != "pos.weight")
    rng = np.random.default_rng(0)
    idx, targets = rng.integers(0, cfg["vocab"], (2, batch, cfg["ctx"]))
    flops, peak = flops_per_step(n_params, cfg, batch), peak_flops(device)
    print(f"GPT-2 {'(tiny, --quick)' if args.quick else 'small'}: {cfg['layers']} layers, {cfg['heads']} heads, "
          f"d={cfg['d']}, context {cfg['ctx']}, vocab {cfg['vocab']}, {n_params / 1e6:.3g}M parameters (less the "
          f"position embedding); batch {batch} x {cfg['ctx']} tokens; AdamW; autocast bfloat16; {steps} steps")
    print(f"device: {device.device_kind} ({device.platform}); jax {jax.__version__}"
          f"{'; torch ' + torch.__version__ + ' on ' + t_device if t_device else ''}; "
          f"{flops / 1e12:.3f} TFLOP per step; peak {f'{peak / 1e12:.0f} TFLOP/s' if peak else 'unknown: MFU n/a'}")

    ways = {}
    if t_device is None:
        print(f"torch: skipped: {why_not}")
    else:
        t_args = [torch.tensor(a).to(t_device) for a in (idx, targets)]
        if args.torch_eager:
            ways["torch eager"] = (lambda: torch_contender(weights, cfg, t_device, False), t_args)
        if not args.torch_compile or args.quick:
            print(f"torch.compile: skipped ({'--quick' if args.quick else '--no-torch-compile'})")
        else:
            ways["torch.compile"] = (lambda: torch_contender(weights, cfg, t_device, True), t_args)
    a_args = [aotjax.tensor(a.astype(np.int32)) for a in (idx, targets)]
    ways["aotjax jit"] = (lambda: aotjax_contender(weights, cfg, False), a_args)
    ways["aotjax scan"] = (lambda: aotjax_contender(weights, cfg, True), a_args)
    ways["jax"] = (lambda: jax_contender(weights, cfg), [jnp.asarray(a, jnp.int32) for a in (idx, targets)])

    results = {}
    for name, (make, call_args) in ways.items():
        if t_device == "cuda" and name.startswith("torch"):
            torch.cuda.reset_peak_memory_stats()
        try:
            results[name] = train(make(), *call_args, steps)
        except Exception as e:  # NOTE: one contender failing (a compiler missing, memory) leaves the others' figures
            traceback.print_exc()
            print(f"{name}: failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
            continue
        r = results[name]
        r["memory"] = (f"{torch.cuda.max_memory_allocated() / 2 ** 30:.2f} GiB" if name.startswith("torch")
                       and t_device == "cuda" else "n/a" if name.startswith("torch") else _jax_peak())
        print(f"{name}: first step {r['first']:.2f} s, then {r['step'] * 1e3:.1f} ms a step", flush=True)
        gc.collect()
    base = next((n for n in ("torch.compile", "torch eager") if n in results), None)
    print(f"\n  {'contender':14s} {'first step':>10s} {'step':>10s} {'tokens/s':>10s} {'MFU':>6s} "
          f"{'ratio to ' + (base or 'torch'):>24s}  {'loss first -> last':>20s}  peak memory")
    for name, r in results.items():
        mfu = f"{flops / r['step'] / peak:.1%}" if peak else "n/a"
        ratio = f"{r['step'] / results[base]['step']:.2f}x" if base else "n/a"
        print(f"  {name:14s} {r['first']:9.2f}s {r['step'] * 1e3:8.1f}ms {batch * cfg['ctx'] / r['step']:10.0f} "
              f"{mfu:>6s} {ratio:>24s}  {r['losses'][0]:8.4f} -> {r['losses'][-1]:8.4f}  {r['memory']}")


if __name__ == "__main__":
    main()
