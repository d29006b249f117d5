"""`python -m aotjax demo` and `explain`, end to end in a subprocess."""
import contextlib
import functools
import io
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("AOTJAX_DUMP", None)
    return subprocess.run([sys.executable, "-m", "aotjax", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


@pytest.mark.slow
def test_demo_runs_and_checks():
    proc = _run("demo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "relu_" in out and "zero_" in out and "mul_" in out  # the jaxpr as written
    assert "# mlp_demo.py:" in out  # source lines of the model
    assert "compiled vs eager: agree" in out and "eager mlp vs NumPy: agree" in out
    assert "OK: the eager, compiled and differentiated results agree." in out
    assert "aotjax grad vs jax.grad of jax.numpy: agree" in out
    assert "in-place step vs NumPy: agree" in out and "donated to the program" in out
    assert "select_scatter" in out  # the functionalized program: writes through views became scatters
    assert "gt at mlp_demo.py:5 (mlp)" in out  # relu saves a boolean mask for the backward
    aot_section = out.split("6. AOTAutograd")[1].split("7. checks")[0]  # grad(aot(loss)): both programs
    assert "forward:" in aot_section and "backward:" in aot_section
    assert "inputs:  primal[x], primal[w1], primal[w2]" in aot_section
    assert "residual[3] gt at mlp_demo.py:5 (mlp)" in aot_section and "cotangent[out]" in aot_section
    assert "outputs: cotangent[x], cotangent[w1], cotangent[w2]" in aot_section
    assert "grad(aot(loss)) vs jax.grad of jax.numpy: agree" in out


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "tiny_model.py"
    path.write_text(textwrap.dedent("""\
        def step(x, w):
            y = x @ w
            return y.sin() * 2

        def scale(x, n):
            return x * n
        """))
    return path


@pytest.mark.slow
def test_explain_prints_the_jaxpr_with_source_lines(model_file):
    proc = _run("explain", f"{model_file}:step", "--args", "f32[8,16], f32[16,4]")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "step(f32[8,16], f32[16,4])" in out
    assert "{ lambda ; a:f32[8,16] b:f32[16,4]. let" in out
    assert "sin" in out and "# tiny_model.py:3 (step)" in out


@pytest.mark.slow
def test_explain_stablehlo_stage_and_scalar_args(model_file):
    proc = _run("explain", f"{model_file}:scale", "--args", "i32[3], i32[]", "--stage", "jaxpr",
                "--stage", "stablehlo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scale(i32[3], i32[])" in proc.stdout
    assert "func.func public @main" in proc.stdout


@pytest.mark.slow
def test_explain_usage_errors(model_file):
    proc = _run("explain", f"{model_file}:nope", "--args", "f32[2]")
    assert proc.returncode == 2 and "has no function 'nope'" in proc.stderr
    proc = _run("explain", f"{model_file}:step", "--args", "f128[2]")
    assert proc.returncode == 2 and "unknown dtype 'f128'" in proc.stderr
    proc = _run("explain", "missing.py:f")
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_parse_arg_types():
    from aotjax.cli.explain import ArgSpec, UsageError, parse_arg_types

    assert parse_arg_types("f32[8,16], bf16[ 2 , 3 ],bool[], u8[1]") == [
        ArgSpec("float32", (8, 16)), ArgSpec("bfloat16", (2, 3)), ArgSpec("bool", ()), ArgSpec("uint8", (1,))]
    assert parse_arg_types("") == []
    with pytest.raises(UsageError, match="cannot parse"):
        parse_arg_types("f32(8)")


def test_parse_pytree_arg_types():
    from aotjax.cli.explain import ArgSpec, parse_arg_types

    f32 = functools.partial(ArgSpec, "float32")
    assert parse_arg_types("{'w': f32[3,2], 'b': f32[2]}, f32[4,3]") == [{"w": f32((3, 2)), "b": f32((2,))},
                                                                         f32((4, 3))]
    assert parse_arg_types("[(f32[2], i32[]), {'inner': {'x': f32[]}}], (), 3, -1.5, True, None, 'mode',") == [
        [(f32((2,)), ArgSpec("int32", ())), {"inner": {"x": f32(())}}], (), 3, -1.5, True, None, "mode"]


BAD_ARGS = [  # (--args, the message: which argument, and where inside it)
    ("f32[2], f32(8)", r"cannot parse argument 1 \('f32\(8\)'\): expected an array type"),
    ("f32[8], {'w': f128[2]}", r"argument 1\['w'\]: unknown dtype 'f128'"),
    ("{'a': [f32[1], x + y]}", r"cannot parse argument 0\['a'\]\[1\] \('x \+ y'\)"),
    ("f32[2], {'w': f32[-1]}", r"argument 1\['w'\]: the shape in 'f32\[-1\]' must be non-negative ints"),
    ("f32[2], (f32[2.5],)", r"argument 1\[0\]: the shape in 'f32\[2.5\]' must be non-negative ints"),
    ("f32[2], {w: f32[2]}", r"argument 1: a dict key must be a string or an int, got 'w'"),
    ("f32[2], f32[3], {'a': f32[2]", r"argument 2 is not well formed"),
    ("f32[2],, f32[1]", r"argument 1 is not well formed"),
    ("__import__('os').system('true')", r"cannot parse argument 0"),  # never evaluated
]


@pytest.mark.parametrize("text,message", BAD_ARGS, ids=[b[0] for b in BAD_ARGS])
def test_a_bad_arg_spec_names_its_argument(text, message):
    from aotjax.cli.explain import UsageError, parse_arg_types

    with pytest.raises(UsageError, match=message):
        parse_arg_types(text)


def test_explain_a_function_of_pytrees(tmp_path, capsys):
    from aotjax.cli import main

    model = tmp_path / "tree_model.py"
    model.write_text("def loss(params, x, layers):\n"
                     "    h = x @ params['w'] + params['b']\n"
                     "    for w in layers:\n"
                     "        h = h @ w\n"
                     "    return h.relu().sum()\n")
    assert main(["explain", f"{model}:loss", "--args", "{'w': f32[3,2], 'b': f32[2]}, f32[4,3], [f32[2,2], f32[2,2]]",
                 "--grad"]) == 0
    out = capsys.readouterr().out
    assert "loss({b: f32[2], w: f32[3,2]}, f32[4,3], [f32[2,2], f32[2,2]])" in out
    assert "{ lambda ; a:f32[2] b:f32[3,2] c:f32[4,3] d:f32[2,2] e:f32[2,2]. let" in out
    assert "[0] params['b']: f32[2]" in out and "[3] layers[0]: f32[2,2]" in out
    assert "cotangent[params['w']]" in out
    assert main(["explain", f"{model}:loss", "--args", "f32[3,2], f32[4,3]"]) == 2
    assert "takes 3 positional argument(s) (params, x, layers), but --args describes 2" in capsys.readouterr().err


def test_main_in_process(model_file, capsys):
    from aotjax.cli import main

    assert main(["explain", f"{model_file}:scale", "--args", "f32[2], f32[]"]) == 0
    assert "mul a b" in capsys.readouterr().out
    assert main(["explain", "--list-stages"]) == 0
    assert "stablehlo" in capsys.readouterr().out


def test_explain_grad_shows_forward_backward_and_residuals(tmp_path):
    """In-process (a subprocess would pay the import again): the CLI's main on a model file."""
    from aotjax.cli import main

    model = tmp_path / "grad_model.py"
    model.write_text("def loss(x, w):\n    h = (x @ w).relu()\n    h[:, 0].mul_(2)\n    return h.sum()\n")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["explain", f"{model}:loss", "--args", "f32[4,3], f32[3,2]", "--grad"]) == 0
    out = buf.getvalue()
    assert "the functionalized program" in out and "select_scatter" in out
    assert "the forward program" in out and "the backward program" in out
    assert "cotangent[x]" in out and "cotangent[w]" in out and "residual[2] gt" in out
    assert "bool[4,2]  8 bytes  gt at grad_model.py:2 (loss)" in out


def test_explain_aot_shows_joint_forward_backward_and_residuals(tmp_path):
    """In-process: `--aot` prints the stages of `aot(fn).lower(*args)`, each program with its descriptors."""
    from aotjax.cli import main

    model = tmp_path / "aot_model.py"
    model.write_text("def loss(x, w, n):\n    h = (x @ w).relu()\n    h[:, 0].mul_(2)\n    n.add_(1)\n"
                     "    return h.sum()\n")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["explain", f"{model}:loss", "--args", "f32[4,3], f32[3,2], i32[]", "--aot"]) == 0
    out = buf.getvalue()
    assert "the functionalized program" in out  # the default stages come first
    joint, forward, backward, residuals = (out.split(f"--- {title}")[1].split("\n---")[0] for title in (
        "aot's joint program", "aot's forward program", "aot's backward program", "what aot's forward saves"))
    assert "in   3  f32[]          cotangent[out]" in joint  # no cotangent for the integer n
    assert "out  1  i32[]          updated[n]" in joint and "out  3  f32[3,2]       cotangent[w]" in joint
    assert "in   2  i32[]          primal[n]" in forward and "out  1  i32[]          updated[n]" in forward
    assert "out  2  bool[4,2]      residual[2] gt at aot_model.py:2 (loss)" in forward  # x, w: not copied out
    assert "in   2  bool[4,2]      residual[2] gt at aot_model.py:2 (loss)" in backward
    assert "out  0  f32[4,3]       cotangent[x]" in backward and "matmul" in backward
    assert "bool[4,2]  8 bytes  gt at aot_model.py:2 (loss)" in residuals and "total: 80 bytes" in residuals


def test_where_says_where_a_name_is_defined(capsys):
    from aotjax.cli import main

    assert main(["where", "Tensor.add_", "torch.nn.functional.softmax", "Tensor.real", "nn.Linear"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Tensor.add_: aotjax/ops/math/elementwise.py:")
    assert out[1].startswith("torch.nn.functional.softmax: aotjax/ops/nn/activations.py:")
    assert "property getter" in out[2] and "property setter" in out[3] and "aotjax/ops/math/complex.py" in out[3]
    assert out[4].startswith("nn.Linear: aotjax/nn/modules/linear.py:") and "(class in" in out[4]
    assert main(["where", "Tensor.no_such_method", "float32"]) == 1
    err = capsys.readouterr().err
    assert "aotjax.Tensor.no_such_method does not exist" in err and "float32 is a" in err


def test_where_finds_every_tensor_method_in_its_family():
    """`where Tensor.X` answers for every public method and property: a line in a module of the package that binds
    or defines it (an op made by a factory, `exp_p, exp__p, exp, exp_ = _unary(...)`, is found where it is bound)."""
    import aotjax
    from aotjax.cli.where import ROOT, locate

    names = [n for n in dir(aotjax.Tensor) if not n.startswith("_")]
    assert len(names) > 400
    for name in names:
        for loc in locate(f"Tensor.{name}"):
            lines = (ROOT / loc.file).read_text().splitlines()
            assert loc.file.startswith("aotjax/") and 1 <= loc.line <= len(lines), (name, loc)
    loc, = locate("Tensor.exp")
    assert "_unary(\"exp\"" in (ROOT / loc.file).read_text().splitlines()[loc.line - 1]
