import os

os.environ.setdefault("AOTJAX_TYPECHECK", "1")  # every pass typechecks the jaxpr it produces

import jax  # noqa: E402

# jax's default 32-bit mode, what users run; AOTJAX_TEST_X64=1 runs the suite with x64 (float64, int64).
jax.config.update("jax_enable_x64", os.environ.get("AOTJAX_TEST_X64", "0") == "1")

import pytest  # noqa: E402

import aotjax  # noqa: E402


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    doctest_namespace["aotjax"] = aotjax


def pytest_collection_modifyitems(config, items):
    """The x64 pass (AOTJAX_TEST_X64=1) checks that programs compute in 64 bits; it leaves out what does not depend on
    the width, checked in the default mode: the doctests (the examples show the 32-bit mode users run) and the files
    marked `x32_only` (caches, threads, error messages, the CLI, the op table). CI runs both passes on 2 cores."""
    if not jax.config.jax_enable_x64:
        return
    from _pytest.doctest import DoctestItem

    keep, drop = [], []
    for item in items:
        (drop if isinstance(item, DoctestItem) or item.get_closest_marker("x32_only") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
