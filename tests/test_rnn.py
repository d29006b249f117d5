"""aotjax.nn's recurrent layers against torch.nn's: RNN (tanh, relu), LSTM (with proj_size), GRU and the three cells,
built in torch, their state_dict copied into ours, then outputs, final states and every gradient of a weighted sum
compared (stacked, bidirectional, batch_first, unbatched, given initial states, packed input). Then what the one
`scan` per layer and direction buys: a jitted training step traced once and equal to the eager one, and a program
whose size does not grow with the sequence length."""
import numpy as np
import pytest

import aotjax
from aotjax import nn
from tests.helpers import FLOAT, X64

torch = pytest.importorskip("torch")
tnn = torch.nn

pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")  # torch's note

RTOL, ATOL = (1e-10, 1e-12) if X64 else (1e-4, 1e-5)
T_DTYPE = torch.float64 if X64 else torch.float32
DTYPE = aotjax.float64 if X64 else aotjax.float32


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(FLOAT)


def build(name, *args, eval_mode=False, **kwargs):
    """A maker `make(lib, dtype=...)` of the layer `lib.name(*args, **kwargs)` (in eval mode with `eval_mode`)."""
    def make(lib, **kw):
        layer = getattr(lib, name)(*args, **kwargs, **kw)
        return layer.eval() if eval_mode else layer
    return make


def pair(make):
    """The torch module `make(torch.nn)` and ours `make(aotjax.nn)` with its weights."""
    theirs = make(tnn, dtype=T_DTYPE)
    ours = make(nn, dtype=DTYPE)
    ours.load_state_dict({k: aotjax.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def close(ours, theirs):
    np.testing.assert_allclose(np.asarray(ours.detach().numpy()), theirs.detach().numpy(), rtol=RTOL, atol=ATOL)


def leaf(lib, value):
    return lib.tensor(value, requires_grad=True)


def as_tuple(state):
    return state if isinstance(state, tuple) else (state,)


def weighted_loss(lib, out, state, seed=1):
    """A weighted sum of the outputs and final states (a plain sum would hide a swapped or mis-ordered output)."""
    terms = [out, *as_tuple(state)]
    return sum((t * lib.tensor(rand(*t.shape, seed=seed + i))).sum() for i, t in enumerate(terms))


def check_layer(make, x, hx=None):
    """Forward and backward of torch's layer and ours from the same weights, input and initial states."""
    ours, theirs = pair(make)
    results = {}
    for lib, model in ((aotjax, ours), (torch, theirs)):
        xs = leaf(lib, x)
        states = None if hx is None else tuple(leaf(lib, h) for h in hx)
        args = (xs,) if states is None else (xs, states if len(states) == 2 else states[0])
        out, state = model(*args)
        weighted_loss(lib, out, state).backward()
        results[lib] = out, as_tuple(state), xs.grad, [s.grad for s in states or ()]
    (out, state, gx, gh), (t_out, t_state, t_gx, t_gh) = results[aotjax], results[torch]
    close(out, t_out)
    assert len(state) == len(t_state)
    for a, b in zip(state, t_state):
        assert tuple(a.shape) == tuple(b.shape)
        close(a, b)
    close(gx, t_gx)
    for a, b in zip(gh, t_gh, strict=True):
        close(a, b)
    for (name, p), (t_name, t_p) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        assert name == t_name
        close(p.grad, t_p.grad)


LAYERS = [  # id, make(lib), input shape, initial-state shapes
    ("rnn_tanh_no_bias_batch_first", build("RNN", 3, 4, bias=False, batch_first=True), (2, 5, 3), None),
    ("rnn_relu_bidirectional", build("RNN", 3, 4, nonlinearity="relu", bidirectional=True), (5, 2, 3), [(2, 2, 4)]),
    pytest.param("lstm_2_layers_bidirectional_dropout_eval",
                 build("LSTM", 3, 4, num_layers=2, bidirectional=True, dropout=0.5, eval_mode=True), (5, 2, 3),
                 [(4, 2, 4), (4, 2, 4)], marks=pytest.mark.slow),
    pytest.param("lstm_proj_bidirectional_batch_first",
                 build("LSTM", 3, 5, num_layers=2, proj_size=2, bidirectional=True, batch_first=True), (2, 5, 3),
                 [(4, 2, 2), (4, 2, 5)], marks=pytest.mark.slow),
    ("lstm_proj_unbatched", build("LSTM", 3, 4, proj_size=2), (5, 3), None),
    ("gru_2_layers_batch_first", build("GRU", 3, 4, num_layers=2, batch_first=True), (2, 5, 3), None),
    ("gru_bidirectional_unbatched", build("GRU", 3, 4, bidirectional=True), (5, 3), [(2, 4)]),
]


def _cases(table):
    """pytest params from rows `(id, *values)` (a row may be a `pytest.param` of them, with marks)."""
    return [pytest.param(*c.values[1:], id=c.values[0], marks=c.marks) if hasattr(c, "values")
            else pytest.param(*c[1:], id=c[0]) for c in table]


@pytest.mark.parametrize("make, shape, state_shapes", _cases(LAYERS))
def test_layer_outputs_states_and_gradients_equal_torch(make, shape, state_shapes):
    hx = None if state_shapes is None else [rand(*s, seed=10 + i) for i, s in enumerate(state_shapes)]
    check_layer(make, rand(*shape), hx)


CELLS = [
    ("rnn_cell_tanh", build("RNNCell", 3, 4), (2, 3), [(2, 4)]),
    ("rnn_cell_relu_no_bias_unbatched", build("RNNCell", 3, 4, bias=False, nonlinearity="relu"), (3,), None),
    ("lstm_cell", build("LSTMCell", 3, 4), (2, 3), [(2, 4), (2, 4)]),
    ("lstm_cell_unbatched", build("LSTMCell", 3, 4), (3,), [(4,), (4,)]),
    ("gru_cell", build("GRUCell", 3, 4), (2, 3), [(2, 4)]),
    ("gru_cell_unbatched_no_state", build("GRUCell", 3, 4), (3,), None),
]


@pytest.mark.parametrize("make, shape, state_shapes", _cases(CELLS))
def test_cell_equals_torch(make, shape, state_shapes):
    ours, theirs = pair(make)
    x = rand(*shape)
    hx = None if state_shapes is None else [rand(*s, seed=10 + i) for i, s in enumerate(state_shapes)]
    results = {}
    for lib, model in ((aotjax, ours), (torch, theirs)):
        xs = leaf(lib, x)
        states = None if hx is None else tuple(leaf(lib, h) for h in hx)
        out = model(xs) if states is None else model(xs, states if len(states) == 2 else states[0])
        outs = as_tuple(out)
        weighted_loss(lib, outs[0], outs[1:]).backward()
        results[lib] = outs, [xs.grad] + [s.grad for s in states or ()], [p.grad for p in model.parameters()]
    for ours_part, theirs_part in zip(results[aotjax], results[torch], strict=True):
        for a, b in zip(ours_part, theirs_part, strict=True):
            close(a, b)


def test_state_dict_keys_shapes_and_repr_equal_torch():
    makes = [build("LSTM", 3, 5, num_layers=2, proj_size=2, bidirectional=True, bias=False),
             build("GRU", 3, 4, num_layers=3, batch_first=True, dropout=0.25),
             build("RNN", 3, 4, nonlinearity="relu"), build("RNNCell", 3, 4, bias=False, nonlinearity="relu"),
             build("LSTMCell", 3, 4), build("GRUCell", 3, 4)]
    for make in makes:
        ours, theirs = make(nn), make(tnn)
        assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
            [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
        assert repr(ours) == repr(theirs)


def test_initialization_is_uniform_within_one_over_sqrt_hidden():
    aotjax.manual_seed(0)
    lstm = nn.LSTM(3, 16, num_layers=2)
    for p in lstm.parameters():
        values = np.asarray(p.detach())
        assert np.abs(values).max() <= 0.25 and values.std() > 0.1
    lstm.flatten_parameters()  # a no-op, for torch code that calls it
    assert [len(ws) for ws in lstm.all_weights] == [4, 4]


@pytest.mark.parametrize("make", [
    pytest.param(build("LSTM", 3, 4, num_layers=2, bidirectional=True, proj_size=2), id="lstm",
                 marks=pytest.mark.slow),
    pytest.param(build("GRU", 3, 4, bidirectional=True), id="gru")])
def test_packed_input_with_unsorted_lengths_equals_torch(make):
    ours, theirs = pair(make)
    x, lengths = rand(6, 4, 3), [3, 6, 1, 4]
    hx = [rand(*s, seed=10 + i) for i, s in enumerate(ours._state_shapes(4))]
    results = {}
    for lib, model in ((aotjax, ours), (torch, theirs)):
        xs = leaf(lib, x)
        packed = lib.nn.utils.rnn.pack_padded_sequence(xs, lengths, enforce_sorted=False)
        states = tuple(leaf(lib, h) for h in hx)
        out, state = model(packed, states if len(states) == 2 else states[0])
        assert type(out) is type(packed)
        weighted_loss(lib, out.data, state).backward()
        results[lib] = out, as_tuple(state), xs.grad, [s.grad for s in states]
    (out, state, gx, gh), (t_out, t_state, t_gx, t_gh) = results[aotjax], results[torch]
    close(out.data, t_out.data)
    assert out.batch_sizes.tolist() == t_out.batch_sizes.tolist()
    assert out.unsorted_indices.tolist() == t_out.unsorted_indices.tolist()
    for a, b in zip([*state, gx, *gh], [*t_state, t_gx, *t_gh], strict=True):
        close(a, b)
    for p, t_p in zip(ours.parameters(), theirs.parameters(), strict=True):
        close(p.grad, t_p.grad)


def test_dropout_between_layers_in_training_draws_from_the_generator():
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5, dtype=DTYPE)
    x = aotjax.tensor(rand(5, 2, 3))
    aotjax.manual_seed(0)
    a, (h, c) = lstm(x)
    aotjax.manual_seed(0)
    b, _ = lstm(x)
    assert tuple(a.shape) == (5, 2, 4) and tuple(h.shape) == tuple(c.shape) == (2, 2, 4)
    np.testing.assert_array_equal(np.asarray(a.detach()), np.asarray(b.detach()))
    lstm.eval()
    e1, _ = lstm(x)
    assert not np.allclose(np.asarray(a.detach()), np.asarray(e1.detach()))
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.5)


def test_jitted_training_step_equals_eager_and_is_traced_once():
    def step(model, x):
        out, (h, c) = model(x)
        loss = weighted_loss(aotjax, out, (h, c))
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        return loss, grads

    model = nn.LSTM(3, 4, bidirectional=True, dtype=DTYPE)
    jitted = aotjax.jit(step)
    for seed in range(2):
        x = aotjax.tensor(rand(5, 2, 3, seed=seed))
        (loss, grads), (j_loss, j_grads) = step(model, x), jitted(model, x)
        close(j_loss, loss)
        for a, b in zip(j_grads, grads, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=ATOL)
    assert jitted.trace_count == 1


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_program_size_does_not_grow_with_the_sequence_length(kind):
    model = getattr(nn, kind)(3, 4, num_layers=2, bidirectional=True)

    def loss_and_grads(model, x):
        return aotjax.value_and_grad(lambda m: m(x)[0].sum())(model)

    sizes = []
    for length in (5, 50):
        text = str(aotjax.make_jaxpr(loss_and_grads)(model, aotjax.ones(length, 2, 3)))
        sizes.append((len(text) - text.count(str(length)) * len(str(length)), text.count(" scan[")))
    (short, short_scans), (long, long_scans) = sizes
    assert short_scans == long_scans >= 4 and abs(long - short) < 0.02 * short  # NOTE: >= one per layer, direction


def test_errors_name_the_layer_and_the_shapes():
    lstm = nn.LSTM(3, 4)
    with pytest.raises(ValueError, match=r"LSTM: input.size\(-1\) must be equal to input_size; expected 3, got 2"):
        lstm(aotjax.ones(5, 2, 2))
    with pytest.raises(ValueError, match=r"LSTM: expected h_0 of shape \[1, 2, 4\], got \[1, 3, 4\]"):
        lstm(aotjax.ones(5, 2, 3), (aotjax.zeros(1, 3, 4), aotjax.zeros(1, 2, 4)))
    with pytest.raises(ValueError, match="for unbatched 2-D input, h_0 should also be 2-D"):
        nn.GRU(3, 4)(aotjax.ones(5, 3), aotjax.zeros(1, 1, 4))
    with pytest.raises(TypeError, match=r"LSTM: expected the initial state as a pair of tensors \(h_0, c_0\)"):
        lstm(aotjax.ones(5, 2, 3), aotjax.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="unknown nonlinearity 'sigmoid'"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match=r"GRUCell: expected a hidden state of shape \[2, 4\], got \[3, 4\]"):
        nn.GRUCell(3, 4)(aotjax.ones(2, 3), aotjax.zeros(3, 4))
