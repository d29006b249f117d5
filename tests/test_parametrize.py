"""aotjax.nn.utils.parametrize, parametrizations and the older weight_norm / spectral_norm against torch's: the same
stored values (torch's copied in with `load_state_dict`) give the same state_dict keys, forward values, gradients
with respect to the stored tensors, power-iteration buffers, removed weights and SGD steps, eagerly and inside
`aotjax.jit`."""
import copy
from types import SimpleNamespace

import numpy as np
import pytest

import aotjax
from aotjax.nn.utils import parametrizations, parametrize
from aotjax.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from aotjax.nn.utils.weight_norm import remove_weight_norm, weight_norm

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated:FutureWarning"),
              pytest.mark.x32_only]  # NOTE: float32 modules in both modes: not run again in the x64 pass

RTOL = 1e-5


OLD = SimpleNamespace(weight_norm=weight_norm, remove_weight_norm=remove_weight_norm, spectral_norm=spectral_norm,
                      remove_spectral_norm=remove_spectral_norm)


def old(lib):
    """The older functions of `lib`: `weight_norm`, `remove_weight_norm`, `spectral_norm`, `remove_spectral_norm`."""
    return OLD if lib is aotjax else torch.nn.utils


def close(ours, theirs, rtol=RTOL):
    theirs, ours = (np.asarray(t.detach()) if isinstance(t, (torch.Tensor, aotjax.Tensor)) else np.asarray(t)
                    for t in (theirs, ours))
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=rtol)


def twins(make, seed=0):
    """`make(lib)` built with torch and with aotjax, torch's state (parameters and buffers) loaded into aotjax's."""
    torch.manual_seed(seed)
    theirs = make(torch)
    ours = make(aotjax)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def inputs(*shape, seed=1):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return aotjax.tensor(x), torch.tensor(x)


def forward_and_grads_agree(ours, theirs, *shape):
    """The same output, and after `backward()` the same gradients of every parameter (the stored originals)."""
    x_o, x_t = inputs(*shape)
    out_o, out_t = ours(x_o), theirs(x_t)
    close(out_o, out_t)
    (out_o * out_o).sum().backward()
    (out_t * out_t).sum().backward()
    named_o, named_t = list(ours.named_parameters()), list(theirs.named_parameters())
    assert [n for n, _ in named_o] == [n for n, _ in named_t]
    for (_, p), (_, q) in zip(named_o, named_t):
        close(p.grad, q.grad)


def states_agree(ours, theirs):
    sd_o, sd_t = ours.state_dict(), theirs.state_dict()
    assert list(sd_o) == list(sd_t)
    for key in sd_t:
        close(sd_o[key], sd_t[key])


# -- parametrizations written by the user ------------------------------------------------------------------------
def symmetric(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT

        def right_inverse(self, A):
            return A.triu()

    return Symmetric()


def scaled(lib):
    class Scaled(lib.nn.Module):
        def forward(self, X):
            return 3.0 * X

        def right_inverse(self, Y):
            return Y / 3.0

    return Scaled()


def split_in_two(lib):
    class Sum(lib.nn.Module):
        def forward(self, A, B):
            return A + 2.0 * B

        def right_inverse(self, X):
            return X / 2.0, X / 4.0

    return Sum()


CHAINS = {"one": [symmetric], "two": [symmetric, scaled], "split": [split_in_two, scaled]}


def parametrized_linear(chain):
    def make(lib):
        m = lib.nn.Linear(4, 4)
        for p in chain:
            lib.nn.utils.parametrize.register_parametrization(m, "weight", p(lib))
        return m
    return make


@pytest.mark.parametrize("chain", CHAINS.values(), ids=CHAINS.keys())
def test_register_parametrization_matches_torch(chain):
    ours, theirs = twins(parametrized_linear(chain))
    assert type(ours).__name__ == type(theirs).__name__ == "ParametrizedLinear"
    assert parametrize.type_before_parametrizations(ours) is aotjax.nn.Linear
    assert parametrize.is_parametrized(ours) and parametrize.is_parametrized(ours, "weight")
    assert not parametrize.is_parametrized(ours, "bias")
    close(ours.weight, theirs.weight)
    forward_and_grads_agree(ours, theirs, 3, 4)


def test_registration_stores_right_inverse_and_keeps_the_value_and_the_parameter_object():
    torch.manual_seed(0)
    theirs = torch.nn.Linear(3, 3)
    ours = aotjax.nn.Linear(3, 3)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    weight = ours.weight
    expected = np.triu(weight.detach().numpy()) + np.triu(weight.detach().numpy(), 1).T
    parametrize.register_parametrization(ours, "weight", symmetric(aotjax))
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", symmetric(torch))
    assert ours.parametrizations.weight.original is weight  # NOTE: written in place, as torch's set_
    close(ours.parametrizations.weight.original, theirs.parametrizations.weight.original)
    close(ours.weight, expected)


@pytest.mark.parametrize("chain", CHAINS.values(), ids=CHAINS.keys())
def test_assigning_runs_right_inverse_into_the_originals(chain):
    ours, theirs = twins(parametrized_linear(chain))
    value = np.arange(16, dtype=np.float32).reshape(4, 4) / 7
    originals = list(ours.parametrizations.weight.parameters())
    ours.weight = aotjax.tensor(value)
    theirs.weight = torch.tensor(value)
    states_agree(ours, theirs)
    assert list(ours.parametrizations.weight.parameters()) == originals  # NOTE: the same objects, written in place
    close(ours.weight, theirs.weight)
    assert not ours.parametrizations.weight.originals()[0].grad_fn


@pytest.mark.parametrize("leave_parametrized", [True, False])
@pytest.mark.parametrize("chain", CHAINS.values(), ids=CHAINS.keys())
def test_remove_parametrizations_matches_torch(chain, leave_parametrized):
    ours, theirs = twins(parametrized_linear(chain))
    if chain[0] is split_in_two and not leave_parametrized:
        for lib, m in ((aotjax, ours), (torch, theirs)):
            with pytest.raises(ValueError, match="in terms of a sequence of tensors"):
                lib.nn.utils.parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
        return
    original = ours.parametrizations.weight.originals()[0]
    parametrize.remove_parametrizations(ours, "weight", leave_parametrized)
    torch.nn.utils.parametrize.remove_parametrizations(theirs, "weight", leave_parametrized)
    assert type(ours) is aotjax.nn.Linear and not parametrize.is_parametrized(ours)
    assert "parametrizations" not in ours._modules
    states_agree(ours, theirs)
    assert (ours.weight is original) == (chain[0] is not split_in_two)
    forward_and_grads_agree(ours, theirs, 2, 4)


def test_a_parametrized_buffer_and_two_parametrized_tensors():
    def make(lib):
        m = lib.nn.BatchNorm1d(3)
        lib.nn.utils.parametrize.register_parametrization(m, "running_var", scaled(lib))
        lib.nn.utils.parametrize.register_parametrization(m, "weight", scaled(lib))
        return m

    ours, theirs = twins(make)
    assert "parametrizations.running_var.original" in ours.state_dict()
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    ours.eval(), theirs.eval()
    forward_and_grads_agree(ours, theirs, 5, 3)
    parametrize.remove_parametrizations(ours, "running_var")
    torch.nn.utils.parametrize.remove_parametrizations(theirs, "running_var")
    assert type(ours).__name__ == "ParametrizedBatchNorm1d" and parametrize.is_parametrized(ours, "weight")
    states_agree(ours, theirs)
    parametrize.remove_parametrizations(ours, "weight")
    assert type(ours) is aotjax.nn.BatchNorm1d


def test_modules_parametrized_alike_share_their_generated_class():
    a = parametrize.register_parametrization(aotjax.nn.Linear(2, 2), "weight", scaled(aotjax))
    b = parametrize.register_parametrization(aotjax.nn.Linear(2, 2), "weight", scaled(aotjax))
    assert type(a) is type(b)
    twin = copy.deepcopy(a)
    assert type(twin) is type(a) and twin.parametrizations.weight.original is not a.parametrizations.weight.original
    close(twin.weight, a.weight)


def test_cached_computes_each_parametrized_tensor_once():
    calls = []

    class Counted(aotjax.nn.Module):
        def forward(self, X):
            calls.append(1)
            return 2 * X

    m = parametrize.register_parametrization(aotjax.nn.Linear(2, 2), "weight", Counted())
    calls.clear()
    with parametrize.cached():
        with parametrize.cached():
            first = m.weight
        assert m.weight is first
    assert len(calls) == 1
    assert m.weight is not first and len(calls) == 2


def test_cached_inside_a_compiled_function_does_not_mix_eager_and_traced_values():
    m = parametrize.register_parametrization(aotjax.nn.Linear(2, 2), "weight", scaled(aotjax))
    x = aotjax.ones(1, 2)
    with parametrize.cached():
        eager = m(x)
        traced = aotjax.jit(lambda x: m(x) + m(x))(x)
    close(traced, 2 * eager.detach().numpy())


def test_errors_match_torch():
    for lib in (aotjax, torch):
        P = lib.nn.utils.parametrize
        m = lib.nn.Linear(3, 3)
        with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element"):
            P.register_parametrization(m, "nothing", scaled(lib))
        with pytest.raises(ValueError, match="does not have a parametrization on weight"):
            P.remove_parametrizations(m, "weight")

        class Shrink(lib.nn.Module):
            def forward(self, X):
                return X[:2]

        with pytest.raises(ValueError, match="may not change the shape"):
            P.register_parametrization(m, "weight", Shrink())
        assert type(m) is lib.nn.Linear
        P.register_parametrization(m, "weight", Shrink(), unsafe=True)
        assert tuple(m.weight.shape) == (2, 3)

        class NoInverse(lib.nn.Module):
            def forward(self, X):
                return X

        P.register_parametrization(m, "bias", NoInverse())
        with pytest.raises(RuntimeError, match="does not implement right_inverse"):
            m.bias = lib.zeros(3)
        with pytest.raises(KeyError, match="already exists"):
            m.bias = lib.nn.Parameter(lib.zeros(3))


def test_errors_torch_does_not_have_say_what_to_do():
    m = aotjax.nn.Linear(2, 2, bias=False)
    with pytest.raises(ValueError, match="'bias' of Linear is None"):
        parametrize.register_parametrization(m, "bias", scaled(aotjax))

    class Grow(aotjax.nn.Module):
        def forward(self, X):
            return X[:1]

        def right_inverse(self, Y):
            return aotjax.cat([Y, Y])

    parametrize.register_parametrization(m, "weight", Grow(), unsafe=True)
    with pytest.raises(ValueError, match="writes into the original in place"):
        m.weight = aotjax.ones(1, 2)


def test_transfer_parametrizations_and_params_matches_torch():
    def make(lib):
        source = lib.nn.utils.parametrizations.weight_norm(lib.nn.Linear(3, 2))
        target = lib.nn.Linear(3, 2)
        lib.nn.utils.parametrize.transfer_parametrizations_and_params(source, target)
        return target

    ours, theirs = twins(make)
    forward_and_grads_agree(ours, theirs, 2, 3)


# -- weight_norm and spectral_norm as parametrizations -----------------------------------------------------------
LAYERS = {"linear": (lambda lib: lib.nn.Linear(3, 4), (2, 3)),
          "conv2d": (lambda lib: lib.nn.Conv2d(2, 3, 2), (1, 2, 4, 4)),
          "conv_transpose1d": (lambda lib: lib.nn.ConvTranspose1d(2, 3, 2), (1, 2, 5))}


@pytest.mark.parametrize("dim", [0, 1, None, -2])
@pytest.mark.parametrize("layer", ["linear", "conv2d"])
def test_weight_norm_matches_torch(layer, dim):
    make, shape = LAYERS[layer]
    ours, theirs = twins(lambda lib: lib.nn.utils.parametrizations.weight_norm(make(lib), dim=dim))
    close(ours.weight, theirs.weight)
    forward_and_grads_agree(ours, theirs, *shape)
    parametrize.remove_parametrizations(ours, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(theirs, "weight")
    states_agree(ours, theirs)


@pytest.mark.parametrize("layer", LAYERS)
def test_spectral_norm_matches_torch_in_training_and_eval_mode(layer):
    make, shape = LAYERS[layer]
    ours, theirs = twins(lambda lib: lib.nn.utils.parametrizations.spectral_norm(make(lib)))
    for _ in range(2):  # NOTE: each read in training mode refines the estimates _u and _v
        close(ours.weight, theirs.weight)
    states_agree(ours, theirs)
    forward_and_grads_agree(ours, theirs, *shape)
    states_agree(ours, theirs)
    ours.eval(), theirs.eval()
    forward_and_grads_agree(ours, theirs, *shape)
    states_agree(ours, theirs)
    parametrize.remove_parametrizations(ours, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(theirs, "weight")
    states_agree(ours, theirs)


def test_spectral_norm_registration_estimates_the_largest_singular_value():
    # NOTE: seeded: power iteration converges as (s2 / s1)^2k, so a draw with s2 close to s1 (about 1 in 15 here,
    # torch's too) needs more iterations than registration's 15 to reach the tolerance
    aotjax.manual_seed(0)
    m = parametrizations.spectral_norm(aotjax.nn.Linear(5, 4), n_power_iterations=3)
    weight = m.parametrizations.weight.original.detach().numpy()
    sigma = np.linalg.svd(weight, compute_uv=False)[0]
    np.testing.assert_allclose(m.weight.detach().numpy(), weight / sigma, rtol=1e-4, atol=1e-5)
    assert [n for n, _ in m.named_buffers()] == ["parametrizations.weight.0._u", "parametrizations.weight.0._v"]


def test_spectral_norm_of_a_vector_and_its_errors_match_torch():
    ours, theirs = twins(lambda lib: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(3, 4), "bias"))
    forward_and_grads_agree(ours, theirs, 2, 3)
    for lib in (aotjax, torch):
        with pytest.raises(ValueError, match="has no parameter or buffer with name 'nothing'"):
            lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(2, 2), "nothing")
        with pytest.raises(ValueError, match="n_power_iterations to be positive"):
            lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(2, 2), n_power_iterations=0)
        with pytest.raises(IndexError, match="Dimension out of range"):
            lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(2, 2), dim=2)


ORTHOGONAL = [("matrix_exp", (3, 3)), ("cayley", (3, 3)), ("householder", (3, 3)), ("matrix_exp", (2, 4)),
              ("cayley", (4, 2)), ("householder", (4, 2)), ("householder", (2, 4))]


@pytest.mark.parametrize("orthogonal_map, shape", ORTHOGONAL, ids=[f"{m}-{s[0]}x{s[1]}" for m, s in ORTHOGONAL])
def test_orthogonal_matches_torch(orthogonal_map, shape):
    ours, theirs = twins(lambda lib: lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(shape[1], shape[0]),
                                                                             orthogonal_map=orthogonal_map))
    with torch.no_grad():  # NOTE: a point away from the identity; householder's diagonal holds signs, kept
        noise = 0.3 * torch.randn(shape)
        noise.diagonal().zero_()
        theirs.parametrizations.weight.original.add_(noise)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    Q = ours.weight.detach().numpy()
    small = min(shape)
    np.testing.assert_allclose(Q @ Q.T if shape[0] < shape[1] else Q.T @ Q, np.eye(small), atol=1e-5)
    forward_and_grads_agree(ours, theirs, 2, shape[1])


def test_orthogonal_registration_keeps_a_square_weight_made_orthogonal_as_torch():
    ours, theirs = twins(lambda lib: lib.nn.Linear(3, 3))
    parametrizations.orthogonal(ours)
    torch.nn.utils.parametrizations.orthogonal(theirs)
    close(ours.weight, theirs.weight)
    states_agree(ours, theirs)
    value = torch.linalg.qr(torch.randn(3, 3))[0]
    ours.weight, theirs.weight = aotjax.tensor(value.numpy()), value
    close(ours.weight, value)


def test_orthogonal_without_trivialization_matches_torch():
    ours, theirs = twins(lambda lib: lib.nn.utils.parametrizations.orthogonal(
        lib.nn.Linear(2, 4), orthogonal_map="householder", use_trivialization=False))
    close(ours.weight, theirs.weight, rtol=1e-4)
    ours.weight = aotjax.tensor(np.eye(4, 2, dtype=np.float32))
    close(ours.weight, np.eye(4, 2), rtol=1e-6)
    ours, theirs = twins(lambda lib: lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3),
                                                                             use_trivialization=False))
    forward_and_grads_agree(ours, theirs, 2, 3)
    for lib, m in ((aotjax, ours), (torch, theirs)):
        with pytest.raises(NotImplementedError, match="not possible to assign to the matrix exponential"):
            m.weight = lib.eye(3)
        with pytest.raises(ValueError, match="Expected a matrix or batch of matrices"):
            lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), "bias")


# -- the older weight_norm and spectral_norm -----------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, None])
@pytest.mark.parametrize("layer", ["linear", "conv2d"])
def test_old_weight_norm_matches_torch(layer, dim):
    make, shape = LAYERS[layer]
    ours, theirs = twins(lambda lib: old(lib).weight_norm(make(lib), dim=dim))
    assert type(ours).__name__ == type(theirs).__name__ and isinstance(ours, type(make(aotjax)))
    assert "weight_g" in ours.state_dict() and "weight_v" in ours.state_dict()
    forward_and_grads_agree(ours, theirs, *shape)
    close(ours.weight, theirs.weight)
    OLD.remove_weight_norm(ours)
    torch.nn.utils.remove_weight_norm(theirs)
    assert type(ours) is type(make(aotjax))
    states_agree(ours, theirs)


@pytest.mark.parametrize("layer", LAYERS)
def test_old_spectral_norm_matches_torch(layer):
    make, shape = LAYERS[layer]
    ours, theirs = twins(lambda lib: old(lib).spectral_norm(make(lib)))
    assert list(ours.state_dict())[-3:] == ["weight_orig", "weight_u", "weight_v"]
    for _ in range(2):
        forward_and_grads_agree(ours, theirs, *shape)
        states_agree(ours, theirs)
        close(ours.weight, theirs.weight)
    ours.eval(), theirs.eval()
    forward_and_grads_agree(ours, theirs, *shape)
    states_agree(ours, theirs)
    OLD.remove_spectral_norm(ours)
    torch.nn.utils.remove_spectral_norm(theirs)
    assert type(ours) is type(make(aotjax))
    states_agree(ours, theirs)


def test_old_weight_norm_warns_as_torch_at_the_callers_line():
    message = "in favor of `torch.nn.utils.parametrizations.weight_norm`"
    with pytest.warns(FutureWarning, match=message):
        torch.nn.utils.weight_norm(torch.nn.Linear(2, 2))
    with pytest.warns(FutureWarning, match=message) as record:
        OLD.weight_norm(aotjax.nn.Linear(2, 2))
    assert record[0].filename == __file__


def test_old_errors_match_torch():
    for lib in (aotjax, torch):
        m = old(lib).weight_norm(lib.nn.Linear(2, 2))
        with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks on the same parameter weight"):
            old(lib).weight_norm(m)
        with pytest.raises(ValueError, match="weight_norm of 'bias' not found in"):
            old(lib).remove_weight_norm(m, "bias")
        m = old(lib).spectral_norm(lib.nn.Linear(2, 2))
        with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks on the same parameter weight"):
            old(lib).spectral_norm(m)
        with pytest.raises(ValueError, match="spectral_norm of 'bias' not found in"):
            old(lib).remove_spectral_norm(m, "bias")
    with pytest.raises(AttributeError, match="computed by weight_norm from weight_g and weight_v"):
        OLD.weight_norm(aotjax.nn.Linear(2, 2)).weight = aotjax.ones(2, 2)
    with pytest.raises(ValueError, match="'weight' of ParametrizedLinear is not one of its parameters"):
        OLD.weight_norm(parametrizations.weight_norm(aotjax.nn.Linear(2, 2)))


def test_old_and_new_ways_on_one_module_stack_and_come_off():
    m = OLD.weight_norm(aotjax.nn.Linear(3, 3))
    parametrize.register_parametrization(m, "bias", scaled(aotjax))
    OLD.spectral_norm(m, "weight_v", n_power_iterations=30)  # NOTE: torch's hooks would run in the wrong order
    assert type(m).__name__ == "ParametrizedLinear"
    x = np.ones((1, 3), np.float32)
    m(aotjax.tensor(x))  # NOTE: the call refines the estimates of weight_v's singular vectors
    assert [n for n, _ in m.named_parameters()] == ["weight_g", "weight_v_orig", "parametrizations.bias.original"]
    v = m.weight_v.detach().numpy()
    sigma = np.linalg.svd(m.weight_v_orig.detach().numpy(), compute_uv=False)[0]
    np.testing.assert_allclose(v, m.weight_v_orig.detach().numpy() / sigma, rtol=1e-3)
    weight = m.weight_g.detach().numpy() * v / np.linalg.norm(v, axis=1, keepdims=True)
    close(m(aotjax.tensor(x)), x @ weight.T + 3 * m.parametrizations.bias.original.detach().numpy(), rtol=1e-3)
    with pytest.raises(ValueError, match="'weight_v' of ParametrizedLinear is not one of its parameters"):
        OLD.remove_weight_norm(m)
    parametrize.remove_parametrizations(m, "bias")
    assert type(m).__name__ == "Linear" and type(m) is not aotjax.nn.Linear
    OLD.remove_spectral_norm(m, "weight_v")
    assert [n for n, _ in m.named_parameters()] == ["weight_g", "bias", "weight_v"]
    OLD.remove_weight_norm(m)
    assert type(m) is aotjax.nn.Linear
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight"]
    close(m(aotjax.tensor(x)), x @ weight.T + m.bias.detach().numpy(), rtol=1e-3)


# -- training, eagerly and compiled --------------------------------------------------------------------------------
def _mlp(lib):
    model = lib.nn.Sequential(lib.nn.Linear(3, 5), lib.nn.Tanh(), lib.nn.Linear(5, 2), lib.nn.Tanh(),
                              lib.nn.Linear(2, 2))
    lib.nn.utils.parametrizations.weight_norm(model[0])
    lib.nn.utils.parametrizations.spectral_norm(model[2])
    old(lib).weight_norm(model[4], dim=None)
    return model


def _train(model, lib, compile_step, steps=3):
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    run = compile_step(step)
    rng = np.random.default_rng(2)
    record = []
    for _ in range(steps):
        x, y = (lib.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((4, 3), (4, 2)))
        record.append([run(x, y)] + [t.detach().clone() for t in model.state_dict().values()])
    return record, run


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_sgd_on_parametrized_layers_matches_torch_step_by_step(compiled):
    ours, theirs = twins(_mlp)
    record_o, run = _train(ours, aotjax, aotjax.jit if compiled else (lambda f: f))
    record_t, _ = _train(theirs, torch, lambda f: f)
    for step_o, step_t in zip(record_o, record_t, strict=True):
        for o, t in zip(step_o, step_t, strict=True):
            close(o, t, rtol=2e-5)
    if compiled:
        assert run.trace_count == 1, run.cache_info()


def test_a_parametrized_module_passed_to_a_compiled_function_gives_the_eager_result_and_buffers():
    model = _mlp(aotjax)
    same = copy.deepcopy(model)
    x, _ = inputs(4, 3)
    forward = aotjax.jit(lambda m, x: m(x))
    close(forward(model, x), same(x))
    states_agree(model, same)  # NOTE: the power iteration's writes to _u, _v came back to the caller's module
    model.eval(), same.eval()
    close(forward(model, x), same(x))
