"""aotjax.nn against torch.nn: each layer built in torch, its state_dict copied into ours, forward outputs compared
(train and eval), BatchNorm's running statistics, MultiheadAttention with masks; the Module surface (names and
key order of named_parameters/state_dict, load_state_dict's errors, repr, attribute rules) and the pytree
(key paths, a jitted call that compiles once and writes BatchNorm's statistics back)."""
import copy
from collections import OrderedDict

import jax
import numpy as np
import pytest

import aotjax
from aotjax import nn
from tests.helpers import INT

# NOTE: modules compute in the default float (float32) in both modes: run once, in jax's default mode
pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
tnn = torch.nn

RTOL, ATOL = 1e-5, 1e-5


def load_from_torch(ours: nn.Module, theirs) -> nn.Module:
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours


def close(ours, theirs, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(np.asarray(ours), theirs.detach().numpy(), rtol=rtol, atol=atol)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- layers against torch ----------------------------------------------------------------------------
LAYERS = [
    ("linear", lambda m: m.Linear(4, 3), (5, 4)),
    ("linear_no_bias", lambda m: m.Linear(4, 3, bias=False), (2, 6, 4)),
    ("layer_norm", lambda m: m.LayerNorm(4), (3, 4)),
    ("layer_norm_2d_no_bias", lambda m: m.LayerNorm([2, 4], eps=1e-3, bias=False), (3, 2, 4)),
    ("layer_norm_no_affine", lambda m: m.LayerNorm(4, elementwise_affine=False), (3, 4)),
    ("rms_norm", lambda m: m.RMSNorm(4), (3, 4)),
    ("rms_norm_eps", lambda m: m.RMSNorm([4], eps=1e-2), (3, 4)),
    ("relu", lambda m: m.ReLU(), (3, 4)),
    ("gelu", lambda m: m.GELU(), (3, 4)),
    ("gelu_tanh", lambda m: m.GELU(approximate="tanh"), (3, 4)),
    ("silu", lambda m: m.SiLU(), (3, 4)),
    ("tanh", lambda m: m.Tanh(), (3, 4)),
    ("sigmoid", lambda m: m.Sigmoid(), (3, 4)),
    ("softmax", lambda m: m.Softmax(dim=0), (3, 4)),
    ("identity", lambda m: m.Identity(3), (3, 4)),
    ("dropout_p0", lambda m: m.Dropout(0.0), (3, 4)),
    ("mlp", lambda m: m.Sequential(m.Linear(4, 8), m.GELU(), m.Dropout(0.0), m.Linear(8, 2)), (3, 4)),
]


@pytest.mark.parametrize("name, make, shape", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_matches_torch(name, make, shape):
    theirs = make(tnn)
    ours = load_from_torch(make(nn), theirs)
    x = rand(*shape)
    for mode in (True, False):
        theirs.train(mode), ours.train(mode)
        close(ours(aotjax.tensor(x)), theirs(torch.tensor(x)))
    assert repr(ours) == repr(theirs)


def test_embedding_matches_torch_and_padding_row_gets_no_gradient():
    theirs = tnn.Embedding(6, 3, padding_idx=-2)
    ours = load_from_torch(nn.Embedding(6, 3, padding_idx=-2), theirs)
    assert ours.padding_idx == 4 and repr(ours) == repr(theirs) == "Embedding(6, 3, padding_idx=4)"
    assert ours.weight[4].tolist() == [0.0, 0.0, 0.0]
    idx = np.array([[0, 4, 5], [4, 4, 1]])
    close(ours(aotjax.tensor(idx, dtype=INT)), theirs(torch.tensor(idx)))
    theirs(torch.tensor(idx)).pow(2).sum().backward()
    grad = aotjax.grad(lambda w: nn.functional.embedding(aotjax.tensor(idx, dtype=INT), w, padding_idx=4).pow(2)
                       .sum())(ours.weight)
    close(grad, theirs.weight.grad)
    assert grad[4].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("kind, shape", [("BatchNorm1d", (6, 3)), ("BatchNorm1d", (4, 3, 5)),
                                         ("BatchNorm2d", (2, 3, 4, 5))])
def test_batch_norm_matches_torch(kind, shape, momentum):
    theirs = getattr(tnn, kind)(3, momentum=momentum)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5), theirs.bias.uniform_(-1, 1)
    ours = load_from_torch(getattr(nn, kind)(3, momentum=momentum), theirs)
    for step in range(3):
        x = rand(*shape, seed=step) * (step + 1) + step
        close(ours(aotjax.tensor(x)), theirs(torch.tensor(x)))
    for name in ("running_mean", "running_var"):
        close(getattr(ours, name), getattr(theirs, name))
    assert ours.num_batches_tracked.item() == 3 and ours.num_batches_tracked.dtype == INT
    ours.eval(), theirs.eval()
    x = rand(*shape, seed=9)
    close(ours(aotjax.tensor(x)), theirs(torch.tensor(x)))
    assert repr(ours) == repr(theirs)


def test_batch_norm_without_running_stats_or_affine():
    theirs = tnn.BatchNorm1d(3, affine=False, track_running_stats=False)
    ours = nn.BatchNorm1d(3, affine=False, track_running_stats=False)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []
    x = rand(5, 3)
    for mode in (True, False):  # NOTE: batch statistics in both modes
        ours.train(mode), theirs.train(mode)
        close(ours(aotjax.tensor(x)), theirs(torch.tensor(x)))


def test_batch_norm_errors():
    with pytest.raises(ValueError, match="expected 2D or 3D input \\(got 4D input\\)"):
        nn.BatchNorm1d(3)(aotjax.ones(2, 3, 4, 5))
    with pytest.raises(ValueError, match="expected 4D input \\(got 2D input\\)"):
        nn.BatchNorm2d(3)(aotjax.ones(2, 3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(aotjax.ones(1, 3))
    with pytest.raises(ValueError, match="running_mean should contain 3 elements"):
        nn.BatchNorm1d(4)(aotjax.ones(2, 3))


MHA_CASES = {
    "plain": dict(),
    "batch_first_no_bias": dict(batch_first=True, bias=False),
    "masks": dict(key_padding_mask=True, attn_mask="bool"),
    "float_mask_per_head": dict(attn_mask="float3d", average_attn_weights=False),
    "causal": dict(batch_first=True, attn_mask="causal", is_causal=True),
    "unbatched": dict(unbatched=True, key_padding_mask=True, attn_mask="float"),
    "no_weights": dict(need_weights=False, key_padding_mask=True),
}


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask and attn_mask")
@pytest.mark.parametrize("case", list(MHA_CASES))
def test_multihead_attention_matches_torch(case):
    opts = dict(MHA_CASES[case])
    E, H, L, S, N = 8, 2, 3, 4, 2
    ctor = dict(batch_first=opts.pop("batch_first", False), bias=opts.pop("bias", True))
    theirs = tnn.MultiheadAttention(E, H, **ctor)
    ours = load_from_torch(nn.MultiheadAttention(E, H, **ctor), theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    unbatched = opts.pop("unbatched", False)
    lead = () if unbatched else ((N,) if ctor["batch_first"] else None)

    def seq(T, seed):
        shape = (T, E) if unbatched else ((N, T, E) if ctor["batch_first"] else (T, N, E))
        return rand(*shape, seed=seed)
    q, k, v = seq(L, 1), seq(S, 2), seq(S, 3)
    kwargs = {}
    if opts.pop("key_padding_mask", False):
        kpm = np.zeros((S,) if unbatched else (N, S), bool)
        kpm[..., -1] = True
        kwargs["key_padding_mask"] = kpm
    mask = opts.pop("attn_mask", None)
    if mask == "bool":
        kwargs["attn_mask"] = np.triu(np.ones((L, S), bool), 2)
    elif mask == "float":
        kwargs["attn_mask"] = rand(L, S, seed=4)
    elif mask == "float3d":
        kwargs["attn_mask"] = rand(N * H, L, S, seed=5)
    elif mask == "causal":
        kwargs["attn_mask"] = np.triu(np.ones((L, S), bool), 1)
    kwargs.update(opts)
    del lead
    to_ours = {k: aotjax.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    to_theirs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    ours.eval(), theirs.eval()
    out, weights = ours(aotjax.tensor(q), aotjax.tensor(k), aotjax.tensor(v), **to_ours)
    t_out, t_weights = theirs(torch.tensor(q), torch.tensor(k), torch.tensor(v), **to_theirs)
    close(out, t_out)
    if t_weights is None:
        assert weights is None
    else:
        close(weights, t_weights)


def test_multihead_attention_errors():
    with pytest.raises(NotImplementedError, match="kdim=4"):
        nn.MultiheadAttention(8, 2, kdim=4, vdim=4)
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(8, 3)
    mha = nn.MultiheadAttention(8, 2)
    x = aotjax.ones(3, 1, 8)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        mha(x, x, x, attn_mask=aotjax.zeros(2, 3))


# -- the Module surface ------------------------------------------------------------------------------
def nested(m):
    """A model using every container, BatchNorm and MHA, built from `m` (torch.nn or aotjax.nn)."""
    class Block(m.Module):
        def __init__(self):
            super().__init__()
            self.attn = m.MultiheadAttention(4, 2, batch_first=True)
            self.norm = m.LayerNorm(4)
            self.register_buffer("scale", aotjax.ones(1) if m is nn else torch.ones(1))
            self.register_buffer("cache", aotjax.zeros(2) if m is nn else torch.zeros(2), persistent=False)

        def forward(self, x):
            return self.norm(x + self.attn(x, x, x, need_weights=False)[0]) * self.scale

    class Net(m.Module):
        def __init__(self):
            super().__init__()
            self.embed = m.Linear(3, 4)
            self.blocks = m.ModuleList([Block(), Block()])
            self.bn = m.BatchNorm1d(4)
            self.heads = m.ModuleDict({"a": m.Linear(4, 2), "b": m.Sequential(OrderedDict(
                fc=m.Linear(4, 4), act=m.ReLU(), out=m.Linear(4, 1)))})

        def forward(self, x):
            h = self.embed(x)
            for block in self.blocks:
                h = block(h)
            h = self.bn(h.transpose(1, 2)).transpose(1, 2)
            return self.heads["a"](h).sum(-1) + self.heads["b"](h).squeeze(-1)

    return Net()


def test_nested_model_names_and_forward_match_torch():
    theirs, ours = nested(tnn), nested(nn)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    load_from_torch(ours, theirs)
    x = rand(2, 5, 3)
    close(ours(aotjax.tensor(x)), theirs(torch.tensor(x)))
    close(ours.blocks[1].norm.weight, theirs.blocks[1].norm.weight)
    close(ours.bn.running_var, theirs.bn.running_var)
    assert ours.get_buffer("blocks.0.scale").tolist() == [1.0]
    assert ours.get_parameter("heads.b.fc.bias") is ours.heads["b"].fc.bias
    assert ours.get_submodule("blocks.1.attn.out_proj") is ours.blocks[1].attn.out_proj
    with pytest.raises(AttributeError, match="`scale` is not an nn.Parameter"):
        ours.get_parameter("blocks.0.scale")
    with pytest.raises(AttributeError, match="has no attribute `nope`"):
        ours.get_submodule("blocks.nope")
    with pytest.raises(AttributeError, match="`weight` is not a buffer"):
        ours.get_buffer("embed.weight")


def test_repr_matches_torch_apart_from_the_out_projection_class():
    assert repr(nested(nn)) == repr(nested(tnn)).replace("NonDynamicallyQuantizableLinear", "Linear")


def test_state_dict_values_share_storage_and_keep_vars():
    fc = nn.Linear(2, 2)
    sd = fc.state_dict()
    sd["bias"].fill_(3.0)
    assert fc.bias.tolist() == [3.0, 3.0] and type(sd["bias"]) is aotjax.Tensor
    assert fc.state_dict(keep_vars=True)["weight"] is fc.weight
    assert list(fc.state_dict(prefix="fc.")) == ["fc.weight", "fc.bias"]


def test_load_state_dict_strict_errors_as_torch():
    theirs, ours = tnn.Linear(2, 3), nn.Linear(2, 3)
    bad = {"weight": np.zeros((3, 2), np.float32), "extra": np.zeros(1, np.float32)}
    with pytest.raises(RuntimeError) as t_err:
        theirs.load_state_dict({k: torch.tensor(v) for k, v in bad.items()})
    with pytest.raises(RuntimeError) as o_err:
        ours.load_state_dict(bad)
    assert str(o_err.value) == str(t_err.value)
    assert str(o_err.value) == ('Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: "bias". '
                                '\n\tUnexpected key(s) in state_dict: "extra". ')
    result = ours.load_state_dict(bad, strict=False)
    assert result == theirs.load_state_dict({k: torch.tensor(v) for k, v in bad.items()}, strict=False)
    assert result.missing_keys == ["bias"] and ours.weight.tolist() == [[0.0, 0.0]] * 3
    with pytest.raises(RuntimeError, match=r"size mismatch for bias: copying a param with shape \[2\] from "
                                           r"checkpoint, the shape in current model is \[3\]"):
        ours.load_state_dict({"weight": np.zeros((3, 2), np.float32), "bias": np.zeros(2, np.float32)},
                            strict=False)


def test_load_state_dict_copies_in_place_or_assigns():
    bn = nn.BatchNorm1d(2)
    mean, weight = bn.running_mean, bn.weight
    theirs = tnn.BatchNorm1d(2)
    theirs(torch.randn(4, 2))
    load_from_torch(bn, theirs)
    assert bn.running_mean is mean and bn.weight is weight and bn.num_batches_tracked.item() == 1
    close(mean, theirs.running_mean)
    new = aotjax.tensor([5.0, 6.0])
    bn.load_state_dict({"running_mean": new, "weight": new}, strict=False, assign=True)
    assert bn.running_mean is new and isinstance(bn.weight, nn.Parameter) and bn.weight.tolist() == [5.0, 6.0]


def test_attribute_registration_rules():
    m = nn.Module()
    m.w = nn.Parameter(aotjax.ones(2))
    m.register_buffer("b", aotjax.zeros(2))
    m.sub = nn.Linear(1, 1)
    m.plain = aotjax.ones(1)  # a plain attribute: neither parameter nor buffer
    assert [n for n, _ in m.named_parameters()] == ["w", "sub.weight", "sub.bias"]
    assert [n for n, _ in m.named_buffers()] == ["b"]
    with pytest.raises(TypeError, match="cannot assign 'aotjax.tensor.Tensor' as parameter 'w'"):
        m.w = aotjax.zeros(2)
    m.b = aotjax.full((2,), 7.0)  # replaces the buffer
    assert m.b.tolist() == [7.0, 7.0] and [n for n, _ in m.named_buffers()] == ["b"]
    with pytest.raises(TypeError, match="as child module 'sub'"):
        m.sub = 3
    m.w = None
    assert [n for n, _ in m.named_parameters()] == ["sub.weight", "sub.bias"] and m.w is None
    del m.sub
    assert not hasattr(m, "sub") and [n for n, _ in m.named_parameters()] == []
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        m.register_buffer("plain", aotjax.ones(1))
    with pytest.raises(KeyError, match=r'contain "\.", got: a.b'):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="cannot assign 'aotjax.tensor.Tensor' object to parameter 'q'"):
        m.register_parameter("q", aotjax.ones(1))
    with pytest.raises(AttributeError, match="'Module' object has no attribute 'missing'"):
        _ = m.missing

    class Forgetful(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(aotjax.ones(1))
    with pytest.raises(AttributeError, match="before Module.__init__\\(\\) call"):
        Forgetful()
    with pytest.raises(NotImplementedError, match='missing the required "forward" function'):
        nn.Module()(1)


def test_shared_modules_and_parameters_come_once():
    fc = nn.Linear(2, 2)
    net = nn.Sequential(fc, nn.ReLU(), fc)
    assert [n for n, _ in net.named_parameters()] == ["0.weight", "0.bias"]
    assert len(list(net.named_parameters(remove_duplicate=False))) == 4
    assert len(list(net.modules())) == 3
    assert [n for n, _ in net.named_parameters(recurse=False)] == []


def test_train_eval_apply_requires_grad_and_dtype_conversion():
    net = nested(nn)
    assert net.eval() is net and not any(m.training for m in net.modules())
    assert all(m.training for m in net.train().modules())
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")
    names = []
    net.apply(lambda m: names.append(type(m).__name__))
    assert names[-1] == "Net" and names.count("Linear") == 6
    assert not any(p.requires_grad for p in net.requires_grad_(False).parameters())
    weight = net.embed.weight
    assert net.half() is net and weight.dtype == np.float16 and net.embed.weight is weight
    assert net.bn.num_batches_tracked.dtype == INT  # only floating-point tensors convert
    net.to(aotjax.bfloat16)
    assert {str(p.dtype) for p in net.parameters()} == {"bfloat16"}
    assert net.float().blocks[0].scale.dtype == np.float32
    assert net.to("cpu") is net and net.zero_grad() is None


def test_sequential_and_module_list_and_dict_behave_as_torch():
    layers = [nn.Linear(2, 2), nn.ReLU(), nn.Tanh()]
    seq = nn.Sequential(*layers)
    assert seq[1] is layers[1] and seq[-1] is layers[2] and list(seq) == layers and len(seq) == 3
    assert isinstance(seq[1:], nn.Sequential) and list(seq[1:]) == layers[1:]
    with pytest.raises(IndexError):
        seq[3]
    seq.append(nn.Sigmoid())
    del seq[0]
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2"]
    named = nn.Sequential(OrderedDict(a=nn.ReLU(), b=nn.Tanh()))
    assert named.a is named[0] and [n for n, _ in named.named_children()] == ["a", "b"]
    x = aotjax.tensor([-1.0, 1.0])
    assert named(x).tolist() == aotjax.tanh(aotjax.relu(x)).tolist()

    ml = nn.ModuleList(layers[:2])
    ml.extend([nn.Sigmoid()])
    ml.insert(0, nn.Identity())
    ml += [nn.GELU()]
    assert [type(m).__name__ for m in ml] == ["Identity", "Linear", "ReLU", "Sigmoid", "GELU"]
    assert [type(m).__name__ for m in ml[1:3]] == ["Linear", "ReLU"] and type(ml[1:3]) is nn.ModuleList
    assert len(ml + ml) == 10 and ml.pop(0).__class__ is nn.Identity and len(ml) == 4
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2", "3"]
    assert repr(nn.ModuleList([nn.ReLU(), nn.ReLU(), nn.Tanh()])) == repr(tnn.ModuleList(
        [tnn.ReLU(), tnn.ReLU(), tnn.Tanh()]))
    for lib in (nn, tnn):  # a ModuleList or Sequential is an iterable of modules; a module is not
        more = lib.ModuleList([lib.ReLU()])
        assert more.extend(lib.ModuleList([lib.Tanh()])).extend(lib.Sequential(lib.GELU())) is more
        assert [type(m).__name__ for m in more] == ["ReLU", "Tanh", "GELU"]
        with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable, but got ReLU"):
            more.extend(lib.ReLU())

    md = nn.ModuleDict([("x", nn.ReLU()), ("y", nn.Tanh())])
    md["z"] = nn.Identity()
    assert list(md) == ["x", "y", "z"] and list(md.keys()) == ["x", "y", "z"] and "y" in md
    assert md.pop("x").__class__ is nn.ReLU and len(md) == 2


# -- Parameter ---------------------------------------------------------------------------------------
def test_parameter_shares_storage_ops_return_plain_tensors():
    data = aotjax.ones(2, 2)
    p = nn.Parameter(data)
    assert isinstance(p, aotjax.Tensor) and p.requires_grad
    assert all(not isinstance(t, nn.Parameter) for t in (p * 2, p[0], p.detach()))
    assert (p * 2).requires_grad and p[0].requires_grad and not p.detach().requires_grad and not data.requires_grad
    with aotjax.no_grad():  # NOTE: a parameter is a leaf that requires grad: written in place under no_grad
        assert p.mul_(3) is p and data.tolist() == [[3.0, 3.0]] * 2  # in place, through the shared storage
    data[0, 0] = 5.0
    assert p[0, 0].item() == 5.0
    expected = "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert repr(nn.Parameter(aotjax.tensor([1.0, 2.0]))) == expected
    assert repr(nn.Parameter(aotjax.tensor([1.0]), requires_grad=False)) == "Parameter containing:\ntensor([1.])"
    assert nn.Parameter().shape == (0,) and not nn.Parameter(data, requires_grad=False).requires_grad
    with pytest.raises(TypeError, match="cannot wrap a traced tensor"):
        aotjax.jit(lambda x: nn.Parameter(x))(aotjax.ones(1))


# -- the pytree and transforms -----------------------------------------------------------------------
def test_pytree_key_paths_and_roundtrip():
    net = nested(nn)
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(net)[0]]
    # a module's parameters, then its buffers, then its submodules'
    assert paths[:5] == [".embed.weight", ".embed.bias", ".blocks[0].scale", ".blocks[0].cache",
                         ".blocks[0].attn.in_proj_weight"]
    assert ".blocks[1].cache" in paths  # non-persistent buffers are state too
    assert ".heads['b'].fc.bias" in paths and ".bn.num_batches_tracked" in paths
    named = [n for n, _ in net.named_parameters()] + [n for n, _ in net.named_buffers()]
    assert len(paths) == len(named)
    leaves, tree = jax.tree_util.tree_flatten(net)
    clone = jax.tree_util.tree_unflatten(tree, leaves)
    assert type(clone) is type(net) and clone is not net and clone.embed.weight is net.embed.weight
    assert clone.blocks[1].attn.num_heads == 2 and clone.bn.eps == net.bn.eps
    assert [n for n, _ in clone.named_parameters()] == [n for n, _ in net.named_parameters()]
    # equal hyperparameters: equal treedefs; another mode or value: another treedef
    assert jax.tree_util.tree_structure(type(net)()) == tree
    assert jax.tree_util.tree_structure(type(net)().eval()) != tree
    assert jax.tree_util.tree_structure(nn.LayerNorm([2, 3])) == jax.tree_util.tree_structure(nn.LayerNorm([2, 3]))
    assert jax.tree_util.tree_structure(nn.Linear(2, 3, bias=False)).num_leaves == 1


def test_jit_compiles_once_and_writes_batch_norm_stats_back():
    def make(m):
        return m.Sequential(m.Linear(3, 4), m.BatchNorm1d(4, momentum=None), m.ReLU(), m.Linear(4, 2))

    theirs = make(tnn)
    ours = load_from_torch(make(nn), theirs)
    step = aotjax.jit(lambda model, x: model(x))
    for i in range(2):
        x = rand(5, 3, seed=i)
        close(step(ours, aotjax.tensor(x)), theirs(torch.tensor(x)))
    assert len(step._cache) == 1
    close(ours[1].running_mean, theirs[1].running_mean)
    close(ours[1].running_var, theirs[1].running_var)
    assert ours[1].num_batches_tracked.item() == 2
    ours.eval(), theirs.eval()
    x = rand(5, 3, seed=7)
    close(step(ours, aotjax.tensor(x)), theirs(torch.tensor(x)))
    assert len(step._cache) == 2 and ours[1].num_batches_tracked.item() == 2


def test_grad_with_respect_to_a_module():
    theirs = tnn.Sequential(tnn.Linear(3, 4), tnn.Tanh(), tnn.Linear(4, 1))
    ours = load_from_torch(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)), theirs)
    x = rand(6, 3)
    theirs(torch.tensor(x)).pow(2).mean().backward()
    grads = aotjax.grad(lambda model: model(aotjax.tensor(x)).pow(2).mean())(ours)
    assert type(grads) is nn.Sequential
    for (name, g), (t_name, t_p) in zip(grads.named_parameters(), theirs.named_parameters(), strict=True):
        assert name == t_name
        close(g, t_p.grad)


def test_dropout_module_draws_from_the_generator():
    drop = nn.Dropout(0.5)
    aotjax.manual_seed(0)
    a = drop(aotjax.ones(64))
    aotjax.manual_seed(0)
    b = drop(aotjax.ones(64))
    assert a.tolist() == b.tolist() and set(a.tolist()) == {0.0, 2.0}
    assert drop(aotjax.ones(64)).tolist() != a.tolist()
    x = aotjax.ones(4)
    assert nn.Dropout(1.0, inplace=True)(x) is x and x.tolist() == [0.0] * 4
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    assert repr(nn.Dropout(0.2)) == repr(tnn.Dropout(0.2))


def test_jitted_step_updates_parameters_in_place_as_eagerly():
    def step(model, x):
        loss, grads = aotjax.value_and_grad(lambda m: m(x).pow(2).mean())(model)
        with aotjax.no_grad():  # NOTE: parameters are leaves that require grad: written under no_grad, as in torch
            for p, g in zip(model.parameters(), grads.parameters(), strict=True):
                p.sub_(0.1 * g)
        return loss

    eager = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    compiled = copy.deepcopy(eager)
    weight = compiled[0].weight
    jitted = aotjax.jit(step)
    for i in range(3):
        x = aotjax.tensor(rand(5, 3, seed=i))
        np.testing.assert_allclose(jitted(compiled, x), step(eager, x), rtol=RTOL, atol=ATOL)
    assert compiled[0].weight is weight and isinstance(weight, nn.Parameter) and len(jitted._cache) == 1
    for a, b in zip(compiled.parameters(), eager.parameters(), strict=True):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


class Scaled(nn.Module):
    def __init__(self, sizes, table):
        super().__init__()
        self.sizes, self.table = sizes, table
        self.w = nn.Parameter(aotjax.ones(2))

    def forward(self, x):
        return x * self.w * len(self.sizes) * self.table["k"]


def test_unhashable_attributes_are_compared_by_value():
    a, b, c = Scaled([1, 2], {"k": 1.0}), Scaled([1, 2], {"k": 1.0}), Scaled([1, 2, 3], {"k": 1.0})
    structure = jax.tree_util.tree_structure
    assert structure(a) == structure(b) and hash(structure(a)) == hash(structure(b))
    assert structure(a) != structure(c) and structure(a) != structure(Scaled([1, 2], {"k": 2.0}))
    call = aotjax.jit(lambda m, x: m(x))
    assert call(a, aotjax.ones(2)).tolist() == [2.0, 2.0] and call(b, aotjax.ones(2)).tolist() == [2.0, 2.0]
    assert call(c, aotjax.ones(2)).tolist() == [3.0, 3.0] and len(call._cache) == 2
