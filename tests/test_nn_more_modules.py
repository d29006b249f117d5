"""`ParameterList`, `ParameterDict`, `Fold`, `Unfold`, `Softmax2d`, `UpsamplingNearest2d`, `UpsamplingBilinear2d`
and `LPPool1d/2d/3d` against torch's: values, input gradients (`backward()` of a weighted sum), reprs; the
containers' list and dict surface, parameter names, state dicts and pytree paths."""
from collections import OrderedDict

import jax
import numpy as np
import pytest

import aotjax
from aotjax import nn

pytestmark = pytest.mark.x32_only  # NOTE: float32 modules in both modes: not run again in the x64 pass

torch = pytest.importorskip("torch")


def rand(*shape, seed=0, positive=False):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return np.abs(x) + 0.1 if positive else x


def run(lib, make, x, w):
    module = make(lib.nn)
    xt = lib.tensor(x).requires_grad_()
    out = module(xt)
    (out * lib.tensor(w)).sum().backward()
    return repr(module), out.detach().numpy(), xt.grad.numpy()


def check_against_torch(make, shape, positive=False, rtol=1e-5, atol=1e-5):
    x = rand(*shape, positive=positive)
    out_shape = tuple(make(torch.nn)(torch.tensor(x)).shape)
    w = rand(*out_shape, seed=1)
    ours, theirs = run(aotjax, make, x, w), run(torch, make, x, w)
    assert ours[0] == theirs[0]
    assert ours[1].shape == theirs[1].shape
    np.testing.assert_allclose(ours[1], theirs[1], rtol=rtol, atol=atol)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=rtol, atol=atol)


# -- layers ----------------------------------------------------------------------------------------------------------
LAYERS = [
    ("unfold", lambda m: m.Unfold(2), (2, 3, 4, 5), False),
    ("unfold_args", lambda m: m.Unfold((2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), (1, 2, 5, 6), False),
    ("fold", lambda m: m.Fold((4, 5), 2), (2, 12, 12), False),
    ("fold_args", lambda m: m.Fold(output_size=(5, 6), kernel_size=(2, 3), dilation=(1, 2), padding=1,
                                   stride=(2, 1)), (6, 12), False),
    ("softmax2d_4d", lambda m: m.Softmax2d(), (2, 3, 2, 2), False),
    ("softmax2d_3d", lambda m: m.Softmax2d(), (3, 2, 4), False),
    ("upsampling_nearest", lambda m: m.UpsamplingNearest2d(scale_factor=2), (1, 2, 3, 3), False),
    ("upsampling_nearest_size", lambda m: m.UpsamplingNearest2d(size=(5, 4)), (1, 2, 3, 3), False),
    ("upsampling_bilinear", lambda m: m.UpsamplingBilinear2d(scale_factor=2), (1, 2, 3, 3), False),
    ("upsampling_bilinear_size", lambda m: m.UpsamplingBilinear2d(size=(4, 7)), (2, 1, 3, 3), False),
    ("lppool1d", lambda m: m.LPPool1d(2, 3), (2, 3, 7), False),
    ("lppool1d_stride_ceil", lambda m: m.LPPool1d(3.5, 2, stride=1, ceil_mode=True), (1, 2, 5), True),
    ("lppool2d", lambda m: m.LPPool2d(2, 2), (2, 3, 4, 4), False),
    ("lppool2d_args", lambda m: m.LPPool2d(1.5, (2, 3), stride=(1, 2), ceil_mode=True), (1, 2, 5, 6), True),
    ("lppool2d_inf", lambda m: m.LPPool2d(float("inf"), 2), (1, 2, 4, 4), False),
    ("lppool3d", lambda m: m.LPPool3d(2, 2), (1, 2, 4, 4, 4), False),
]


@pytest.mark.parametrize("make, shape, positive", [row[1:] for row in LAYERS], ids=[row[0] for row in LAYERS])
def test_layer_values_gradients_and_repr_match_torch(make, shape, positive):
    check_against_torch(make, shape, positive)


def test_fold_inverts_unfold_up_to_the_overlap_counts_as_torch():
    x = rand(1, 2, 4, 4)
    for lib in (aotjax, torch):
        cols = lib.nn.Unfold(2, stride=1)(lib.tensor(x))
        counts = lib.nn.Fold((4, 4), 2, stride=1)(lib.nn.Unfold(2, stride=1)(lib.ones(1, 2, 4, 4)))
        np.testing.assert_allclose((lib.nn.Fold((4, 4), 2, stride=1)(cols) / counts).numpy(), x, rtol=1e-6)


def test_softmax2d_rejects_other_ranks_as_torch():
    for lib in (aotjax, torch):
        with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D instead"):
            lib.nn.Softmax2d()(lib.ones(2, 2))


def test_lp_pool_functional_forms_match_torch():
    x = rand(2, 3, 6, 6, positive=True)
    for name, args in [("lp_pool1d", (x[:, :, 0], 2.0, 3)), ("lp_pool2d", (x, 3, (2, 3), 2)),
                       ("lp_pool3d", (x[:, None], 2, 2))]:
        ours = getattr(aotjax.nn.functional, name)(aotjax.tensor(args[0]), *args[1:])
        theirs = getattr(torch.nn.functional, name)(torch.tensor(args[0]), *args[1:])
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)


# -- ParameterList ---------------------------------------------------------------------------------------------------
def parameter_list_scenario(lib):
    log = []
    first = lib.nn.Parameter(lib.tensor(rand(2, 3)))
    plist = lib.nn.ParameterList([first, lib.tensor(rand(3)), "note"])
    plist.append(lib.zeros(4))
    plist.extend([lib.ones(1)])
    plist += [lib.nn.Parameter(lib.ones(2), requires_grad=False)]
    log.append([(n, tuple(p.shape), p.requires_grad, type(p).__name__) for n, p in plist.named_parameters()])
    log.append(list(plist.state_dict()))
    log.append((len(plist), plist[0] is first, first in plist, type(plist[1]).__name__, plist[2]))
    log.append(tuple(plist[-1].shape))
    part = plist[1:4:2]
    log.append((type(part).__name__, len(part), [getattr(p, "shape", p) for p in part]))
    plist[1] = lib.ones(5)  # a tensor is made a Parameter
    log.append((type(plist[1]).__name__, tuple(plist[1].shape)))
    log.append(repr(plist))
    log.append([type(p).__name__ for p in plist])
    with pytest.raises(IndexError):
        plist[6]
    with pytest.raises(TypeError, match="ParameterList.extend should be called with an iterable"):
        plist.extend(lib.ones(2))
    with pytest.raises(RuntimeError, match="ParameterList should not be called"):
        plist(1)
    return log


def test_parameter_list_matches_torch():
    assert parameter_list_scenario(aotjax) == parameter_list_scenario(torch)


def test_parameter_list_in_a_model_trains_and_flattens_with_numbered_paths():
    class Mixture(nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = nn.ParameterList([nn.Parameter(aotjax.ones(2) * (i + 1)) for i in range(3)])

        def forward(self, x):
            return sum(w * x for w in self.weights)

    m = Mixture()
    m(aotjax.ones(2)).sum().backward()
    assert all(w.grad.tolist() == [1.0, 1.0] for w in m.weights)
    paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(m)[0]]
    assert paths == [".weights[0]", ".weights[1]", ".weights[2]"]
    out = aotjax.jit(lambda m, x: m(x))(m, aotjax.ones(2))
    assert out.tolist() == [6.0, 6.0]


# -- ParameterDict ---------------------------------------------------------------------------------------------------
def parameter_dict_scenario(lib):
    log = []
    pdict = lib.nn.ParameterDict({"b": lib.tensor(rand(2)), "a": lib.nn.Parameter(lib.ones(3)), "c": 7})
    log.append((list(pdict), list(pdict.keys()), [n for n, _ in pdict.named_parameters()], list(pdict.state_dict())))
    pdict.update(OrderedDict([("z", lib.zeros(1)), ("y", lib.zeros(2))]))  # an OrderedDict keeps its order
    pdict.update([("x", lib.zeros(3))])
    log.append((list(pdict), len(pdict), "a" in pdict, "q" in pdict, type(pdict["b"]).__name__))
    log.append([k for k, _ in pdict.items()] == list(pdict) and len(list(pdict.values())) == len(pdict))
    log.append((tuple(pdict.pop("x").shape), pdict.popitem()[0], pdict.get("q", "default"), pdict.get("c")))
    log.append(tuple(pdict.setdefault("n", lib.ones(4)).shape))
    del pdict["z"]
    log.append((list(pdict), list(reversed(pdict))))
    merged = pdict | lib.nn.ParameterDict({"m": lib.ones(1)})
    pdict |= lib.nn.ParameterDict({"k": lib.ones(1)})
    log.append((list(merged), list(pdict), list(pdict.copy()), list(pdict.fromkeys(["u", "v"]))))
    log.append(repr(pdict))
    with pytest.raises(TypeError, match="cannot be used as a key as it is not a string"):
        lib.nn.ParameterDict()[1] = lib.ones(1)
    with pytest.raises(ValueError, match="has length 3; 2 is required"):
        pdict.update([("a", 1, 2)])
    pdict.clear()
    log.append((len(pdict), list(pdict.named_parameters())))
    return log


def test_parameter_dict_matches_torch():
    assert parameter_dict_scenario(aotjax) == parameter_dict_scenario(torch)


def test_parameter_dict_state_dict_round_trip_and_paths():
    pdict = nn.ParameterDict({"scale": aotjax.ones(2), "shift": aotjax.zeros(2)})
    other = nn.ParameterDict({"scale": aotjax.zeros(2), "shift": aotjax.ones(2)})
    other.load_state_dict(pdict.state_dict())
    assert other["scale"].tolist() == [1.0, 1.0] and other["shift"].tolist() == [0.0, 0.0]
    paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(pdict)[0]]
    assert paths == ["['scale']", "['shift']"]
    rebuilt = jax.tree_util.tree_map(lambda t: t * 2, pdict)
    rebuilt["extra"] = aotjax.ones(1)  # NOTE: its key list is its own, not the original's
    assert list(pdict) == ["scale", "shift"] and list(rebuilt) == ["scale", "shift", "extra"]
