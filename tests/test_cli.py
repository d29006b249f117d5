"""`python -m aotjax demo` and `explain`, end to end in a subprocess."""
import os
import subprocess
import sys
import textwrap

import pytest

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
    assert "grad of to_jax vs grad of jax.numpy: agree" in out


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
    from aotjax.cli.explain import UsageError, parse_arg_types

    assert parse_arg_types("f32[8,16], bf16[ 2 , 3 ],bool[], u8[1]") == [
        ("float32", (8, 16)), ("bfloat16", (2, 3)), ("bool", ()), ("uint8", (1,))]
    assert parse_arg_types("") == []
    with pytest.raises(UsageError, match="cannot parse"):
        parse_arg_types("f32(8)")


def test_main_in_process(model_file, capsys):
    from aotjax.cli import main

    assert main(["explain", f"{model_file}:scale", "--args", "f32[2], f32[]"]) == 0
    assert "mul a b" in capsys.readouterr().out
    assert main(["explain", "--list-stages"]) == 0
    assert "stablehlo" in capsys.readouterr().out
