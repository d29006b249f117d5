"""Loading an export runs no code from its bytes: the format is data only, and truncated, corrupted or hostile
bytes raise a `ValueError` saying what is wrong (never a raw `struct.error`, `IndexError` or a crash in jax),
before anything large is allocated. Round trips of every boundary feature still hold."""
from __future__ import annotations

import base64
import json
import pickle
import struct
import tracemalloc

import jax
import numpy as np
import pytest

import aotjax
from aotjax.transforms import export_format as fmt
from tests.op_records import as_np


class _Gadget:
    """A pickle whose loading creates `path` (what an attacker's `os.system` would do)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _step(x, buf):
    buf.add_(x.sum())
    return {"y": (x * 2).tanh(), "tail": x[1:], "x": x}


@pytest.fixture(scope="module")
def blob() -> bytes:
    return aotjax.export(_step)(aotjax.ones(3), aotjax.zeros(())).serialize()


def _parts(blob: bytes) -> tuple[bytes, dict]:
    return fmt.unpack(blob)


def _with_table(blob: bytes, table) -> bytes:
    program, _ = fmt.unpack(blob)
    text = table if isinstance(table, bytes) else json.dumps(table).encode()
    return fmt.MAGIC + struct.pack("<IQQ", fmt.VERSION, len(program), len(text)) + program + text


def test_pickled_exports_of_the_old_format_are_refused_without_running_them(tmp_path, blob):
    marker = tmp_path / "ran"
    gadget = pickle.dumps(_Gadget(marker))
    program, _ = fmt.unpack(blob)
    old = fmt.MAGIC + struct.pack("<IQ", 1, len(program)) + program + gadget
    for hostile in (old, fmt.PAIR_MAGIC + gadget, fmt.MAGIC + struct.pack("<IQQ", 1, 0, 0) + gadget):
        with pytest.raises(ValueError, match="pickle: loading it could run code"):
            aotjax.deserialize(hostile)
    with pytest.raises(ValueError, match="not valid JSON"):  # a pickle where the table should be
        aotjax.deserialize(_with_table(blob, gadget))
    assert not marker.exists()


@pytest.mark.parametrize("table, match", [
    ({"name": "f", "meta": {"record": ["Exported", {}]}, "in_tree": None, "names": None}, "record named 'Exported'"),
    ({"name": "f", "meta": {"dtype": "object"}, "in_tree": None, "names": None}, "dtype 'object'"),
    ({"name": "f", "meta": {"__reduce__": ["os", "system"]}, "in_tree": None, "names": None}, "tagged '__reduce__'"),
    ({"name": "f", "meta": None, "in_tree": {"tree": ["named", "os:system", ["*"]]}, "names": None},
     "not one of aotjax's named results"),
    ({"name": "f", "meta": None, "in_tree": {"tree": ["named", "aotjax.nn:Module", ["*"]]}, "names": None},
     "not one of aotjax's named results"),
    ({"name": "f", "meta": {"view": ["add", []]}, "in_tree": None, "names": None}, "not one of aotjax's view"),
    ({"name": "f", "meta": {"float": "nan-ish"}, "in_tree": None, "names": None}, "not a float"),
    ({"name": "f"}, "entries are"),
    ([1, 2], "not an object"),
])
def test_tables_naming_anything_outside_the_format_are_refused(blob, table, match):
    with pytest.raises(ValueError, match=match):
        aotjax.deserialize(_with_table(blob, table))


def test_a_deeply_nested_table_is_refused(blob):
    with pytest.raises(ValueError, match="nested too deeply|not valid JSON"):
        aotjax.deserialize(_with_table(blob, b"[" * 200_000 + b"]" * 200_000))
    deep = "*"
    for _ in range(300):
        deep = ["list", [deep]]
    with pytest.raises(ValueError, match="nested too deeply"):
        aotjax.deserialize(_with_table(blob, {"name": "f", "meta": None, "in_tree": {"tree": deep}, "names": None}))


def test_an_array_larger_than_its_data_is_refused_before_allocating(blob):
    _, table = fmt.unpack(blob)
    huge = {"array": ["float32", [1 << 20, 1 << 20], base64.b64encode(b"\0" * 8).decode()]}
    table["meta"]["record"][1]["outputs"][0]["record"][1]["value"] = huge
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"needs 4398046511104 bytes"):
            aotjax.deserialize(_with_table(blob, table))
        assert tracemalloc.get_traced_memory()[1] < 64 << 20
    finally:
        tracemalloc.stop()


def test_lengths_past_the_end_and_every_truncation_raise_value_error(blob):
    with pytest.raises(ValueError, match="truncated or corrupted"):
        aotjax.deserialize(fmt.MAGIC + struct.pack("<IQQ", fmt.VERSION, 1 << 60, 4) + b"abcd")
    with pytest.raises(ValueError, match="bytes follow the end"):
        aotjax.deserialize(blob + b"extra")
    with pytest.raises(ValueError, match="version 7"):
        aotjax.deserialize(fmt.MAGIC + struct.pack("<IQQ", 7, 0, 0))
    cuts = sorted({*range(0, 40), *np.linspace(40, len(blob) - 1, 40).astype(int).tolist()})
    for n in cuts:
        with pytest.raises(ValueError):
            aotjax.deserialize(blob[:n])


def test_corrupted_bytes_load_or_raise_value_error_never_anything_else(blob):
    rng = np.random.default_rng(0)
    program, _ = fmt.unpack(blob)
    table_start = len(fmt.MAGIC) + 20 + len(program)
    positions = [*rng.integers(0, table_start, 25), *rng.integers(table_start, len(blob), 60)]
    for pos in positions:
        bad = bytearray(blob)
        bad[pos] ^= 1 << int(rng.integers(0, 8))
        try:
            aotjax.deserialize(bytes(bad))
        except ValueError:
            pass


def test_a_table_for_another_signature_is_refused(blob):
    other = aotjax.export(lambda a: a * 2)(aotjax.ones(4)).serialize()
    program, _ = fmt.unpack(other)
    _, table = fmt.unpack(blob)
    text = json.dumps(table).encode()
    spliced = fmt.MAGIC + struct.pack("<IQQ", fmt.VERSION, len(program), len(text)) + program + text
    with pytest.raises(ValueError, match="does not match the program"):
        aotjax.deserialize(spliced)


def test_view_steps_that_cannot_apply_to_the_input_are_refused(blob):
    _, table = fmt.unpack(blob)
    outputs = table["meta"]["record"][1]["outputs"]
    tail = next(o for o in outputs if o["record"][1]["chain"]["tuple"])
    tail["record"][1]["chain"] = {"tuple": [{"view": ["view", [["shape", {"tuple": [7, 7]}]]]}]}
    with pytest.raises(ValueError, match="applies view with parameters it cannot take"):
        aotjax.deserialize(_with_table(blob, table))


def test_the_aot_pair_is_checked_too(tmp_path):
    x, w = aotjax.ones(2, 3), aotjax.ones(3, 4)
    pair = aotjax.aot(lambda x, w: (x @ w).tanh().sum()).lower(x, w).export()
    good = pair.serialize()
    assert isinstance(aotjax.deserialize(good), type(pair))
    head = len(fmt.PAIR_MAGIC)
    version, nf, nb, nt = struct.unpack_from("<IQQQ", good, head)
    body = good[head + 28:]
    fwd, bwd, table = body[:nf], body[nf:nf + nb], json.loads(body[nf + nb:])
    table["saved_inputs"] = [99] * len(table["saved_inputs"])
    text = json.dumps(table).encode()
    with pytest.raises(ValueError, match="does not match its forward and backward"):
        aotjax.deserialize(fmt.PAIR_MAGIC + struct.pack("<IQQQ", version, nf, nb, len(text)) + fwd + bwd + text)
    shifted = fmt.PAIR_MAGIC + struct.pack("<IQQQ", version, nf + 1, nb - 1, nt) + body
    with pytest.raises(ValueError, match="bytes follow the end|truncated"):
        aotjax.deserialize(shifted)
    for n in (head + 3, head + 28 + nf // 2, len(good) - 1):
        with pytest.raises(ValueError):
            aotjax.deserialize(good[:n])
    assert repr(pair.forward).startswith("Exported(") and "inputs" in repr(pair.backward)


def test_round_trips_keep_pytrees_named_results_symbolic_shapes_and_views():
    def f(x, buf, opts):
        buf.mul_(opts["scale"])
        x.t_()
        return x.sort(dim=0), {"view": buf[:2], "pair": (x.sum(), None)}

    args = (aotjax.arange(6.0).reshape(2, 3), aotjax.ones(4), {"scale": aotjax.tensor(3.0)})
    exp = aotjax.export(f)(*args)
    again = aotjax.deserialize(exp.serialize())
    x, buf = aotjax.arange(6.0).reshape(2, 3), aotjax.ones(4)
    (vals, idx), rest = again.call(x, buf, {"scale": aotjax.tensor(3.0)})
    assert type((vals, idx)) is tuple and x.shape == (3, 2)  # the transpose in place replayed
    sorted_ = again.call(aotjax.ones(2, 3), aotjax.ones(4), {"scale": aotjax.tensor(1.0)})[0]
    assert type(sorted_).__name__ == "sort" and sorted_.values.shape == (3, 2)
    np.testing.assert_allclose(as_np(buf), [3.0] * 4)
    rest["view"].add_(1)  # a real view of the caller's buf
    np.testing.assert_allclose(as_np(buf), [4.0, 4.0, 3.0, 3.0])
    assert rest["pair"][1] is None

    b, = jax.export.symbolic_shape("b")
    spec = jax.ShapeDtypeStruct((b, 3), np.float32)
    sym = aotjax.export(lambda x, w: (x @ w).relu().sum(-1))(spec, aotjax.ones(3, 2))
    loaded = aotjax.deserialize(sym.serialize())
    assert loaded.symbolic and loaded.call(aotjax.ones(5, 3), aotjax.ones(3, 2)).shape == (5,)


def test_captured_tensors_returned_round_trip_as_values():
    table = aotjax.arange(4.0)
    exp = aotjax.export(lambda x: (x + 1, table, table[1:]))(aotjax.ones(2))
    out = aotjax.deserialize(exp.serialize()).call(aotjax.ones(2))
    np.testing.assert_allclose(as_np(out[1]), [0, 1, 2, 3])
    np.testing.assert_allclose(as_np(out[2]), [1, 2, 3])


def test_structures_the_format_cannot_name_are_refused_at_serialize():
    class Opaque:
        pass

    jax.tree_util.register_pytree_node(Opaque, lambda o: ((), None), lambda aux, ch: Opaque())
    exp = aotjax.export(lambda x, o: x * 2)(aotjax.ones(2), Opaque())
    with pytest.raises(TypeError, match="data-only export format cannot name"):
        exp.serialize()
