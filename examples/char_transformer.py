"""A tiny character-level transformer language model, written as PyTorch code is written (`nn.Module`s,
`AdamW`, dropout from the global generator, a training loop), trained with its whole step compiled as one XLA
program: `aotjax.jit(train_step)(model, opt, x, y)` updates the parameters, the optimizer's state and the random
generator in place through donated buffers. Generation (`sample`) is compiled too: one `aotjax.jit` step per
character over a fixed-size window (padded, the padding hidden by the causal mask), traced once.

    python examples/char_transformer.py                      # trains on examples/data/lighthouse.txt
    python examples/char_transformer.py --steps 300 --plot loss.png --sample 200

Porting from PyTorch: `loss.backward(); opt.step()` becomes `loss, grads = aotjax.value_and_grad(loss_fn)(params)`
and `opt.step(grads)`, where `loss_fn` calls the model with `aotjax.func.functional_call(model, params, (x,))`.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import aotjax
import aotjax.nn as nn
import aotjax.nn.functional as F
from aotjax.func import functional_call

TEXT = Path(__file__).parent / "data" / "lighthouse.txt"


# -- the model ---------------------------------------------------------------------------------------
class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention, then an MLP, each added to the residual stream."""

    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width),
                                 nn.Dropout(dropout))

    def forward(self, x, mask):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


class CharTransformer(nn.Module):
    def __init__(self, vocab: int, context: int, width: int = 32, heads: int = 4, depth: int = 2,
                 dropout: float = 0.1):
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(width, heads, dropout) for _ in range(depth)])
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.drop(self.tok(idx) + self.pos(aotjax.arange(t)))
        mask = aotjax.ones(t, t).triu(1).bool()  # True: may not attend (a later position)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln(x))


# -- data ----------------------------------------------------------------------------------------------
def load_text(path: Path = TEXT, limit: int | None = None) -> tuple[np.ndarray, list[str]]:
    text = path.read_text()[:limit]
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    return np.array([index[c] for c in text], np.int32), chars


def batches(data: np.ndarray, context: int, batch: int, rng: np.random.Generator):
    while True:
        starts = rng.integers(0, len(data) - context - 1, size=batch)
        x = np.stack([data[s:s + context] for s in starts])
        y = np.stack([data[s + 1:s + context + 1] for s in starts])
        yield aotjax.tensor(x), aotjax.tensor(y)


# -- one training step, compiled whole -----------------------------------------------------------------
def loss_of(model, params, x, y):
    logits = functional_call(model, params, (x,))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def train_step(model, opt, x, y):
    """PyTorch's `loss = ...; loss.backward(); opt.step()`."""
    params = dict(model.named_parameters())
    loss, grads = aotjax.value_and_grad(lambda p: loss_of(model, p, x, y))(params)
    opt.step(grads)
    return loss


def train(steps: int = 200, context: int = 32, batch: int = 16, lr: float = 3e-3, seed: int = 0,
          limit: int | None = None, progress: bool = True, log=None):
    """Train a fresh model; returns `(model, losses, chars)`. `log` (e.g. `print`) gets the time spent building
    the model and the time of the training loop, which is what the progress bar shows."""
    start = time.perf_counter()
    aotjax.manual_seed(seed)
    data, chars = load_text(limit=limit)
    context = min(context, len(data) - 2)
    model = CharTransformer(len(chars), context)
    opt = aotjax.optim.AdamW(model.named_parameters(), lr=lr, weight_decay=0.01)
    step = aotjax.jit(train_step)
    stream = batches(data, context, batch, np.random.default_rng(seed))
    if log is not None:  # NOTE: eager ops compile once per op and shape, so building the model takes seconds
        log(f"built the model and its optimizer in {time.perf_counter() - start:.1f} s")
    losses, first_step = [], 0.0
    start = time.perf_counter()
    bar = _progress(range(steps), progress)
    for _ in bar:
        x, y = next(stream)
        losses.append(float(step(model, opt, x, y)))
        first_step = first_step or time.perf_counter() - start
        if progress:
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    if log is not None:
        log(f"trained {steps} steps in {time.perf_counter() - start:.1f} s, the first {first_step:.1f} s of it "
            f"(tracing and compiling the step); compiled the step {step.trace_count} time(s)")
    return model, losses, chars


def next_char_probs(model, window, last, temperature):
    """The next character's probabilities after `window[0, :last + 1]`: the model reads the whole fixed-size window
    (`[1, context]`, padded after `last`), and its causal mask keeps a position from seeing the padding after it,
    so every step has the same shapes and `aotjax.jit` traces it once."""
    logits = model(window)[0, last] / temperature
    return F.softmax(logits, dim=-1)


generate_step = aotjax.jit(next_char_probs)


def sample(model, chars: list[str], prompt: str = "The ", length: int = 100, temperature: float = 0.8,
           progress: bool = True) -> str:
    """Generate text one character at a time (the model in eval mode: dropout off), each from the last `context`
    characters, with `temperature` (0: the most likely character, greedy), under one compiled step."""
    model.eval()
    index = {c: i for i, c in enumerate(chars)}
    ids = [index.get(c, 0) for c in prompt]
    window = np.zeros((1, model.context), np.int32)  # NOTE: the padding (id 0) after `last` is masked out
    scale = aotjax.tensor(temperature or 1.0)
    bar = _progress(range(length), progress, "sampling", "char")
    with aotjax.no_grad():
        for _ in bar:
            seen = ids[-model.context:]
            window[0, :len(seen)] = seen
            probs = generate_step(model, aotjax.tensor(window), aotjax.tensor(len(seen) - 1), scale)
            probs = probs.numpy().astype(np.float64)
            ids.append(int(probs.argmax()) if temperature == 0 else
                       int(np.random.default_rng(len(ids)).choice(len(chars), p=probs / probs.sum())))
    model.train()
    return "".join(chars[i] for i in ids)


def plot(losses: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(losses, lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title("char transformer, aotjax.jit(train_step)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _progress(it, enabled: bool, desc: str = "training", unit: str = "step"):
    if not enabled:
        return it
    from tqdm import tqdm

    return tqdm(it, desc=desc, unit=unit)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=Path("char_transformer_loss.png"))
    parser.add_argument("--sample", type=int, default=120, help="characters to generate after training")
    args = parser.parse_args(argv)
    model, losses, chars = train(args.steps, lr=args.lr, seed=args.seed, log=print)
    print(f"loss: {losses[0]:.3f} at the first step, {np.mean(losses[-10:]):.3f} over the last 10")
    plot(losses, args.plot)
    print(f"loss curve: {args.plot}")
    if args.sample:
        start = time.perf_counter()
        text = sample(model, chars, length=args.sample)
        print(f"sampled {args.sample} characters in {time.perf_counter() - start:.1f} s (one compiled step, "
              f"traced {generate_step.trace_count} time(s)):\n{text}")


if __name__ == "__main__":
    main()
