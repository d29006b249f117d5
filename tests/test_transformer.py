"""aotjax.nn's Transformer family against torch.nn's: each built in torch, its state_dict copied into ours, the
outputs and every parameter's gradient (of a weighted sum, `.backward()`) compared, in eval mode (dropout
off) and in train mode with `dropout=0.0`; masks (bool, float, key padding, causal) and their type check; the
subclass pattern of PyTorch's word_language_model example; state_dict keys; one jitted training step."""
import copy
import math
import warnings

import numpy as np
import pytest

import aotjax
from aotjax import nn
from tests.helpers import INT

torch = pytest.importorskip("torch")
# NOTE: torch's encoder says when its nested-tensor fast path is off (batch_first=False, norm_first=True)
pytestmark = [pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning"),
              pytest.mark.x32_only]  # NOTE: float32 modules in both modes: not run again in the x64 pass
tnn = torch.nn

RTOL, ATOL = 1e-4, 1e-5
E, H, FF = 16, 2, 32  # d_model, nhead, dim_feedforward
S, T, N = 5, 4, 3     # source length, target length, batch


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def load_from_torch(ours: nn.Module, theirs) -> nn.Module:
    ours.load_state_dict({k: aotjax.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours


def close(ours, theirs, what=""):
    np.testing.assert_allclose(np.asarray(ours.detach()), theirs.detach().numpy(), rtol=RTOL, atol=ATOL,
                               err_msg=what)


def run_both(ours, theirs, call, arrays: dict, mode: str):
    """Run `call(module, lib, **tensors)` on both (arrays as each library's tensors), backward a weighted sum of
    the output, compare the outputs and every parameter's gradient."""
    for m in (ours, theirs):
        m.train(mode == "train")
    out = call(ours, aotjax, **{k: aotjax.tensor(v) for k, v in arrays.items()})
    t_out = call(theirs, torch, **{k: torch.tensor(v) for k, v in arrays.items()})
    close(out, t_out, "output")
    weights = rand(*t_out.shape, seed=99)
    (out * aotjax.tensor(weights)).sum().backward()
    (t_out * torch.tensor(weights)).sum().backward()
    theirs_params = dict(theirs.named_parameters())
    assert [n for n, _ in ours.named_parameters()] == list(theirs_params)
    for name, p in ours.named_parameters():
        close(p.grad, theirs_params[name].grad, name)


def seq(length, batch_first, seed):
    return rand(*((N, length, E) if batch_first else (length, N, E)), seed=seed)


def padding(length, seed):
    kpm = np.random.default_rng(seed).random((N, length)) < 0.3
    kpm[:, 0] = False  # NOTE: a row of keys all masked would give NaN in both
    return kpm


def causal(length, dtype):
    return np.triu(np.ones((length, length), bool), 1) if dtype == "bool" else \
        np.triu(np.full((length, length), -np.inf, np.float32), 1)


# -- the encoder layer --------------------------------------------------------------------------------------
def _swish(x):
    return x * x.sigmoid()


ENCODER_CASES = {  # norm_first, activation, batch_first, masks
    "post_relu_seq_first_masks": (False, "relu", False, "bool"),
    "pre_gelu_batch_first_masks": (True, "gelu", True, "float"),
    "post_callable_batch_first": (False, _swish, True, None),
    "pre_relu_seq_first": (True, "relu", False, None),
}


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("case", list(ENCODER_CASES))
def test_encoder_layer_matches_torch(case, mode):
    norm_first, activation, batch_first, masks = ENCODER_CASES[case]
    kw = dict(dim_feedforward=FF, activation=activation, batch_first=batch_first, norm_first=norm_first,
              dropout=0.1 if mode == "eval" else 0.0)
    theirs = tnn.TransformerEncoderLayer(E, H, **kw)
    ours = load_from_torch(nn.TransformerEncoderLayer(E, H, **kw), theirs)
    arrays = {"src": seq(S, batch_first, 1)}
    if masks:
        arrays["src_mask"] = causal(S, masks)
        kpm = padding(S, 2)
        arrays["src_key_padding_mask"] = kpm if masks == "bool" else np.where(kpm, -np.inf, 0).astype(np.float32)
    run_both(ours, theirs, lambda m, lib, **a: m(**a), arrays, mode)


def test_unbatched_encoder_layer_matches_torch():
    theirs = tnn.TransformerEncoderLayer(E, H, FF)
    ours = load_from_torch(nn.TransformerEncoderLayer(E, H, FF), theirs)
    run_both(ours, theirs, lambda m, lib, **a: m(**a), {"src": rand(S, E), "src_mask": causal(S, "bool")}, "eval")


# -- the decoder layer ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("norm_first,batch_first", [(False, False), (True, True)])
def test_decoder_layer_matches_torch(norm_first, batch_first, mode):
    kw = dict(dim_feedforward=FF, batch_first=batch_first, norm_first=norm_first, activation="gelu",
              dropout=0.1 if mode == "eval" else 0.0)
    theirs = tnn.TransformerDecoderLayer(E, H, **kw)
    ours = load_from_torch(nn.TransformerDecoderLayer(E, H, **kw), theirs)
    arrays = {"tgt": seq(T, batch_first, 1), "memory": seq(S, batch_first, 2), "tgt_mask": causal(T, "bool"),
              "memory_mask": rand(T, S, seed=3), "tgt_key_padding_mask": padding(T, 4),
              "memory_key_padding_mask": np.where(padding(S, 5), -1e9, 0).astype(np.float32)}
    run_both(ours, theirs, lambda m, lib, **a: m(**a), arrays, mode)


# -- the whole Transformer -----------------------------------------------------------------------------------
def _transformer(m, **kw):
    return m.Transformer(d_model=E, nhead=H, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=FF, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("mask_type", ["bool", "float"])
def test_transformer_with_causal_and_padding_masks_matches_torch(mask_type):
    # NOTE: batch_first and norm_first are covered by the layers' tests; one layout here keeps the file fast
    batch_first = False
    theirs = _transformer(tnn, dropout=0.0)
    ours = load_from_torch(_transformer(nn, dropout=0.0), theirs)

    def as_type(kpm):
        return kpm if mask_type == "bool" else np.where(kpm, -np.inf, 0).astype(np.float32)
    arrays = {"src": seq(S, batch_first, 1), "tgt": seq(T, batch_first, 2),
              "src_key_padding_mask": as_type(padding(S, 3)), "tgt_key_padding_mask": as_type(padding(T, 4)),
              "memory_key_padding_mask": as_type(padding(S, 3))}

    def call(m, lib, **a):
        dtype = lib.bool if mask_type == "bool" else None
        return m(**a, tgt_mask=m.generate_square_subsequent_mask(T, dtype=dtype), tgt_is_causal=True)
    run_both(ours, theirs, call, arrays, "train")


def test_generate_square_subsequent_mask_matches_torch():
    for dtype in (None, "bool"):
        ours = nn.Transformer.generate_square_subsequent_mask(4, dtype=dtype and aotjax.bool)
        theirs = tnn.Transformer.generate_square_subsequent_mask(4, dtype=dtype and torch.bool)
        np.testing.assert_array_equal(np.asarray(ours), theirs.numpy())
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]


def test_names_state_dict_keys_and_initialization_match_torch():
    for kw in ({}, {"bias": False, "norm_first": True}):
        theirs, ours = _transformer(tnn, **kw), _transformer(nn, **kw)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
        for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
            assert p.shape == tuple(q.shape), name
    ours = _transformer(nn)
    w = np.asarray(ours.encoder.layers[0].linear1.weight)  # xavier_uniform_: bound sqrt(6 / (fan_in + fan_out))
    assert np.abs(w).max() <= math.sqrt(6 / (E + FF)) and np.abs(w).max() > 0.5 * math.sqrt(6 / (E + FF))
    assert ours.encoder.layers[0] is not ours.encoder.layers[1]  # deep copies, as torch
    assert ours.encoder.layers[0].linear1.weight is not ours.encoder.layers[1].linear1.weight
    assert np.asarray(ours.encoder.layers[0].norm1.weight).tolist() == [1.0] * E
    ours, theirs = nn.TransformerEncoderLayer(E, H, FF, activation=nn.GELU()), tnn.TransformerEncoderLayer(
        E, H, FF, activation=tnn.GELU())  # a module activation is a submodule, as torch
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert ours.activation_relu_or_gelu == theirs.activation_relu_or_gelu == 2


def test_custom_encoder_and_decoder_are_used():
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF), 1)
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF), 1)
    model = nn.Transformer(E, H, custom_encoder=encoder, custom_decoder=decoder)
    assert model.encoder is encoder and model.decoder is decoder
    assert model.eval()(aotjax.ones(S, N, E), aotjax.ones(T, N, E)).shape == (T, N, E)


# -- masks and errors ----------------------------------------------------------------------------------------
def test_mismatched_mask_types_warn_as_torch():
    layer = nn.TransformerEncoderLayer(E, H, FF).eval()
    src, kpm = aotjax.tensor(seq(S, False, 1)), aotjax.tensor(padding(S, 2))
    for module, tensor in ((layer, aotjax.tensor), (tnn.TransformerEncoderLayer(E, H, FF).eval(), torch.tensor)):
        with pytest.warns(UserWarning, match="mismatched src_key_padding_mask and src_mask"):
            module(tensor(seq(S, False, 1)), src_mask=tensor(causal(S, "float")),
                   src_key_padding_mask=tensor(padding(S, 2)))
    decoder = nn.TransformerDecoderLayer(E, H, FF).eval()
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask"):
        decoder(src, src, memory_mask=aotjax.tensor(causal(S, "bool")),
                memory_key_padding_mask=aotjax.tensor(np.where(padding(S, 2), -np.inf, 0).astype(np.float32)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer(src, src_mask=aotjax.tensor(causal(S, "bool")), src_key_padding_mask=kpm)
    with pytest.raises(AssertionError, match="only bool and floating types of src_mask"):
        layer(src, src_mask=aotjax.zeros(S, S, dtype=aotjax.int32))


def test_errors_match_torch():
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(E, H, FF, activation="tanh")
    model = _transformer(nn)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        model(aotjax.ones(S, N, E), aotjax.ones(T, N + 1, E))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
        model(aotjax.ones(S, N, E), aotjax.ones(T, N, E + 1))
    with pytest.raises(RuntimeError, match="Need attn_mask"):  # a causal hint without its mask, as torch
        model(aotjax.ones(S, N, E), aotjax.ones(T, N, E), tgt_is_causal=True)


# -- subclassing: PyTorch's word_language_model example ------------------------------------------------------
def word_language_model(m, lib):
    """A small `TransformerModel(nn.Transformer)` as in PyTorch's examples/word_language_model/model.py, built
    from `m` (torch.nn or aotjax.nn) and `lib` (torch or aotjax)."""
    class PositionalEncoding(m.Module):
        def __init__(self, d_model, dropout=0.1, max_len=64):
            super().__init__()
            self.dropout = m.Dropout(p=dropout)
            position = np.arange(max_len, dtype=np.float32)[:, None]
            div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float32) * (-math.log(10000.0) / d_model))
            pe = np.zeros((max_len, 1, d_model), np.float32)
            pe[:, 0, 0::2], pe[:, 0, 1::2] = np.sin(position * div_term), np.cos(position * div_term)
            self.register_buffer("pe", lib.tensor(pe))

        def forward(self, x):
            return self.dropout(x + self.pe[:x.size(0), :])

    class TransformerModel(m.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers)
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            self.input_emb = m.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = m.Linear(ninp, ntoken)  # replaces the TransformerDecoder
            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            return lib.log(lib.tril(lib.ones(sz, sz)))

        def init_weights(self):
            m.init.uniform_(self.input_emb.weight, -0.1, 0.1)
            m.init.zeros_(self.decoder.bias)
            m.init.uniform_(self.decoder.weight, -0.1, 0.1)

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    self.src_mask = self._generate_square_subsequent_mask(len(src))
            else:
                self.src_mask = None
            src = self.pos_encoder(self.input_emb(src) * math.sqrt(self.ninp))
            output = self.decoder(self.encoder(src, mask=self.src_mask))
            return m.functional.log_softmax(output, dim=-1)

    return TransformerModel(ntoken=11, ninp=E, nhead=H, nhid=FF, nlayers=2, dropout=0.0)


@pytest.mark.slow
def test_the_word_language_model_subclass_matches_torch():
    theirs, ours = word_language_model(tnn, torch), word_language_model(nn, aotjax)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert type(ours.decoder) is nn.Linear and ours.model_type == "Transformer"
    load_from_torch(ours, theirs)
    tokens = np.random.default_rng(0).integers(0, 11, (S, N))
    for has_mask in (True, False):
        ours.zero_grad(), theirs.zero_grad()
        run_both(ours, theirs, lambda mod, lib, src, has_mask=has_mask: mod(src, has_mask=has_mask),
                 {"src": tokens.astype(INT)}, "eval")  # NOTE: eval: the example's layers keep dropout 0.1
        assert (ours.src_mask is None) == (not has_mask)


# -- under jit -----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_jitted_training_step_matches_eager_and_traces_once():
    model = nn.Transformer(E, H, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=FF, dropout=0.0)
    eager = copy.deepcopy(model)
    src, tgt = aotjax.tensor(seq(S, False, 1)), aotjax.tensor(seq(T, False, 2))
    kpm, weights = aotjax.tensor(padding(S, 3)), aotjax.tensor(rand(T, N, E, seed=4))

    def step(model, src, tgt, kpm):
        out = model(src, tgt, tgt_mask=model.generate_square_subsequent_mask(len(tgt)), src_key_padding_mask=kpm,
                    memory_key_padding_mask=kpm)
        loss = (out * weights).sum()
        loss.backward()
        return loss

    jitted = aotjax.jit(step)
    for _ in range(2):
        model.zero_grad(), eager.zero_grad()
        loss, expected = jitted(model, src, tgt, kpm), step(eager, src, tgt, kpm)
        np.testing.assert_allclose(float(loss), float(expected), rtol=RTOL)
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            np.testing.assert_allclose(np.asarray(p.grad), np.asarray(q.grad), rtol=RTOL, atol=ATOL, err_msg=name)
    assert jitted.trace_count == 1
