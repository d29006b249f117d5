"""`import aotjax` in a fresh process: what it leaves behind (the collector's state) and what it does not import."""
import subprocess
import sys

import pytest

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass

_PROBE = """
import gc, sys
{before}
import aotjax
print(gc.isenabled(), sorted(m for m in ("networkx", "nbformat", "nbclient", "matplotlib", "tqdm", "torch",
                                         "aotjax.__main__", "aotjax.cli") if m in sys.modules))
"""


def _probe(before: str) -> str:
    proc = subprocess.run([sys.executable, "-c", _PROBE.format(before=before)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_import_leaves_the_garbage_collector_as_it_found_it_and_imports_no_optional_library():
    # the import pauses the collector while aotjax's modules load (aotjax/__init__.py), then restores it
    assert _probe("") == "True []"
    assert _probe("gc.disable()") == "False []"
