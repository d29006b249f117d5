"""The README's tour runs as written (its Python code blocks, in order, in one namespace)."""
import contextlib
import io
import os
import re

import pytest

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_tour_runs():
    text = open(os.path.join(ROOT, "README.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README has a Python tour"
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "README.md", "exec"), namespace)
    printed = out.getvalue()
    assert "tensor([[10.,  2.]" in printed and "select_scatter" in printed and "a is written" in printed
    assert "(3, 2) 0.2" in printed and "cotangent[w]" in printed
    assert "1 True 20" in printed  # the training step: compiled once, its loss falls, BatchNorm counted each step
