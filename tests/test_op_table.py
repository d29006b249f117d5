"""The README's op table is what the package exposes (aotjax/cli/optable.py generates it), every name in it
resolves, and the ops left out on purpose fail with errors that say why."""
import argparse
import inspect

import pytest

import aotjax
from aotjax.cli import optable
from aotjax.core.errors import UnsupportedError
from aotjax.ops.unsupported import UNSUPPORTED, UnsupportedOpError

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass


@pytest.fixture(scope="module")
def rows():
    return optable.rows()


def test_readme_table_is_generated():
    text = optable.README.read_text()
    assert optable.START in text and optable.END in text, "README.md lost its optable markers"
    block = text[text.index(optable.START):text.index(optable.END) + len(optable.END)]
    assert block == optable.render(), "README.md's op table is out of date: run `python -m aotjax ops --write`"


def _resolves(namespace, name):
    if namespace == "aotjax.Tensor":
        static = inspect.getattr_static(aotjax.Tensor, name, None)
        return callable(static) or hasattr(static, "__get__") and hasattr(aotjax.ones(2, 2), name)
    return callable(getattr(optable.resolve(namespace), name, None))


def test_every_name_in_the_table_resolves(rows):
    assert len(rows) > 20 and sum(len(r.tokens) for r in rows) > 400
    for row in rows:
        assert row.tokens, f"row {row.title!r} lists no op"
        for token in row.tokens:
            names = optable.expand(token)
            for name in names:
                # `add(_)`: the in-place form is the namespace's (`F.elu_`) or a Tensor method (`Tensor.add_`).
                ok = _resolves(row.namespace, name) or (name.endswith("_") and len(names) > 1
                                                        and _resolves("aotjax.Tensor", name))
                assert ok, f"{row.title}: {token!r} names {row.namespace}.{name}, which does not exist"


def test_table_names_the_families_and_namespaces(rows):
    table = {r.title: set(n for t in r.tokens for n in optable.expand(t)) for r in rows}
    assert {"add", "add_", "mul_"} <= table["elementwise"]
    assert {"conv1d", "conv2d", "conv3d", "conv_transpose2d"} <= table["convolution (`F.`)"]
    assert {"solve", "svd", "eigh"} <= table["`aotjax.linalg`"] and "QR" not in table["`aotjax.linalg`"]
    assert {"Linear", "Conv2d", "BatchNorm1d"} <= table["`aotjax.nn`"] and {"SGD", "adam"} <= table["`aotjax.optim`"]
    tensor_only = table["Tensor methods and properties"]
    assert {"uniform_", "new_zeros", "item", "T"} <= tensor_only and not tensor_only & table["elementwise"]
    assert not [r.title for r in rows if "(more)" in r.title], "a row named for when its ops arrived, not what they are"
    listed = set().union(*table.values())
    for u in UNSUPPORTED:
        assert not listed & set(u.functions + u.methods), f"{u.topic}: an unsupported op is in the table"


def test_a_family_without_a_row_still_appears(monkeypatch):
    monkeypatch.delitem(optable.FAMILIES, "creation.factories")
    row = next(r for r in optable.rows() if r.title == "creation.factories")
    assert "logspace" in row.tokens and row.namespace == "aotjax"


def test_tokens_fold_inplace_forms_and_dimension_variants():
    tokens = optable._tokens(["add", "add_", "pool1d", "pool2d", "pool3d", "copy_", "sum"], lambda n: n == "add")
    assert tokens == ("add(_)", "pool1d/2d/3d", "copy_", "sum")
    assert [n for t in tokens for n in optable.expand(t)] == ["add", "add_", "pool1d", "pool2d", "pool3d", "copy_",
                                                              "sum"]


def test_check_and_write(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{optable.START}\nstale\n{optable.END}\nrest\n")
    args = lambda **kw: argparse.Namespace(**{"write": False, "check": False, "readme": readme, **kw})
    assert optable.run(args(check=True)) == 1 and "out of date" in capsys.readouterr().err
    assert optable.run(args(write=True)) == 0
    assert optable.run(args(check=True)) == 0
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("\nrest\n") and "| elementwise |" in text
    readme.write_text("no markers")
    with pytest.raises(ValueError, match="optable:start"):
        optable.run(args(write=True))


def test_unsupported_ops_raise_clear_errors():
    x = aotjax.ones(4)
    for u in UNSUPPORTED:
        for owner, name in [(aotjax, n) for n in u.functions] + [(x, n) for n in u.methods]:
            where = "aotjax" if owner is aotjax else "Tensor"
            with pytest.raises(UnsupportedError) as info:
                attr = getattr(owner, name)  # listed names are missing; an existing one (as_strided) raises on call
                attr((2,), (2,)) if owner is aotjax else attr()
            message = str(info.value)
            assert name in message and "instead" in message.lower(), message
            if not callable(inspect.getattr_static(owner if owner is aotjax else aotjax.Tensor, name, None)):
                assert isinstance(info.value, UnsupportedOpError) and message.startswith(f"{where}.{name} is not")
                assert not hasattr(owner, name) and getattr(owner, name, "default") == "default"


def test_other_missing_names_stay_plain_attribute_errors():
    with pytest.raises(AttributeError, match="module 'aotjax' has no attribute 'no_such_op'") as info:
        _ = aotjax.no_such_op
    assert not isinstance(info.value, UnsupportedError)
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'no_such_method'") as info:
        _ = aotjax.ones(1).no_such_method
    assert not isinstance(info.value, UnsupportedError)
    assert not hasattr(aotjax.ones(1), "__array_priority__x")


# One eager call per op of `optable.EAGER_ONLY`; each traces to an UnsupportedError.
EAGER_CALLS = {
    "masked_select": lambda x: x.masked_select(x > 0),
    "nonzero": lambda x: x.nonzero(),
    "argwhere": lambda x: x.argwhere(),
    "unique": lambda x: x.unique(),
    "unique_consecutive": lambda x: x.unique_consecutive(),
    "boolean-mask indexing": lambda x: x[x > 0],
}


def test_eager_only_ops_run_eagerly_and_refuse_tracing():
    listed = {n for title, names, _ in optable.EAGER_ONLY for n in (names or (title,))}
    assert listed == set(EAGER_CALLS)
    x = aotjax.tensor([1.0, 0.0, 1.0])
    for name, call in EAGER_CALLS.items():
        assert call(x).numel() >= 1, name
        with pytest.raises(UnsupportedError, match="cannot be traced"):
            aotjax.make_jaxpr(call)(x)
    assert aotjax.make_jaxpr(lambda x: aotjax.nonzero(x, size=3, fill_value=0))(x) is not None


def test_cli_prints_the_block(capsys):
    from aotjax.cli import main
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(optable.START) and out.rstrip().endswith(optable.END)


def test_op_coverage_script_maps_op_db_names():
    import importlib.util
    script = optable.README.parent / "benchmarks" / "op_coverage.py"
    spec = importlib.util.spec_from_file_location("op_coverage", script)
    coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coverage)  # torch is imported only when op_db is read
    have = ["add", "T", "nn.functional.conv2d", "linalg.svd", "special.ndtr", "uniform", "trapezoid"]
    missing = ["as_strided", "to_sparse", "sparse.sampled_addmm", "nn.functional.no_such_op", "no_such_op"]
    assert [coverage.implemented(n) for n in have + missing] == [True] * len(have) + [False] * len(missing)
