"""Smoke tests of the benchmark scripts: each runs at its smallest settings, exits 0 and prints a ratio."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPTS = [
    ("grad_step.py", ["--quick", "--number", "2", "--repeat", "2"]),
    ("boundary_overhead.py", ["--number", "10", "--repeat", "1"]),
    ("eager_overhead.py", ["--number", "10", "--repeat", "1", "--size", "4"]),
    ("scan_layers.py", ["--quick", "--number", "2", "--repeat", "2"]),
    ("vmap.py", ["--quick", "--number", "2", "--repeat", "2"]),
    ("train_step.py", ["--quick", "--number", "2", "--repeat", "2"]),
    ("sort_ops.py", ["--quick", "--number", "2", "--repeat", "2"]),
    ("ops.py", ["--quick", "--number", "2", "--repeat", "2"]),
    ("table.py", ["--quick", "--skip", "transformer"]),
    ("imperative_step.py", ["--quick", "--number", "2", "--repeat", "2"]),
    ("optimizer_step.py", ["--quick", "--number", "2", "--repeat", "1"]),
    ("lstm_step.py", ["--quick", "--number", "1", "--repeat", "1", "--no-torch-compile"]),
    ("devices.py", ["--quick", "--number", "2", "--repeat", "2", "--devices", "2"]),
    ("vs_torch.py", ["--quick", "--number", "2", "--repeat", "1", "--no-torch-compile"]),
    ("gpu_train.py", ["--quick"]),
]


@pytest.mark.slow
@pytest.mark.parametrize("script,args", SCRIPTS, ids=[s for s, _ in SCRIPTS])
def test_benchmark_script_runs(script, args):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{script} exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert "ratio" in proc.stdout, f"{script} printed no ratio:\n{proc.stdout}"


@pytest.mark.slow
def test_aot_step_runs():
    script = ROOT / "benchmarks" / "aot_step.py"
    proc = subprocess.run([sys.executable, str(script), "--quick", "--number", "2", "--repeat", "2"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"aot_step.py exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert "ratio" in proc.stdout, f"aot_step.py printed no ratio:\n{proc.stdout}"
    assert "max abs diff" in proc.stdout


def test_op_coverage_without_torch_says_to_install_the_test_extra():
    # torch blocked (a None entry in sys.modules makes `import torch` fail), as outside the test extra
    script = str(ROOT / "benchmarks" / "op_coverage.py")
    code = f"import runpy, sys; sys.modules['torch'] = None; sys.argv = [{script!r}]; " \
           f"runpy.run_path({script!r}, run_name='__main__')"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert '".[test]"' in proc.stderr and "Traceback" not in proc.stderr
