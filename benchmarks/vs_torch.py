"""aotjax against what a user would pick instead, on one nanoGPT-style GPT written once: torch eager, torch.compile,
aotjax's ways of running the same PyTorch source, and the same math hand-written in JAX; at several depths.

    python benchmarks/vs_torch.py [--layers 2,8,24] [--number 5] [--repeat 3] [--quick] [--no-torch-compile]
                                  [--wall] [--all-threads]

The model is `imperative_step.make_model` (token and position embeddings, `layers` pre-norm blocks of causal
self-attention and a GELU MLP, a head, cross-entropy), vocab 256, width 128, 4 heads, context 64, batch 8, AdamW
(lr 1e-3, weight decay 0.01); every contender starts from torch's initial weights and trains on the same batch.
The contenders, one row each per depth:

    torch eager            `loss = model(x, y); loss.backward(); opt.step(); opt.zero_grad()`
    torch.compile          the same step with `torch.compile(model)` (inductor: only when a C compiler is found)
    aotjax eager           the same step, aotjax's imperative autograd (`backward()` runs the recorded graph as one
                           compiled program)
    aotjax compile(model)  the same step with `aotjax.compile(model)`: `grad(aot)`, aot's forward and backward
                           programs, AdamW eagerly
    aotjax jit(step)       the whole step (forward, backward, AdamW) as one program: `aotjax.jit(step)`
    aotjax scan_layers     `jit(step)` of the model whose blocks run as one `nn.scan_layers` (the blocks' weights
                           stacked on each call: the program grows with the depth)
    aotjax LayerStack      the same with the blocks an `nn.LayerStack` (their weights stored stacked, the scan and
                           AdamW over the stacked tensors: one layer's program whatever the depth)
    jax                    hand-written: `jax.jit` of `jax.value_and_grad` of the same math (attention by
                           `jax.nn.dot_product_attention`) plus AdamW in jnp, parameters and optimizer state donated

Printed per depth: the step time (the least of `repeat` runs of `number` steps, the contenders interleaved; by
default the process's CPU time, steadier on a shared machine; `--wall` for wall-clock time), the first step's
wall-clock time (tracing and compiling: each op's first compile for the eager ways; inductor compiles in worker
processes, which the process's CPU time leaves out, and with its on-disk caches turned off), the ratio to
torch.compile (to torch eager when torch.compile is skipped), and how far each contender's first loss is from torch
eager's (all start from the same weights). Then XLA's memory analysis of the compiled whole steps
(`jit(...).lower(...).compile().memory_analysis()`: argument, output, temporary and aliased bytes; aotjax's `lower`
traces and compiles the step again, jax's reuses its cache). Each library computes on one thread
(`timing.one_compute_thread`) unless `--all-threads`. `--quick` uses a tiny model of 1 layer, compiled by XLA at
its lowest optimization level (a smoke test).
"""
from __future__ import annotations

import os
import shutil
import sys
import time
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import torch
from imperative_step import load, make_model
from timing import interleaved, parse_step_args, step_parser

import aotjax
import aotjax.nn.functional as F

LR, BETAS, EPS, WD = 1e-3, (0.9, 0.999), 1e-8, 0.01
FULL = {"vocab": 256, "d": 128, "heads": 4, "ctx": 64, "batch": 8}
QUICK = {"vocab": 32, "d": 16, "heads": 2, "ctx": 8, "batch": 2}


# -- PyTorch-shaped steps (one source for torch and aotjax) -------------------------------------------------------
def step_of(model, opt):
    """PyTorch's training step on `model` and `opt`, for either library."""
    def step(idx, targets):
        loss = model(idx, targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    return step


def layer_stack(model):
    """`model` with its blocks stored stacked (`aotjax.nn.LayerStack`), before its optimizer is made."""
    model.blocks = aotjax.nn.LayerStack(model.blocks)
    return model


def scanned(model):
    """`model` with its forward's loop over the blocks run as one `aotjax.nn.scan_layers`."""
    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(aotjax.arange(idx.shape[1]))
        logits = self.head(self.ln(aotjax.nn.scan_layers(self.blocks, x)))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
    model.forward = types.MethodType(forward, model)
    return model


# -- the same math in JAX -------------------------------------------------------------------------------------------
def _linear(p, name, x, dtype):
    w, b = p[f"{name}.weight"].astype(dtype), p[f"{name}.bias"].astype(dtype)
    y = x.reshape(-1, x.shape[-1]).astype(dtype) @ w.T + b  # NOTE: 2-D: XLA's CPU backward of a 3-D one is slow
    return y.reshape(*x.shape[:-1], -1)


def _layer_norm(p, name, x, eps=1e-5):
    x = x.astype(jnp.float32)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p[f"{name}.weight"] + p[f"{name}.bias"]


def _block(p, name, x, heads, dtype):
    b, t, d = x.shape
    qkv = _linear(p, f"{name}.qkv", _layer_norm(p, f"{name}.ln1", x), dtype)
    q, k, v = (z.reshape(b, t, heads, d // heads) for z in jnp.split(qkv, 3, axis=2))
    y = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(b, t, d)
    x = x + _linear(p, f"{name}.proj", y, dtype)
    h = jax.nn.gelu(_linear(p, f"{name}.fc", _layer_norm(p, f"{name}.ln2", x), dtype), approximate=False)
    return x + _linear(p, f"{name}.out", h, dtype)


def jax_loss(p, idx, targets, layers, heads, dtype=jnp.float32):
    """The GPT's loss in JAX; with `dtype` bfloat16, as torch's autocast runs it: the dense layers and the
    attention in bfloat16, the residual stream, layer norms and the loss in float32."""
    x = p["tok.weight"][idx] + p["pos.weight"][: idx.shape[1]]
    for i in range(layers):
        x = _block(p, f"blocks.{i}", x, heads, dtype)
    logits = _linear(p, "head", _layer_norm(p, "ln", x), dtype).astype(jnp.float32)
    logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]))
    return -jnp.take_along_axis(logp, targets.reshape(-1, 1), axis=1).mean()


def adamw(p, g, m, v, t):
    """torch.optim.AdamW's update of one parameter at step `t` (1-based)."""
    (b1, b2) = BETAS
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
    return p * (1 - LR * WD) - LR * m_hat / (jnp.sqrt(v_hat) + EPS), m, v


def jax_step_of(layers, heads, dtype=jnp.float32, tied: dict | None = None):
    """A jitted `(state, idx, targets) -> (state, loss)`, the state (parameters, moments, step) donated. `tied`:
    parameter names that read another parameter (`{"head.weight": "tok.weight"}`)."""
    def loss_of(params, idx, targets):
        return jax_loss({**params, **{k: params[v] for k, v in (tied or {}).items()}}, idx, targets, layers, heads,
                        dtype)

    def step(state, idx, targets):
        params, m, v, t = state
        loss, grads = jax.value_and_grad(loss_of)(params, idx, targets)
        t = t + 1
        new = {k: adamw(params[k], grads[k], m[k], v[k], t) for k in params}
        return ({k: u[0] for k, u in new.items()}, {k: u[1] for k, u in new.items()},
                {k: u[2] for k, u in new.items()}, t), loss
    return jax.jit(step, donate_argnums=0)


class JaxTrainer:
    """The JAX contender as a step callable like the others': it keeps its state between steps."""

    def __init__(self, weights: dict, layers: int, heads: int, dtype=jnp.float32, tied: dict | None = None):
        params = {k: jnp.asarray(w) for k, w in weights.items()}
        moments = [{k: jnp.zeros_like(w) for k, w in params.items()} for _ in range(2)]
        self.state = (params, *moments, jnp.zeros((), jnp.float32))
        self.step = jax_step_of(layers, heads, dtype, tied)

    def __call__(self, idx, targets):
        self.state, loss = self.step(self.state, idx, targets)
        return loss

    def memory(self, idx, targets):
        """XLA's memory analysis of the step (after a call: jax's caches make this free)."""
        return self.step.lower(self.state, idx, targets).compile().memory_analysis()


# -- one depth ------------------------------------------------------------------------------------------------------
def contenders(size: dict, layers: int, use_compile: bool) -> tuple[dict, dict]:
    """name -> (step, idx, targets) for every contender, all from torch's initial weights; and the jitted steps."""
    vocab, d, heads, ctx, batch = (size[k] for k in ("vocab", "d", "heads", "ctx", "batch"))
    torch.manual_seed(0)
    theirs = make_model(torch, vocab, d, heads, layers, ctx)
    weights = {k: p.detach().numpy().copy() for k, p in theirs.named_parameters()}
    rng = np.random.default_rng(0)
    idx, targets = rng.integers(0, vocab, (batch, ctx)), rng.integers(0, vocab, (batch, ctx))
    t_args = torch.tensor(idx), torch.tensor(targets)
    a_args = aotjax.tensor(idx.astype(np.int32)), aotjax.tensor(targets.astype(np.int32))
    j_args = jnp.asarray(idx, jnp.int32), jnp.asarray(targets, jnp.int32)

    def torch_step(compiled: bool):
        model = make_model(torch, vocab, d, heads, layers, ctx)
        model.load_state_dict(theirs.state_dict())
        return step_of(torch.compile(model) if compiled else model, torch.optim.AdamW(
            model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD))

    def ours(wrap_model=lambda m: m, wrap_step=lambda s: s, prepare=lambda m: m):
        model = make_model(aotjax, vocab, d, heads, layers, ctx)
        load(aotjax, model, list(weights.values()))
        model = prepare(model)
        opt = aotjax.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
        return wrap_step(step_of(wrap_model(model), opt))

    jitted = {"aotjax jit(step)": aotjax.jit(ours()), "aotjax scan_layers": aotjax.jit(ours(scanned)),
              "aotjax LayerStack": aotjax.jit(ours(scanned, prepare=layer_stack))}
    ways = {"torch eager": (torch_step(False), *t_args)}
    if use_compile:
        ways["torch.compile"] = (torch_step(True), *t_args)
    ways["aotjax eager"] = (ours(), *a_args)
    ways["aotjax compile(model)"] = (ours(aotjax.compile), *a_args)
    ways.update({name: (step, *a_args) for name, step in jitted.items()})
    ways["jax"] = (JaxTrainer(weights, layers, heads), *j_args)
    return ways, jitted


def _blocking(step, idx, targets):
    def run():
        loss = step(idx, targets)
        if not isinstance(loss, torch.Tensor):
            loss.block_until_ready()
        return loss
    return run


def _memory_line(name: str, analysis) -> str:
    if analysis is None:
        return f"    {name:22s} (XLA gave no memory analysis on this backend)"
    mib = {k: getattr(analysis, f"{k}_size_in_bytes", 0) / 2 ** 20 for k in ("argument", "output", "temp", "alias")}
    return (f"    {name:22s} arguments {mib['argument']:8.2f}  outputs {mib['output']:8.2f}  temporaries "
            f"{mib['temp']:8.2f}  aliased {mib['alias']:8.2f}")


def bench(size: dict, layers: int, args, timer) -> None:
    ways, jitted = contenders(size, layers, args.torch_compile)
    runs = {name: _blocking(*way) for name, way in ways.items()}
    first, losses = {}, {}
    for name, run in runs.items():  # NOTE: wall-clock: inductor compiles in worker processes
        start = time.perf_counter()
        losses[name] = float(run())
        first[name] = time.perf_counter() - start
    times = interleaved(runs, args.number, args.repeat, timer=timer)
    base_name = "torch.compile" if "torch.compile" in times else "torch eager"
    print(f"\n{layers} layers | step ms  | first step s | ratio to {base_name} | |first loss - torch eager's|")
    for name, t in times.items():
        print(f"  {name:22s} {t * 1e3:9.2f}  {first[name]:10.2f}     {t / times[base_name]:8.2f}x"
              f"            {abs(losses[name] - losses['torch eager']):.1e}", flush=True)
    print("  XLA memory analysis of the compiled whole steps (MiB):")
    for name, step in jitted.items():
        print(_memory_line(name, step.lower(*ways[name][1:]).compile().memory_analysis()), flush=True)
    print(_memory_line("jax", ways["jax"][0].memory(*ways["jax"][1:])), flush=True)


def main() -> None:
    parser = step_parser(__doc__, number=5, repeat=3)
    parser.add_argument("--layers", default="2,8,24", help="comma-separated depths")
    parser.add_argument("--no-torch-compile", dest="torch_compile", action="store_false",
                        help="skip torch.compile (its first compile takes a while on a small CPU)")
    parser.add_argument("--wall", action="store_true", help="wall-clock time instead of the process's CPU time")
    if "--quick" in sys.argv:  # NOTE: a smoke test: XLA's cheapest compiles (read when its client starts)
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()
    args = parse_step_args(parser)
    size, depths = (QUICK, [1]) if args.quick else (FULL, [int(n) for n in args.layers.split(",")])
    if args.torch_compile and not (shutil.which("cc") or shutil.which("gcc")):
        print("torch.compile: skipped: no C compiler (inductor needs one on CPU)")
        args.torch_compile = False
    elif not args.torch_compile:
        print("torch.compile: skipped (--no-torch-compile)")
    else:  # NOTE: inductor's on-disk caches off: its first step compiles cold, as aotjax's and jax's do here
        torch.compiler.config.force_disable_caches = True
        warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
    timer = time.perf_counter if args.wall else time.process_time
    print(f"GPT: vocab {size['vocab']}, d={size['d']}, {size['heads']} heads, context {size['ctx']}, batch "
          f"{size['batch']}; AdamW; {jax.devices()[0].platform}; "
          f"{'default threads' if args.all_threads else 'one compute thread each'}; "
          f"{'wall-clock' if args.wall else 'process CPU'} time, steps the least of {args.repeat} x {args.number}")
    for layers in depths:
        bench(size, layers, args, timer)


if __name__ == "__main__":
    main()
