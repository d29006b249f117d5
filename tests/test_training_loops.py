"""PyTorch training loops as people write them — a DataLoader, `loss.backward()`, gradient accumulation,
`clip_grad_norm_`, an optimizer and an LR scheduler — written once against a library `T` and run with torch and
with aotjax (`import aotjax as torch`): eagerly, and with the whole step (accumulation, clipping, the update)
compiled by `aotjax.jit`, traced once. Losses and parameters must agree with torch's at every step."""
import numpy as np
import pytest
import torch

import aotjax

_RNG = np.random.default_rng(0)
_IMAGES = _RNG.standard_normal((16, 1, 6, 6)).astype(np.float32)
_LABELS = _RNG.integers(0, 3, 16)
_TOKENS = _RNG.integers(0, 11, (12, 7))


def _copy_weights(theirs, ours) -> None:
    with aotjax.no_grad():
        for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
            assert name == tname
            p.copy_(aotjax.tensor(tp.detach().numpy()))


def _int_tensor(T, values):
    return T.tensor(values.astype(np.int64 if T is torch else np.int32))


# -- the models, written once (a bias before BatchNorm has no gradient but rounding, which Adam would amplify) ----
def conv_net(T):
    nn = T.nn
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(36, 16), nn.GELU(), nn.Dropout(0.0), nn.Linear(16, 3))


def lstm_lm(T):
    nn = T.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(11, 8)
            self.rnn = nn.LSTM(8, 12, num_layers=2, batch_first=True)
            self.head = nn.Linear(12, 11)

        def forward(self, tokens):
            out, _ = self.rnn(self.embed(tokens))
            return self.head(out)

    return LM()


def tiny_transformer(T):
    nn = T.nn

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(11, 16)
            layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True,
                                               norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, 2)
            self.head = nn.Linear(16, 11)

        def forward(self, tokens):
            n = tokens.shape[1]
            mask = nn.Transformer.generate_square_subsequent_mask(n)
            return self.head(self.blocks(self.embed(tokens), mask=mask, is_causal=True))

    return GPT()


# -- the loop, written once ------------------------------------------------------------------------------------------
def _batches(T, kind: str):
    data = T.utils.data
    if kind == "images":
        dataset = data.TensorDataset(T.tensor(_IMAGES), _int_tensor(T, _LABELS))
    else:
        tokens = _int_tensor(T, _TOKENS)
        dataset = data.TensorDataset(tokens[:, :-1], tokens[:, 1:])
    return data.DataLoader(dataset, batch_size=4, shuffle=False, drop_last=True)


def _loss(T, model, x, y):
    logits = model(x)
    return T.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def _setup(T, make, optimizer: str):
    T.manual_seed(0)
    model = make(T)
    opt = {"sgd": lambda p: T.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
           "adamw": lambda p: T.optim.AdamW(p, lr=3e-3, weight_decay=0.05),
           "adam": lambda p: T.optim.Adam(p, lr=2e-3)}[optimizer](model.parameters())
    sched = T.optim.lr_scheduler.OneCycleLR(opt, max_lr=5e-3, total_steps=8) if optimizer == "adamw" else \
        T.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    return model, opt, sched


def train(T, make, kind: str, optimizer: str, accumulate: int = 2, compiled=None, model=None):
    """Two epochs over the loader; every `accumulate` batches one update (losses scaled by 1/accumulate), the
    gradient clipped to norm 1, the scheduler stepped per update. Returns the per-batch losses and the model."""
    model, opt, sched = _setup(T, make, optimizer) if model is None else model
    model.train()

    def micro_step(x, y, last: bool):
        loss = _loss(T, model, x, y) / accumulate
        loss.backward()
        if last:
            T.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        return loss.detach()

    step = micro_step if compiled is None else compiled(micro_step, static_argnums=2)
    losses = []
    for _ in range(2):
        for i, (x, y) in enumerate(_batches(T, kind)):
            last = (i + 1) % accumulate == 0
            losses.append(float(step(x, y, last)))
            if last:
                sched.step()
    return losses, model, step


def _agree(ours, theirs, rtol=2e-4, atol=2e-5, rounding_only=None):
    """Losses and every entry of the state dicts agree; `rounding_only`: `name -> slice` of parameter entries whose
    gradient is zero but for rounding (attention's key bias: softmax ignores a shift of a row), which Adam's
    normalization turns into steps of either sign: not compared."""
    (losses, model, _), (tlosses, tmodel, _) = ours, theirs
    np.testing.assert_allclose(losses, tlosses, rtol=rtol, atol=atol)
    for (name, p), (_, tp) in zip(model.state_dict().items(), tmodel.state_dict().items(), strict=True):
        a, b = np.array(p.numpy()), tp.detach().numpy().copy()
        for suffix, part in (rounding_only or {}).items():
            if name.endswith(suffix):
                a[part] = b[part] = 0
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=name)


def _run_both(make, kind, optimizer, compiled=None):
    theirs = train(torch, make, kind, optimizer)
    ours_setup = _setup(aotjax, make, optimizer)
    _copy_weights(theirs_initial := _setup(torch, make, optimizer)[0], ours_setup[0])
    del theirs_initial
    return train(aotjax, make, kind, optimizer, compiled=compiled, model=ours_setup), theirs


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_conv_net_with_batchnorm_trains_as_torch(optimizer):
    ours, theirs = _run_both(conv_net, "images", optimizer)
    _agree(ours, theirs)


@pytest.mark.slow
def test_conv_net_step_compiled_whole_trains_as_torch_traced_once_per_step_kind():
    ours, theirs = _run_both(conv_net, "images", "adamw", compiled=aotjax.jit)
    _agree(ours, theirs)
    assert ours[2].trace_count == 2  # NOTE: one program that accumulates, one that also clips and updates


@pytest.mark.slow
def test_lstm_language_model_trains_as_torch():
    ours, theirs = _run_both(lstm_lm, "tokens", "adam")
    _agree(ours, theirs)


@pytest.mark.slow
def test_transformer_language_model_compiled_whole_trains_as_torch():
    ours, theirs = _run_both(tiny_transformer, "tokens", "adamw", compiled=aotjax.jit)
    _agree(ours, theirs, rtol=5e-4, atol=5e-5, rounding_only={"self_attn.in_proj_bias": slice(16, 32)})
    # NOTE: three programs: an epoch of 3 batches ends on an accumulation, so the next one accumulates into
    # existing gradients (a `.grad` that is not None is state the program reads), besides into fresh ones and the
    # update; none is traced twice
    assert ours[2].trace_count == 3
