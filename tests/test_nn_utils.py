"""aotjax.nn.utils against torch.nn.utils: gradient clipping (eagerly and inside a training step compiled whole), the
parameters as one vector, and packing/padding variable-length sequences; errors with torch's class and message."""
import math
import re

import jax
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import ConcretizationError
from aotjax.nn.utils import rnn
from tests.helpers import FLOAT, by_mode

torch = pytest.importorskip("torch")

RTOL = by_mode(1e-12, 2e-6)
SHAPES = [(), (3,), (2, 3), (2, 1, 2)]
NONFINITE = ("The total norm of order {} for gradients from `parameters` is non-finite, so it cannot be clipped. To "
             "disable this error and scale the gradients by the non-finite norm anyway, set "
             "`error_if_nonfinite=False`")


def close(ours, theirs, rtol=RTOL):
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    ours = np.asarray(ours)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=rtol)


def params_pair(none_at=(), seed=0, scale=1.0):
    """The same parameters (SHAPES) with the same grads, for aotjax and torch; those at `none_at` have no grad."""
    rng = np.random.default_rng(seed)
    ours, theirs = [], []
    for i, shape in enumerate(SHAPES):
        value = np.asarray(rng.standard_normal(shape), FLOAT)
        o, t = aotjax.nn.Parameter(aotjax.tensor(value)), torch.nn.Parameter(torch.tensor(value))
        if i not in none_at:
            grad = np.asarray(scale * rng.standard_normal(shape), FLOAT)
            o.grad, t.grad = aotjax.tensor(grad), torch.tensor(grad)
        ours.append(o)
        theirs.append(t)
    return ours, theirs


def grads_agree(ours, theirs):
    for o, t in zip(ours, theirs, strict=True):
        assert (o.grad is None) == (t.grad is None)
        if t.grad is not None:
            close(o.grad, t.grad)


# -- clipping, eagerly ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, 3.5])
@pytest.mark.parametrize("max_norm", [0.5, 100.0], ids=["clips", "keeps"])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    ours, theirs = params_pair(none_at=(2,))
    norm_type = float(norm_type)
    close(aotjax.nn.utils.clip_grad_norm_(ours, max_norm, norm_type),
          torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type))
    grads_agree(ours, theirs)


@pytest.mark.parametrize("as_", ["tensor", "generator", "tuple"])
def test_clip_grad_norm_takes_one_tensor_or_any_iterable(as_):
    ours, theirs = params_pair()
    pick = {"tensor": lambda ps: ps[2], "generator": lambda ps: (p for p in ps), "tuple": tuple}[as_]
    close(aotjax.nn.utils.clip_grad_norm_(pick(ours), 0.1), torch.nn.utils.clip_grad_norm_(pick(theirs), 0.1))
    grads_agree(ours, theirs)


def test_clip_grad_norm_without_grads_is_zero():
    ours, theirs = params_pair(none_at=range(len(SHAPES)))
    close(aotjax.nn.utils.clip_grad_norm_(ours, 1.0), torch.nn.utils.clip_grad_norm_(theirs, 1.0), 0)
    close(aotjax.nn.utils.get_total_norm([]), torch.nn.utils.get_total_norm([]), 0)
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        close(aotjax.nn.utils.clip_grad_norm([], 1.0), torch.tensor(0.0), 0)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_get_total_norm_and_clip_grads_with_norm_match_torch(norm_type):
    ours, theirs = params_pair(none_at=(0,))
    grads_o, grads_t = [p.grad for p in ours[1:]], [p.grad for p in theirs[1:]]
    total_o = aotjax.nn.utils.get_total_norm(grads_o, norm_type)
    total_t = torch.nn.utils.get_total_norm(grads_t, norm_type)
    close(total_o, total_t)
    close(aotjax.nn.utils.get_total_norm(grads_o[1], norm_type), torch.nn.utils.get_total_norm(grads_t[1], norm_type))
    aotjax.nn.utils.clip_grads_with_norm_(ours, 0.3, total_o)
    torch.nn.utils.clip_grads_with_norm_(theirs, 0.3, total_t)
    grads_agree(ours, theirs)


@pytest.mark.parametrize("clip_value", [0.5, 2])
def test_clip_grad_value_matches_torch(clip_value):
    ours, theirs = params_pair(none_at=(1,), scale=2.0)
    assert aotjax.nn.utils.clip_grad_value_(ours, clip_value) is None
    torch.nn.utils.clip_grad_value_(theirs, clip_value)
    grads_agree(ours, theirs)
    aotjax.nn.utils.clip_grad_value_(ours[3], 0.1)
    torch.nn.utils.clip_grad_value_(theirs[3], 0.1)
    grads_agree(ours, theirs)


@pytest.mark.x32_only
def test_clipping_does_not_record_in_the_graph():
    w = aotjax.nn.Parameter(aotjax.tensor([3.0, 4.0]))
    (w * w).sum().backward()
    norm = aotjax.nn.utils.clip_grad_norm_(w, 1.0)
    assert not norm.requires_grad and not w.grad.requires_grad and w.grad.grad_fn is None


@pytest.mark.parametrize("bad", [math.inf, math.nan])
@pytest.mark.parametrize("norm_type", [2.0, math.inf])
def test_nonfinite_norm_raises_torchs_error_or_clips_as_torch(bad, norm_type):
    ours, theirs = params_pair()
    for ps in (ours, theirs):
        ps[1].grad[0] = bad
    with pytest.raises(RuntimeError) as theirs_error:
        torch.nn.utils.clip_grad_norm_(theirs, 1.0, norm_type, error_if_nonfinite=True)
    assert str(theirs_error.value) == NONFINITE.format(norm_type)
    with pytest.raises(RuntimeError, match=re.escape(NONFINITE.format(norm_type))) as ours_error:
        aotjax.nn.utils.clip_grad_norm_(ours, 1.0, norm_type, error_if_nonfinite=True)
    assert str(ours_error.value).startswith("clip_grad_norm_: ") and "test_nn_utils.py" in str(ours_error.value)
    grads_agree(ours, theirs)  # NOTE: nothing was clipped
    close(aotjax.nn.utils.clip_grad_norm_(ours, 1.0, norm_type), torch.nn.utils.clip_grad_norm_(theirs, 1.0, norm_type))
    grads_agree(ours, theirs)


# -- clipping inside a training step compiled whole --------------------------------------------------------------
def _mlp(lib, seed=0):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(3, 8), lib.nn.Tanh(), lib.nn.Linear(8, 2))
    rng = np.random.default_rng(seed)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    return model


def _train(lib, compile_step, steps=4, clip="norm"):
    model = _mlp(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if clip == "norm":
            norm = lib.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        else:
            norm = lib.nn.utils.clip_grad_norm_(model[0].parameters(), 1e6, norm_type=1.0)  # NOTE: does not clip
            lib.nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        return loss.detach(), norm

    run = compile_step(step)
    rng = np.random.default_rng(1)
    record = []
    for _ in range(steps):
        x, y = (lib.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((5, 3), (5, 2)))
        loss, norm = run(x, y)
        record.append([loss, norm] + [p.detach().clone() for p in model.parameters()]
                      + [p.grad.clone() for p in model.parameters()])
    return record, run


@pytest.mark.x32_only  # NOTE: the modules compute in float32 in both modes
@pytest.mark.parametrize("clip", [pytest.param("norm", marks=pytest.mark.slow), "value"])
def test_a_compiled_training_step_clips_as_eager_torch_step_by_step_traced_once(clip):
    ours, run = _train(aotjax, aotjax.jit, clip=clip)
    theirs, _ = _train(torch, lambda f: f, clip=clip)
    for step_o, step_t in zip(ours, theirs, strict=True):
        for o, t in zip(step_o, step_t, strict=True):
            close(o, t, rtol=2e-5)
    assert run.trace_count == 1


def _nonfinite_step(checks):
    w = aotjax.nn.Parameter(aotjax.tensor([1.0, 2.0]))
    opt = aotjax.optim.SGD([w], lr=0.5)

    def step(scale):
        opt.zero_grad()
        (w * scale).sum().backward()
        norm = aotjax.nn.utils.clip_grad_norm_([w], 1.0, error_if_nonfinite=True)
        opt.step()
        return norm

    return w, aotjax.jit(step, checks=checks)


@pytest.mark.x32_only
def test_error_if_nonfinite_in_a_compiled_step_without_checks_says_what_to_do():
    _, run = _nonfinite_step(checks=None)
    with pytest.raises(ConcretizationError, match=r"cannot be checked while the step is traced.*checks=True") as e:
        run(aotjax.tensor(1.0))
    assert "test_nn_utils.py" in str(e.value)


def test_error_if_nonfinite_in_a_compiled_step_with_checks_raises_torchs_error_when_it_runs():
    w, run = _nonfinite_step(checks=True)
    close(run(aotjax.tensor(3.0)), torch.tensor(math.sqrt(18.0), dtype=torch.float32), 1e-6)
    after = w.detach().numpy().copy()
    np.testing.assert_allclose(after, [1 - 0.5 / math.sqrt(2), 2 - 0.5 / math.sqrt(2)], rtol=1e-6)
    with pytest.raises(RuntimeError, match=re.escape(NONFINITE.format(2.0))):
        run(aotjax.tensor(math.inf))
    np.testing.assert_array_equal(w.detach().numpy(), after)  # NOTE: the failed step wrote nothing
    assert run.trace_count == 1


# -- parameters as one vector ------------------------------------------------------------------------------------
def test_parameters_to_vector_and_back_match_torch_and_keep_the_parameter_objects():
    ours, theirs = params_pair(none_at=range(len(SHAPES)))
    vec_o, vec_t = aotjax.nn.utils.parameters_to_vector(ours), torch.nn.utils.parameters_to_vector(theirs)
    close(vec_o, vec_t, 0)
    new = np.arange(vec_t.numel(), dtype=FLOAT)
    before = list(ours)
    aotjax.nn.utils.vector_to_parameters(aotjax.tensor(new), ours)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs)
    for o, t, b in zip(ours, theirs, before, strict=True):
        assert o is b and isinstance(o, aotjax.nn.Parameter) and o.requires_grad and o.is_leaf
        close(o, t, 0)
    (aotjax.nn.utils.parameters_to_vector(ours) * aotjax.tensor(new)).sum().backward()
    (torch.nn.utils.parameters_to_vector(theirs) * torch.tensor(new)).sum().backward()
    grads_agree(ours, theirs)


@pytest.mark.x32_only  # NOTE: the modules compute in float32 in both modes
def test_vector_to_parameters_inside_a_compiled_function_writes_the_parameters():
    model = _mlp(aotjax)
    params = list(model.parameters())
    n = sum(p.numel() for p in params)
    load = aotjax.jit(lambda v: aotjax.nn.utils.vector_to_parameters(v, model.parameters()))
    for k in range(2):
        load(aotjax.arange(n, dtype=aotjax.float32) * (k + 1))
        assert list(model.parameters()) == params
        np.testing.assert_array_equal(aotjax.nn.utils.parameters_to_vector(params).numpy(),
                                      np.arange(n, dtype=np.float32) * (k + 1))
    assert load.trace_count == 1


@pytest.mark.x32_only
def test_vector_to_parameters_wants_a_tensor():
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        torch.nn.utils.vector_to_parameters([1.0], [torch.nn.Parameter(torch.zeros(1))])
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        aotjax.nn.utils.vector_to_parameters([1.0], [aotjax.nn.Parameter(aotjax.zeros(1))])


# -- packing and padding -------------------------------------------------------------------------------------------
def _padded(batch_first, time=5, batch=4):
    x = np.random.default_rng(2).standard_normal((time, batch, 2)).astype(FLOAT)
    return x.transpose(1, 0, 2).copy() if batch_first else x


def packed_agree(ours, theirs):
    assert isinstance(ours, rnn.PackedSequence) and ours._fields == theirs._fields
    for o, t in zip(ours, theirs, strict=True):
        assert (o is None) == (t is None)
        if t is not None:
            np.testing.assert_array_equal(o.numpy(), t.numpy())
            assert o.dtype == t.numpy().dtype or t.dtype == torch.int64  # NOTE: the default int without x64


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted, lengths", [(True, [5, 3, 3, 1]), (False, [2, 5, 2, 4]),
                                                     (False, [1, 1, 1, 1])])
def test_pack_padded_sequence_round_trip_matches_torch(batch_first, enforce_sorted, lengths):
    x = _padded(batch_first)
    ours = rnn.pack_padded_sequence(aotjax.tensor(x), lengths, batch_first, enforce_sorted)
    theirs = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), lengths, batch_first, enforce_sorted)
    packed_agree(ours, theirs)
    for total_length, padding_value in [(None, 0.0), (7, -1.5)]:
        out_o, lengths_o = rnn.pad_packed_sequence(ours, batch_first, padding_value, total_length)
        out_t, lengths_t = torch.nn.utils.rnn.pad_packed_sequence(theirs, batch_first, padding_value, total_length)
        close(out_o, out_t, 0)
        np.testing.assert_array_equal(lengths_o.numpy(), lengths_t.numpy())
    for o, t in zip(rnn.unpack_sequence(ours), torch.nn.utils.rnn.unpack_sequence(theirs), strict=True):
        close(o, t, 0)


def test_lengths_as_a_tensor_and_gradients_through_packing_match_torch():
    x = _padded(False)
    xo, xt = aotjax.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    po = rnn.pack_padded_sequence(xo, aotjax.tensor([2, 5, 2, 4]), enforce_sorted=False)
    pt = torch.nn.utils.rnn.pack_padded_sequence(xt, torch.tensor([2, 5, 2, 4]), enforce_sorted=False)
    weight = np.random.default_rng(3).standard_normal((6, 4, 2)).astype(FLOAT)
    (rnn.pad_packed_sequence(po, total_length=6)[0] * aotjax.tensor(weight)).sum().backward()
    (torch.nn.utils.rnn.pad_packed_sequence(pt, total_length=6)[0] * torch.tensor(weight)).sum().backward()
    close(xo.grad, xt.grad, 0)


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_sequence_and_unpack_sequence_match_torch(enforce_sorted):
    rng = np.random.default_rng(4)
    seqs = [rng.standard_normal((n, 3)).astype(FLOAT) for n in ([4, 4, 2, 1] if enforce_sorted else [1, 4, 2, 4])]
    ours = rnn.pack_sequence([aotjax.tensor(s) for s in seqs], enforce_sorted)
    theirs = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted)
    packed_agree(ours, theirs)
    for o, s in zip(rnn.unpack_sequence(ours), seqs, strict=True):
        np.testing.assert_array_equal(o.numpy(), s)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_and_unpad_sequence_match_torch(batch_first, padding_side):
    rng = np.random.default_rng(5)
    seqs = [rng.standard_normal((n, 2, 1)).astype(FLOAT) for n in (2, 5, 3)]
    out_o = rnn.pad_sequence([aotjax.tensor(s) for s in seqs], batch_first, -7.0, padding_side)
    out_t = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first, -7.0, padding_side)
    close(out_o, out_t, 0)
    if padding_side == "right":
        lengths = [2, 5, 3]
        for o, t in zip(rnn.unpad_sequence(out_o, lengths, batch_first),
                        torch.nn.utils.rnn.unpad_sequence(out_t, torch.tensor(lengths), batch_first), strict=True):
            close(o, t, 0)
    close(rnn.pad_sequence(aotjax.tensor(seqs[0])), torch.nn.utils.rnn.pad_sequence(torch.tensor(seqs[0])), 0)


@pytest.mark.x32_only
def test_packed_sequence_fields_and_conversions():
    seqs = [aotjax.tensor([1.0, 2.0]), aotjax.tensor([3.0, 4.0, 5.0])]
    p = rnn.pack_sequence(seqs, enforce_sorted=False)
    assert p._fields == torch.nn.utils.rnn.PackedSequence._fields and not p.is_cuda and not p.is_pinned()
    assert p.to("cpu") is p and p.cpu() is p
    as_int = p.int()
    assert isinstance(as_int, rnn.PackedSequence) and as_int.data.dtype == np.int32
    assert as_int.batch_sizes is p.batch_sizes and as_int.sorted_indices is p.sorted_indices
    again = rnn.PackedSequence(p.data, p.batch_sizes, p.sorted_indices)
    np.testing.assert_array_equal(again.unsorted_indices.numpy(), p.unsorted_indices.numpy())
    pair = rnn.PackedSequence((p.data, p.batch_sizes))
    assert pair.data is p.data and pair.sorted_indices is None and pair.unsorted_indices is None
    assert "PackedSequence(data=tensor([3., 1., 4., 2., 5.])" in repr(p)


def test_packing_inside_a_compiled_function_and_a_packed_argument():
    x = aotjax.tensor(_padded(True))

    @aotjax.jit
    def pack_and_pad(x):
        packed = rnn.pack_padded_sequence(x * 2, [2, 5, 2, 4], batch_first=True, enforce_sorted=False)
        return rnn.pad_packed_sequence(packed, batch_first=True), rnn.unpack_sequence(packed), packed

    (out, lengths), seqs, packed = pack_and_pad(x)
    np.testing.assert_array_equal(lengths.numpy(), [2, 5, 2, 4])
    assert [s.shape for s in seqs] == [(2, 2), (5, 2), (2, 2), (4, 2)]
    np.testing.assert_array_equal(out.numpy()[1], x.numpy()[1] * 2)

    @aotjax.jit
    def pad(packed):
        return rnn.pad_packed_sequence(packed, padding_value=-1.0)

    for _ in range(2):
        out2, lengths2 = pad(packed)
        np.testing.assert_array_equal(out2.numpy(), np.where(out.numpy() == 0, -1, out.numpy()).transpose(1, 0, 2))
    assert pad.trace_count == 1  # NOTE: batch_sizes are static in the PackedSequence's pytree: new ones trace again
    assert len(jax.tree_util.tree_leaves(packed)) == 3
    with pytest.raises(ConcretizationError, match="unsorted_indices"):
        aotjax.jit(rnn.unpack_sequence)(packed)


@pytest.mark.x32_only
def test_traced_lengths_raise_a_clear_error():
    pack = aotjax.jit(lambda x, lengths: rnn.pack_padded_sequence(x, lengths))
    with pytest.raises(ConcretizationError, match=r"`lengths` sets the shapes.*Python list") as e:
        pack(aotjax.zeros(3, 2), aotjax.tensor([3, 1]))
    assert "test_nn_utils.py" in str(e.value)


def _error_cases():
    x = np.zeros((4, 3, 2), np.float32)
    return [
        ("pack_padded_sequence", lambda m, lib: m.pack_padded_sequence(lib.tensor(x), [2, 3, 1]), RuntimeError),
        ("pack_padded_sequence", lambda m, lib: m.pack_padded_sequence(lib.tensor(x), [3, 2, 0]), RuntimeError),
        ("pack_padded_sequence", lambda m, lib: m.pack_padded_sequence(lib.tensor(x), [3, 2]), RuntimeError),
        ("pack_padded_sequence", lambda m, lib: m.pack_padded_sequence(lib.tensor(x), lib.tensor([[3, 2, 1]])),
         RuntimeError),
        ("pad_packed_sequence",
         lambda m, lib: m.pad_packed_sequence(m.pack_padded_sequence(lib.tensor(x), [3, 2, 1]), total_length=2),
         ValueError),
        ("pad_sequence", lambda m, lib: m.pad_sequence([lib.ones(2)], padding_side="up"), RuntimeError),
        ("pad_sequence", lambda m, lib: m.pad_sequence([]), RuntimeError),
        ("pack_sequence", lambda m, lib: m.pack_sequence([]), RuntimeError),
    ]


@pytest.mark.x32_only
@pytest.mark.parametrize("i", range(len(_error_cases())))
def test_errors_have_torchs_class_and_message_and_the_users_line(i):
    op, call, cls = _error_cases()[i]
    with pytest.raises(cls) as theirs:
        call(torch.nn.utils.rnn, torch)
    message = str(theirs.value).split(", but got 2D")[0]  # NOTE: torch names its tensor type there
    with pytest.raises(cls, match=re.escape(message)) as ours:
        call(rnn, aotjax)
    assert str(ours.value).startswith(f"{op}: ") and "(at test_nn_utils.py:" in str(ours.value)


@pytest.mark.x32_only
def test_lengths_longer_than_the_padded_sequences_raise():
    with pytest.raises(RuntimeError, match=r"a length \(5\) is longer than the padded sequences \(4 steps"):
        rnn.pack_padded_sequence(aotjax.zeros(4, 3), [5, 2, 1])
