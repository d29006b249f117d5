"""The example's generation (`examples/char_transformer.py: sample`): one compiled step over a fixed-size padded window
gives the characters the plain eager loop over a growing window gives (greedy, and sampled with the same seeds)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import aotjax
import aotjax.nn.functional as F

pytestmark = pytest.mark.x32_only  # NOTE: float32 modules in both modes: not run again in the x64 pass

EXAMPLE = Path(__file__).parent.parent / "examples" / "char_transformer.py"


def _example():
    spec = importlib.util.spec_from_file_location("char_transformer", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _eager_sample(model, ids: list[int], length: int, temperature: float) -> list[int]:
    """The plain loop: the model run eagerly on the last `context` ids (a window that grows, then slides)."""
    with aotjax.no_grad():
        for _ in range(length):
            logits = model(aotjax.tensor(np.array([ids[-model.context:]], np.int32)))[0, -1]
            if temperature == 0:
                ids.append(int(logits.argmax()))
                continue
            probs = F.softmax(logits / temperature, dim=-1).numpy().astype(np.float64)
            ids.append(int(np.random.default_rng(len(ids)).choice(len(probs), p=probs / probs.sum())))
    return ids


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_the_compiled_windowed_generation_gives_the_eager_loops_characters(temperature):
    ex = _example()
    aotjax.manual_seed(0)
    _, chars = ex.load_text(limit=300)
    model = ex.CharTransformer(len(chars), context=4, width=8, heads=2, depth=1, dropout=0.0)
    text = ex.sample(model, chars, prompt="Th", length=5, temperature=temperature, progress=False)
    assert model.training  # sample() turns dropout off while it runs, then back on
    model.eval()
    want = _eager_sample(model, [chars.index(c) for c in "Th"], 5, temperature)
    assert text == "".join(chars[i] for i in want)
    assert ex.generate_step.trace_count == 1  # the window of 2, 3, then 4 (sliding) characters: one program
