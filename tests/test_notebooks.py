"""The notebooks under `notebooks/` execute top to bottom without an error, in a kernel on this interpreter
and in the suite's mode (jax's default 32-bit mode, or x64 with AOTJAX_TEST_X64=1), and a notebook that plots
shows its figures inline."""
import glob
import os
import sys

import pytest

from tests.helpers import X64

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
ipykernel_spec = pytest.importorskip("ipykernel.kernelspec")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))


@pytest.fixture
def kernel_on_this_interpreter(tmp_path, monkeypatch):
    """A `python3` kernel spec that runs `sys.executable` and imports this checkout's aotjax."""
    # NOTE: a `python3` spec found elsewhere (a user-level install, another environment) could start
    # another interpreter; JUPYTER_PATH is searched first, so this one wins.
    ipykernel_spec.write_kernel_spec(tmp_path / "kernels" / "python3")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("AOTJAX_DUMP", raising=False)
    # NOTE: ipykernel picks matplotlib's inline backend only when MPLBACKEND is unset (a CI machine may set Agg).
    monkeypatch.delenv("MPLBACKEND", raising=False)
    monkeypatch.setenv("JAX_ENABLE_X64", "1" if X64 else "0")  # the kernel runs in the suite's mode


# NOTE: the sweeps a notebook times, shortened here (CI's time): each text must still be in its notebook, so a
# rewritten sweep fails this test instead of silently running in full.
SHORTER_SWEEPS = {"scan_over_layers.ipynb": [("depths = [1, 2, 4, 8, 12]", "depths = [1, 2]"),
                                             ("for _ in range(20)", "for _ in range(2)")]}


def shorten_sweeps(nb, name):
    for old, new in SHORTER_SWEEPS.get(name, []):
        cells = [c for c in nb.cells if c.cell_type == "code" and old in c.source]
        assert cells, f"{name} no longer contains {old!r}: update SHORTER_SWEEPS"
        for c in cells:
            c.source = c.source.replace(old, new)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_executes(path, kernel_on_this_interpreter):
    nb = nbformat.read(path, as_version=4)
    shorten_sweeps(nb, os.path.basename(path))
    nb.cells.append(nbformat.v4.new_code_cell("import sys, jax\nprint(sys.prefix)\nprint(jax.config.jax_enable_x64)"))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on the first error
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    prefix, x64 = nb.cells[-1].outputs[0]["text"].strip().splitlines()
    assert prefix == sys.prefix  # the kernel ran on this environment
    assert x64 == str(X64)  # and in the suite's mode
    if any("matplotlib" in c.source for c in nb.cells if c.cell_type == "code"):
        images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
        assert images, f"{os.path.basename(path)} imports matplotlib but shows no figure (no image/png output)"


def test_there_are_notebooks():
    assert any(p.endswith("aot_tour.ipynb") for p in NOTEBOOKS)
