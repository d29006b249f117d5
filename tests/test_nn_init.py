"""aotjax.nn.init: PyTorch's distributions (bounds, means and standard deviations on large tensors; the numbers
themselves differ: another RNG), gains and fans as torch.nn.init's, draws from the stateful generator, and the
layers' default initializations."""
import math

import numpy as np
import pytest

import aotjax
from aotjax import nn
from aotjax.nn import init

# NOTE: modules compute in the default float (float32) in both modes: run once, in jax's default mode
pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")

N = 200_000


def stats(t):
    a = np.asarray(t, np.float64)
    return a.min(), a.max(), a.mean(), a.std()


@pytest.mark.parametrize("nonlinearity, param", [("linear", None), ("conv2d", None), ("sigmoid", None),
                                                 ("tanh", None), ("relu", None), ("leaky_relu", None),
                                                 ("leaky_relu", 0.2), ("selu", None)])
def test_calculate_gain_matches_torch(nonlinearity, param):
    assert init.calculate_gain(nonlinearity, param) == pytest.approx(torch.nn.init.calculate_gain(nonlinearity,
                                                                                                   param))


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity softsign"):
        init.calculate_gain("softsign")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", "x")


def test_uniform_and_normal():
    lo, hi, mean, std = stats(init.uniform_(aotjax.empty(N), -2.0, 3.0))
    assert -2.0 <= lo and hi < 3.0 and mean == pytest.approx(0.5, abs=0.03) and std == pytest.approx(
        5 / math.sqrt(12), rel=0.01)
    _, _, mean, std = stats(init.normal_(aotjax.empty(N), mean=1.0, std=0.5))
    assert mean == pytest.approx(1.0, abs=0.01) and std == pytest.approx(0.5, rel=0.01)


def test_trunc_normal_matches_the_truncated_distribution():
    a, b, mean, std = -1.0, 3.0, 0.5, 2.0
    lo, hi, m, s = stats(init.trunc_normal_(aotjax.empty(N), mean, std, a, b))
    # the truncated normal's moments, from its density (numerically, in float64)
    x = np.linspace(a, b, 200_001)
    pdf = np.exp(-0.5 * ((x - mean) / std) ** 2)
    pdf /= pdf.sum()
    ref_mean = (x * pdf).sum()
    ref_std = math.sqrt(((x - ref_mean) ** 2 * pdf).sum())
    assert a <= lo and hi <= b
    assert m == pytest.approx(ref_mean, abs=0.01) and s == pytest.approx(ref_std, rel=0.01)


def test_constant_ones_zeros_eye():
    assert init.constant_(aotjax.empty(2), 0.3).tolist() == pytest.approx([0.3, 0.3])
    assert init.ones_(aotjax.empty(2)).tolist() == [1.0, 1.0]
    assert init.zeros_(aotjax.ones(2)).tolist() == [0.0, 0.0]
    np.testing.assert_array_equal(init.eye_(aotjax.empty(3, 2)), torch.nn.init.eye_(torch.empty(3, 2)).numpy())
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        init.eye_(aotjax.empty(2, 2, 2))


def within(lo, hi, bound):
    """[lo, hi] lies in [-bound, bound], the bound as float32 rounds it (a sample may be the rounded edge)."""
    edge = float(np.float32(bound)) * (1 + 1e-6)
    return -edge <= lo and hi <= edge


def test_xavier_and_kaiming():
    shape = (300, 500)
    fan_in, fan_out = 500, 300
    std = math.sqrt(2.0 / (fan_in + fan_out))
    lo, hi, _, s = stats(init.xavier_uniform_(aotjax.empty(*shape), gain=2.0))
    assert within(lo, hi, 2 * math.sqrt(3) * std) and s == pytest.approx(2 * std, rel=0.02)
    assert stats(init.xavier_normal_(aotjax.empty(*shape)))[3] == pytest.approx(std, rel=0.02)
    gain = torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5))
    bound = gain * math.sqrt(3 / fan_in)
    lo, hi, _, s = stats(init.kaiming_uniform_(aotjax.empty(*shape), a=math.sqrt(5)))
    assert within(lo, hi, bound) and s == pytest.approx(bound / math.sqrt(3), rel=0.02)
    s = stats(init.kaiming_normal_(aotjax.empty(*shape), mode="fan_out", nonlinearity="relu"))[3]
    assert s == pytest.approx(math.sqrt(2 / fan_out), rel=0.02)


def test_fans_of_a_convolution_weight_count_the_receptive_field():
    shape = (40, 30, 5, 5)
    _, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    s = stats(init.kaiming_normal_(aotjax.empty(*shape), mode="fan_out", nonlinearity="relu"))[3]
    assert fan_out == 40 * 25 and s == pytest.approx(math.sqrt(2 / fan_out), rel=0.02)


def test_fan_errors():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(aotjax.empty(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(aotjax.empty(3, 3), mode="fan_avg")
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(aotjax.empty(0, 3))


def test_draws_from_the_generator():
    g = aotjax.Generator(3)
    a = init.kaiming_uniform_(aotjax.empty(4, 4), generator=g)
    b = init.kaiming_uniform_(aotjax.empty(4, 4), generator=g.manual_seed(3))
    assert a.tolist() == b.tolist()
    aotjax.manual_seed(5)
    c = nn.Linear(4, 4).weight.clone()
    aotjax.manual_seed(5)
    assert nn.Linear(4, 4).weight.tolist() == c.tolist()
    assert nn.Linear(4, 4).weight.tolist() != c.tolist()


def test_layer_default_initializations():
    fc = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    for t in (fc.weight, fc.bias):
        lo, hi, _, _ = stats(t)
        assert within(lo, hi, bound) and hi > 0.9 * bound
    assert stats(fc.weight)[3] == pytest.approx(bound / math.sqrt(3), rel=0.03)
    _, _, mean, std = stats(nn.Embedding(1000, 64).weight)
    assert mean == pytest.approx(0.0, abs=0.01) and std == pytest.approx(1.0, rel=0.02)
    ln = nn.LayerNorm(3)
    assert ln.weight.tolist() == [1.0] * 3 and ln.bias.tolist() == [0.0] * 3
    assert nn.RMSNorm(2).weight.tolist() == [1.0, 1.0]
    mha = nn.MultiheadAttention(64, 4)
    xavier = math.sqrt(6 / (64 + 3 * 64))
    lo, hi, _, _ = stats(mha.in_proj_weight)
    assert within(lo, hi, xavier) and hi > 0.9 * xavier
    assert not mha.in_proj_bias.numpy().any() and not mha.out_proj.bias.numpy().any()
    assert np.abs(mha.out_proj.weight.numpy()).max() <= 1 / 8
