"""`aotjax.save` / `aotjax.load` (aotjax/checkpointing.py): structures round-trip as torch.save/torch.load's do,
training resumes exactly, sharded state loads onto other meshes (8 simulated devices, in a subprocess), and what is not
an intact aotjax checkpoint is refused with a clear error."""
from __future__ import annotations

import collections
import io
import json
import os
import sys
import textwrap

import jax
import numpy as np
import pytest
import torch

import aotjax
import aotjax.nn as nn
from tests.helpers import run_on_eight_devices


def _describe(x):
    """A comparable picture of a loaded object: containers by type, tensors by dtype name, shape and values."""
    if isinstance(x, (aotjax.Tensor, torch.Tensor)):
        values = x.detach().float().numpy() if isinstance(x, torch.Tensor) else np.asarray(x).astype(np.float32)
        return ("tensor", str(x.dtype).split(".")[-1], tuple(x.shape), x.requires_grad, values.tolist())
    if isinstance(x, dict):
        return (type(x).__name__, [(k, _describe(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_describe(v) for v in x])
    return (type(x).__name__, repr(x))


def _bundle(lib, tensor):
    """The same object built with torch or aotjax: the containers, keys and scalars torch users save."""
    t = tensor([[1.5, -2.0, 3.0], [4.0, 5.0, 6.0]])
    return {
        "model": collections.OrderedDict(weight=t, bias=tensor([0.5, -0.5]).to(lib.bfloat16)),
        "optim": {"state": {0: {"step": tensor(3.0), "mask": tensor([True, False])}},
                  "param_groups": [{"lr": 0.01, "betas": (0.9, 0.999), "foreach": None, "params": [0, 1]}]},
        "epoch": 7, "name": "run-α", "nan": float("nan"), "big": 2**70, "flag": False,
        "keys": {1: "int key", 2.5: "float key", None: "none key", False: "bool key"},
        "ints": [tensor([1, 2, 3]).to(lib.uint8), tensor([[4]]).to(lib.int32), tensor(9.0).to(lib.float16)],
        "view": t.t(), "empty": tensor([]).reshape(0, 3), "nested": [(), [], {}, ((None,),)],
    }


def _to_buffer(lib, obj, tmp_path):
    buffer = io.BytesIO()
    lib.save(obj, buffer)
    buffer.seek(0)
    return buffer


def _to_file(lib, obj, tmp_path):
    with open(tmp_path / f"{lib.__name__}.bin", "wb") as out:  # NOTE: an open file; loaded back by its path
        lib.save(obj, out)
    return tmp_path / f"{lib.__name__}.bin"


@pytest.mark.parametrize("target", [lambda lib, obj, tmp_path: lib.save(obj, tmp_path / "ckpt") or tmp_path / "ckpt",
                                    _to_buffer, _to_file], ids=["directory", "bytesio", "open-file"])
def test_round_trip_matches_torch(tmp_path, target):
    """One save and load against torch.save/torch.load of the same object: same containers, key types, scalars,
    tensor dtypes/shapes/values; a tensor saved twice loads as one object; Parameters and requires_grad survive.
    To a path (a directory), to a BytesIO, to an open file loaded back by its path."""
    obj = _bundle(aotjax, aotjax.tensor)
    obj["tied"] = (obj["model"]["weight"], obj["model"]["weight"])
    obj["param"] = nn.Parameter(aotjax.ones(2))
    got = aotjax.load(target(aotjax, obj, tmp_path))

    ref = _bundle(torch, torch.tensor)
    ref["tied"] = (ref["model"]["weight"], ref["model"]["weight"])
    ref["param"] = torch.nn.Parameter(torch.ones(2))
    torch.save(ref, tmp_path / "ref.pt")
    want = torch.load(tmp_path / "ref.pt")
    assert _describe(got) == _describe(want)
    assert got["tied"][0] is got["tied"][1] and want["tied"][0] is want["tied"][1]
    assert type(got["param"]) is nn.Parameter and got["param"].requires_grad


def _mlp_step(model, opt, x, y):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss


def _model_and_optimizer(seed):
    aotjax.manual_seed(seed)
    model = nn.Linear(3, 2)
    return model, aotjax.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)


def test_training_resumes_exactly(tmp_path):
    """Train 2 steps, save model + optimizer + epoch, load into a fresh model and optimizer (other initial values):
    2 more steps give exactly the values of 4 uninterrupted steps."""
    x, y = aotjax.randn(4, 3), aotjax.randn(4, 2)
    model, opt = _model_and_optimizer(0)
    for _ in range(2):
        _mlp_step(model, opt, x, y)
    aotjax.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 2}, tmp_path / "ckpt")
    for _ in range(2):
        _mlp_step(model, opt, x, y)

    resumed, resumed_opt = _model_and_optimizer(1)
    checkpoint = aotjax.load(tmp_path / "ckpt")
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt.load_state_dict(checkpoint["optim"])
    assert checkpoint["epoch"] == 2
    for _ in range(2):
        _mlp_step(resumed, resumed_opt, x, y)
    for (name, want), got in zip(model.state_dict().items(), resumed.state_dict().values()):
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)
    want_state, got_state = opt.state_dict()["state"], resumed_opt.state_dict()["state"]
    for i in want_state:
        for key in want_state[i]:
            np.testing.assert_array_equal(got_state[i][key].numpy(), want_state[i][key].numpy(), err_msg=key)


def test_save_replaces_a_checkpoint_or_file_and_keeps_other_directories(tmp_path):
    path = tmp_path / "ckpt"
    aotjax.save({"a": aotjax.ones(2)}, path)
    aotjax.save([aotjax.zeros(3, dtype=aotjax.int32)], str(path))  # onto the old checkpoint: replaced
    got = aotjax.load(path)
    assert isinstance(got, list) and got[0].dtype == aotjax.int32 and got[0].tolist() == [0, 0, 0]
    (tmp_path / "file").write_text("old")
    aotjax.save(aotjax.tensor(2.0), tmp_path / "file")  # onto a file: replaced, as torch overwrites it
    assert float(aotjax.load(tmp_path / "file")) == 2.0
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "data.txt").write_text("keep")
    with pytest.raises(ValueError, match=r"is a directory that is not an aotjax checkpoint.*pick a new path"):
        aotjax.save(aotjax.ones(1), tmp_path / "mine")
    assert (tmp_path / "mine" / "data.txt").read_text() == "keep"
    aotjax.save({"epoch": 3, "losses": [0.5, 0.25]}, path)  # no tensor: no arrays/
    assert aotjax.load(path) == {"epoch": 3, "losses": [0.5, 0.25]} and os.listdir(path) == ["aotjax.json"]
    assert sorted(os.listdir(tmp_path)) == ["ckpt", "file", "mine"]  # no staging directory left behind


@pytest.mark.x32_only
def test_save_refuses_what_it_cannot_write(tmp_path):
    path = tmp_path / "ckpt"
    with pytest.raises(TypeError, match=r"obj is a Linear object.*save its `state_dict\(\)`"):
        aotjax.save(nn.Linear(2, 2), path)
    with pytest.raises(TypeError, match=r"obj\['x'\]\[0\] is a builtins.object.*do not pickle"):
        aotjax.save({"x": [object()]}, path)
    with pytest.raises(TypeError, match=r"obj has a key \(1, 2\) of type tuple"):
        aotjax.save({(1, 2): 0}, path)
    cycle = []
    cycle.append(cycle)
    with pytest.raises(TypeError, match=r"obj\[0\] contains itself"):
        aotjax.save(cycle, path)
    with pytest.raises(TypeError, match=r"f must be a path \(str or os.PathLike\) or a file object, got int"):
        aotjax.save(aotjax.ones(1), 3)
    with pytest.raises(TypeError, match=r"obj is a traced tensor"):
        aotjax.jit(lambda t: aotjax.save(t, path))(aotjax.ones(1))
    assert not path.exists()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A small checkpoint to damage in the tests below: (path, its description)."""
    path = tmp_path_factory.mktemp("saved") / "ckpt"
    aotjax.save({"w": aotjax.ones(2, 2), "b": aotjax.zeros(2)}, path)
    return path, json.loads((path / "aotjax.json").read_text())


def _damaged(tmp_path, checkpoint, edit):
    import shutil

    path = tmp_path / "damaged"
    shutil.copytree(checkpoint[0], path)
    description = json.loads(json.dumps(checkpoint[1]))
    text = edit(path, description)
    (path / "aotjax.json").write_text(text if isinstance(text, str) else json.dumps(description))
    return path


@pytest.mark.x32_only
@pytest.mark.parametrize("edit, message", [
    (lambda path, d: json.dumps(d)[:40], r"damaged: its aotjax.json is not valid JSON"),
    (lambda path, d: d.update(format="other"), r"does not describe an aotjax checkpoint"),
    (lambda path, d: d.pop("tree"), r"has no \"tree\""),
    (lambda path, d: d["tree"]["dict"][0].__setitem__(1, {"tensor": 5}), r"refers to array 5, but there are 2"),
    (lambda path, d: d["tree"]["dict"][1].__setitem__(1, {"eval": "import os"}), r"\['b'\] is \{\"eval\""),
    (lambda path, d: d["arrays"][0].update(dtype="int8"), r"described as int8\[2, 2\] but stored as float32"),
    (lambda path, d: d["arrays"][0].update(dtype="object"), r"array 0 \('w'\) has an unknown dtype 'object'"),
    (lambda path, d: "[" * 100000 + "]" * 100000, r"its aotjax.json is not valid JSON"),
    (lambda path, d: d["arrays"].append(dict(d["arrays"][0], name="x")), r"refers to arrays \['2'\] that arrays/"),
    (lambda path, d: __import__("shutil").rmtree(path / "arrays"), r"there is no arrays/ directory"),
], ids=["truncated", "format", "no-tree", "index", "unknown-node", "dtype", "object-dtype", "deep", "missing-array",
        "no-arrays"])
def test_load_refuses_a_damaged_checkpoint(tmp_path, checkpoint, edit, message):
    path = _damaged(tmp_path, checkpoint, edit)
    with pytest.raises(ValueError, match=f"load: '{path}' .*{message}"):
        aotjax.load(path)


@pytest.mark.x32_only
def test_load_refuses_what_is_not_a_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        aotjax.load(tmp_path / "absent")
    (tmp_path / "dir").mkdir()
    with pytest.raises(ValueError, match=r"is not an aotjax checkpoint: the directory has no aotjax.json"):
        aotjax.load(tmp_path / "dir")
    torch.save({"w": torch.ones(2)}, tmp_path / "model.pt")
    with pytest.raises(ValueError, match=r"model.pt' is a PyTorch file .* does not unpickle, because unpickling runs "
                                         r"code.*torch.load\(path, weights_only=True\)"):
        aotjax.load(tmp_path / "model.pt", weights_only=False)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match=r"notes.txt' is a file, not an aotjax checkpoint"):
        aotjax.load(tmp_path / "notes.txt")


def _archive(edit) -> io.BytesIO:
    """A checkpoint saved to a file object, its zip members `{name: bytes}` changed by `edit`."""
    import zipfile

    saved = io.BytesIO()
    aotjax.save({"w": aotjax.ones(2, 2), "b": aotjax.zeros(2)}, saved)
    with zipfile.ZipFile(io.BytesIO(saved.getvalue())) as z:
        members = {n: z.read(n) for n in z.namelist()}
    edit(members)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    out.seek(0)
    return out


def _set_description(members, edit):
    d = json.loads(members["aotjax.json"])
    edit(d)
    members["aotjax.json"] = json.dumps(d).encode()


@pytest.mark.x32_only
@pytest.mark.parametrize("make, message", [
    (lambda: io.BytesIO(b"not a zip"), r"'the BytesIO' is not an aotjax checkpoint \(File is not a zip file\)"),
    (lambda: io.BytesIO(_archive(lambda m: None).getvalue()[:-30]), r"is not an aotjax checkpoint"),
    (lambda: _archive(lambda m: m.pop("aotjax.json")), r"a zip archive without aotjax.json"),
    (lambda: _archive(lambda m: m.update({"arrays/0": m["arrays/0"][:-4]})),
     r"array 0 \('w'\) is described as float32\[2, 2\] \(16 bytes\) but the archive has 12 bytes"),
    (lambda: _archive(lambda m: m.pop("arrays/1")), r"array 1 \('b'\) .* but the archive has no data"),
    (lambda: _archive(lambda m: _set_description(m, lambda d: d["arrays"][0].update(shape=[4, 4]))),
     r"float32\[4, 4\] \(64 bytes\) but the archive has 16 bytes"),
    (lambda: _archive(lambda m: _set_description(m, lambda d: d["tree"]["dict"][1].__setitem__(1, {"eval": "1"}))),
     r"\['b'\] is \{\"eval\""),
    (lambda: _archive(lambda m: _set_description(m, lambda d: d["arrays"][0].update(dtype="object"))),
     r"unknown dtype 'object'"),
], ids=["not-zip", "truncated", "no-description", "short-array", "missing-array", "shape", "unknown-node", "dtype"])
def test_load_refuses_a_damaged_archive(make, message):
    with pytest.raises(ValueError, match=f"load: .*{message}"):
        aotjax.load(make())


@pytest.mark.x32_only
def test_load_of_a_torch_file_object_says_how_to_convert():
    saved = io.BytesIO()
    torch.save({"w": torch.ones(2)}, saved)
    saved.seek(0)
    with pytest.raises(ValueError, match=r"is a PyTorch file .* does not unpickle"):
        aotjax.load(saved)


@pytest.mark.x32_only
def test_map_location_on_one_device(tmp_path, checkpoint):
    path = checkpoint[0]
    cpu = jax.devices("cpu")[0]
    for where in ("cpu", cpu, jax.sharding.SingleDeviceSharding(cpu), lambda name, shape, dtype: None):
        got = aotjax.load(path, map_location=where)
        assert got["w"].device == cpu and got["w"].tolist() == [[1.0, 1.0], [1.0, 1.0]]
    seen = []
    aotjax.load(path, map_location=lambda name, shape, dtype: seen.append((name, shape, dtype)))
    assert seen == [("w", (2, 2), np.dtype(np.float32)), ("b", (2,), np.dtype(np.float32))]
    with pytest.raises(TypeError, match=r"got a dict.*pass a device or a callable"):
        aotjax.load(path, map_location={"cuda:0": "cpu"})
    with pytest.raises(TypeError, match=r"map_location returned int for tensor 'w'"):
        aotjax.load(path, map_location=lambda name, shape, dtype: 3)
    with pytest.raises(ValueError, match=r"load: unknown device 'tpu:7'"):
        aotjax.load(path, map_location="tpu:7")


@pytest.mark.x32_only
def test_without_orbax_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "orbax.checkpoint", None)
    with pytest.raises(ImportError, match=r'pip install "aotjax\[checkpoint\]"'):
        aotjax.save(aotjax.ones(1), tmp_path / "ckpt")


SHARDED = textwrap.dedent("""
    import sys, tempfile, os
    import numpy as np, jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import aotjax, aotjax.nn as nn
    assert "orbax" not in sys.modules, "import aotjax must not import orbax"

    devices = np.array(jax.devices())
    rows = NamedSharding(Mesh(devices, ("data",)), P("data"))
    grid = Mesh(devices.reshape(2, 4), ("x", "y"))
    four = Mesh(devices[:4], ("data",))
    aotjax.manual_seed(0)
    model = nn.Linear(4, 8)
    for p in model.parameters():                      # parameters sharded over all 8 devices
        p.data = aotjax.device_put(p.data, rows)
    opt = aotjax.optim.Adam(model.parameters(), lr=0.1)
    model(aotjax.randn(2, 4)).sum().backward()
    opt.step()
    want = {"model": {k: v.numpy() for k, v in model.state_dict().items()},
            "exp_avg": opt.state_dict()["state"][0]["exp_avg"].numpy()}
    path = os.path.join(tempfile.mkdtemp(), "ckpt")
    aotjax.save({"model": model.state_dict(), "optim": opt.state_dict()}, path)

    def check(got, shardings):
        for k, v in got["model"].items():
            np.testing.assert_array_equal(v.numpy(), want["model"][k])
            assert v.sharding == shardings(f"model.{k}", v.shape), (k, v.sharding)
        np.testing.assert_array_equal(got["optim"]["state"][0]["exp_avg"].numpy(), want["exp_avg"])

    # None: as saved (the same mesh is here)
    got = aotjax.load(path)
    check(got, lambda name, shape: rows)
    assert got["optim"]["state"][0]["step"].sharding == opt.state_dict()["state"][0]["step"].sharding
    # a (2, 4) mesh and 4 devices, per tensor; None for 0-d tensors (step, lr): as saved
    spec = lambda shape: P("x", "y") if len(shape) == 2 else P("y")
    on_grid = lambda name, shape, dtype: NamedSharding(grid, spec(shape)) if shape else None
    check(aotjax.load(path, map_location=on_grid), lambda name, shape: on_grid(name, shape, None))
    on_four = lambda name, shape, dtype: NamedSharding(four, P("data")) if shape else NamedSharding(four, P())
    check(aotjax.load(path, map_location=on_four), lambda name, shape: on_four(name, shape, None))
    # one sharding for every tensor: replicated over the (2, 4) mesh
    replicated = NamedSharding(grid, P())
    check(aotjax.load(path, map_location=replicated), lambda name, shape: replicated)
    try:
        aotjax.load(path, map_location=NamedSharding(four, P("data")))
        raise AssertionError("a sharding that does not fit a 0-d tensor was taken")
    except ValueError as e:
        assert "cannot lay out" in str(e) and "pass a callable map_location" in str(e), e

    # into a model placed otherwise (a (2, 4) mesh): read each tensor straight into its target's sharding
    fresh = nn.Linear(4, 8)
    for p in fresh.parameters():
        p.data = aotjax.device_put(p.data, NamedSharding(grid, P("x")))
    targets = {f"model.{k}": v.sharding for k, v in fresh.state_dict().items()}
    fresh.load_state_dict(aotjax.load(path, map_location=lambda name, shape, dtype: targets.get(name))["model"])
    for k, v in fresh.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), want["model"][k])
        assert v.sharding == NamedSharding(grid, P("x")), (k, v.sharding)

    # x64 and x32: 64-bit tensors load as 32-bit outside x64 mode (as every aotjax tensor), 32-bit ones stay so
    with jax.enable_x64(True):
        aotjax.save({"f": aotjax.tensor([1.5], dtype=aotjax.float64), "i": aotjax.tensor([7], dtype=aotjax.int64),
                     "g": aotjax.tensor([2.5])}, path)
        wide = aotjax.load(path)
        assert (wide["f"].dtype, wide["i"].dtype, wide["g"].dtype) == (aotjax.float64, aotjax.int64, aotjax.float32)
    narrow = aotjax.load(path)
    assert (narrow["f"].dtype, narrow["i"].dtype, narrow["g"].dtype) == (aotjax.float32, aotjax.int32, aotjax.float32)
    assert (narrow["f"].tolist(), narrow["i"].tolist()) == ([1.5], [7])
    print("ok")
""")


@pytest.mark.slow
@pytest.mark.x32_only
def test_sharded_state_loads_onto_other_meshes():
    """State sharded over 8 devices loads as saved, onto a (2, 4) mesh, onto 4 devices, replicated; each process
    writes and reads only its shards (orbax); `load_state_dict` keeps the target's placement."""
    run_on_eight_devices(SHARDED)


KEEPS_PLACEMENT = textwrap.dedent("""
    import tempfile, os
    import numpy as np, jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import aotjax, aotjax.nn as nn

    devices = np.array(jax.devices())
    rows = NamedSharding(Mesh(devices, ("data",)), P("data"))
    grid = NamedSharding(Mesh(devices.reshape(2, 4), ("x", "y")), P("x"))
    path = os.path.join(tempfile.mkdtemp(), "ckpt")
    aotjax.save({k: aotjax.device_put(v, rows) for k, v in nn.Linear(4, 8).state_dict().items()}, path)
    fresh = nn.Linear(4, 8)
    for p in fresh.parameters():
        p.data = aotjax.device_put(p.data, grid)
    fresh.load_state_dict(aotjax.load(path))                 # the loaded tensors are sharded as saved (rows)
    assert all(v.sharding == grid for v in fresh.state_dict().values()), [v.sharding for v in fresh.parameters()]
    print("ok")
""")


@pytest.mark.slow
@pytest.mark.x32_only
def test_load_state_dict_of_a_sharded_save_keeps_the_targets_placement():
    run_on_eight_devices(KEEPS_PLACEMENT)
