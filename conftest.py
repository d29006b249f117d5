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
