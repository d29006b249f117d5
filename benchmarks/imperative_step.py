"""PyTorch training code run as written, eagerly: a nanoGPT-style step (`loss.backward(); opt.step();
opt.zero_grad()`) with aotjax's imperative autograd vs torch eager, same model, same weights, same run.

    python benchmarks/imperative_step.py [--number 10] [--repeat 5] [--quick] [--all-threads]

Each library computes on one thread (`timing.one_compute_thread`), as the issue measures; `--all-threads` keeps
their default thread pools (on a 2-core machine XLA's CPU client and torch's then share the cores differently,
which the ratio then measures as much as the step).

The model is written once against a library `T` (aotjax or torch): token and position embeddings, `layers` blocks
of LayerNorm -> causal self-attention -> LayerNorm -> GELU MLP, a tied-free head and cross-entropy; AdamW. aotjax
records each eager op (one node), and `backward()` runs the recorded graph as one compiled program cached by the
graph's structure (a loop's backward compiles once).

Printed: the step time of each (min over `repeat` runs of `number` steps), the ratio (aotjax / torch eager), the
first step's time, the cost recording adds to one eager op (a chain of elementwise ops with and without
`requires_grad`), the largest difference between the two models' weights after the same steps, and the recorded
nodes still alive after the steps (flat: a graph is freed by its backward).
"""
from __future__ import annotations

import gc

import numpy as np
import torch
from timing import interleaved, once, parse_step_args, step_parser

import aotjax
from aotjax.autograd.graph import Node


def make_model(T, vocab, d, heads, layers, ctx):
    nn, F = T.nn, T.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

        def forward(self, idx, targets):
            x = self.tok(idx) + self.pos(T.arange(idx.shape[1]))
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits.view(-1, vocab), targets.view(-1))

    return GPT()


def load(T, model, weights):
    with T.no_grad():
        for p, w in zip(model.parameters(), weights, strict=True):
            p.copy_(T.tensor(w))


def run_steps(T, model, opt, idx, targets, n):
    for _ in range(n):
        loss = model(idx, targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss


def recording_cost(number: int) -> tuple[float, float]:
    """Seconds per eager op (`x * 1.0001`), without and with `requires_grad`."""
    x, w = aotjax.ones(16), aotjax.ones(16, requires_grad=True)
    times = interleaved({"plain": lambda: x * 1.0001, "recording": lambda: w * 1.0001}, number, 5)
    return times["plain"], times["recording"]


def main() -> None:
    parser = step_parser(__doc__, number=10, repeat=5)
    args = parse_step_args(parser)
    vocab, d, heads, layers, ctx, batch = (32, 16, 2, 1, 8, 2) if args.quick else (256, 128, 4, 4, 64, 8)
    torch.manual_seed(0)
    theirs = make_model(torch, vocab, d, heads, layers, ctx)
    weights = [p.detach().numpy().copy() for p in theirs.parameters()]
    ours = make_model(aotjax, vocab, d, heads, layers, ctx)
    load(aotjax, ours, weights)
    rng = np.random.default_rng(0)
    idx_np = rng.integers(0, vocab, (batch, ctx))
    tgt_np = rng.integers(0, vocab, (batch, ctx))
    idx_t, tgt_t = torch.tensor(idx_np), torch.tensor(tgt_np)
    idx_a = aotjax.tensor(idx_np.astype(np.int32))
    tgt_a = aotjax.tensor(tgt_np.astype(np.int32))
    opt_t = torch.optim.AdamW(theirs.parameters(), lr=1e-3)
    opt_a = aotjax.optim.AdamW(ours.parameters(), lr=1e-3)

    def step_ours():
        run_steps(aotjax, ours, opt_a, idx_a, tgt_a, 1).block_until_ready()

    def step_theirs():
        run_steps(torch, theirs, opt_t, idx_t, tgt_t, 1)

    first = {"aotjax": once(step_ours), "torch": once(step_theirs)}
    times = interleaved({"aotjax": step_ours, "torch": step_theirs}, args.number, args.repeat)
    diff = max(float(np.abs(np.asarray(a.detach().numpy()) - b.detach().numpy()).max())
               for a, b in zip(ours.parameters(), theirs.parameters(), strict=True))
    plain, recorded = recording_cost(200 if args.quick else 2000)
    gc.collect()
    live = sum(1 for o in gc.get_objects() if isinstance(o, Node))
    steps = 1 + args.repeat * args.number
    threads = "default threads" if args.all_threads else "one compute thread each"
    print(f"GPT: {layers} layers, d={d}, {heads} heads, context {ctx}, batch {batch}, vocab {vocab}; AdamW; "
          f"{steps} eager steps each (forward, backward(), step(), zero_grad()); {threads}")
    print(f"  step        aotjax {times['aotjax'] * 1e3:8.2f} ms   torch eager {times['torch'] * 1e3:8.2f} ms   "
          f"ratio {times['aotjax'] / times['torch']:.2f}x")
    print(f"  first step  aotjax {first['aotjax']:8.3f} s    torch eager {first['torch']:8.3f} s")
    print(f"  one eager op: {plain * 1e6:.2f} us plain, {recorded * 1e6:.2f} us recording "
          f"(+{(recorded - plain) * 1e6:.2f} us)")
    print(f"  max abs diff of the weights after the same steps: {diff:.2e}; recorded nodes alive after: {live}")


if __name__ == "__main__":
    main()
