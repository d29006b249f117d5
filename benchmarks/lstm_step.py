"""An LSTM language model's training step, PyTorch code run as written: aotjax eagerly (`loss.backward();
opt.step()`) and compiled whole (`aotjax.jit` of the step), against torch eager and torch.compile of the same model,
same weights, same batches, same run.

    python benchmarks/lstm_step.py [--number 5] [--repeat 3] [--quick] [--no-torch-compile] [--all-threads]

The model: an embedding, a 2-layer LSTM (one `scan` per layer in aotjax), a linear head and cross-entropy; AdamW with
gradient clipping. Printed: the step time of each way (min over `repeat` runs of `number` steps), the ratios to torch
eager and to torch.compile, the first step's time (tracing and compiling), and the largest difference between the
weights after the same eager steps. torch.compile is timed when a C compiler is found (inductor needs one on CPU).
One compute thread each unless `--all-threads` (see benchmarks/imperative_step.py).
"""
from __future__ import annotations

import shutil

import numpy as np
import torch
from timing import interleaved, once, parse_step_args, step_parser

import aotjax


def make_model(T, vocab: int, d: int):
    nn = T.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.rnn = nn.LSTM(d, d, num_layers=2, batch_first=True)
            self.head = nn.Linear(d, vocab)

        def forward(self, tokens, targets):
            out, _ = self.rnn(self.embed(tokens))
            logits = self.head(out)
            return T.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    return LM()


def step_of(T, model, opt):
    def step(tokens, targets):
        opt.zero_grad(set_to_none=True)
        loss = model(tokens, targets)
        loss.backward()
        T.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach()
    return step


def main() -> None:
    parser = step_parser(__doc__, number=5, repeat=3)
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parse_step_args(parser)
    vocab, d, batch, length = (16, 8, 2, 6) if args.quick else (256, 128, 16, 32)
    torch.manual_seed(0)
    theirs = make_model(torch, vocab, d)
    ours, ours_jit = make_model(aotjax, vocab, d), make_model(aotjax, vocab, d)
    for model in (ours, ours_jit):
        with aotjax.no_grad():
            for p, tp in zip(model.parameters(), theirs.parameters(), strict=True):
                p.copy_(aotjax.tensor(tp.detach().numpy()))
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, vocab, (batch, length))
    targets = rng.integers(0, vocab, (batch, length))
    t_in, t_out = torch.tensor(tokens), torch.tensor(targets)
    a_in, a_out = aotjax.tensor(tokens.astype(np.int32)), aotjax.tensor(targets.astype(np.int32))

    ways = {
        "aotjax eager": (step_of(aotjax, ours, aotjax.optim.AdamW(ours.parameters(), lr=1e-3)), a_in, a_out),
        "aotjax jit(step)": (aotjax.jit(step_of(aotjax, ours_jit, aotjax.optim.AdamW(ours_jit.parameters(), lr=1e-3))),
                             a_in, a_out),
        "torch eager": (step_of(torch, theirs, torch.optim.AdamW(theirs.parameters(), lr=1e-3)), t_in, t_out),
    }
    if not args.no_torch_compile and shutil.which("cc"):
        compiled_model = make_model(torch, vocab, d)
        compiled_model.load_state_dict(theirs.state_dict())
        ways["torch.compile"] = (step_of(torch, torch.compile(compiled_model),
                                         torch.optim.AdamW(compiled_model.parameters(), lr=1e-3)), t_in, t_out)

    def runner(fn, x, y):
        def run():
            out = fn(x, y)
            if isinstance(out, aotjax.Tensor):
                out.block_until_ready()
        return run

    runs = {name: runner(*way) for name, way in ways.items()}
    first = {name: once(run) for name, run in runs.items()}
    times = interleaved(runs, args.number, args.repeat)
    diff = max(float(np.abs(np.asarray(a.detach().numpy()) - b.detach().numpy()).max())
               for a, b in zip(ours.parameters(), theirs.parameters(), strict=True))
    print(f"LSTM LM: vocab {vocab}, width {d}, 2 layers, batch {batch} x {length} tokens; AdamW, clip_grad_norm_; "
          f"{'default threads' if args.all_threads else 'one compute thread each'}")
    base = times["torch eager"]
    best_torch = times.get("torch.compile")
    for name, t in times.items():
        extra = f"   vs torch.compile {t / best_torch:.2f}x" if best_torch else ""
        print(f"  {name:17s} {t * 1e3:8.2f} ms   ratio to torch eager {t / base:.2f}x{extra}   "
              f"first step {first[name]:.2f} s")
    print(f"  max abs diff of the eager weights after the same steps: {diff:.2e}")


if __name__ == "__main__":
    main()
