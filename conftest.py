import os

os.environ.setdefault("AOTJAX_TYPECHECK", "1")  # every pass typechecks the jaxpr it produces

import jax  # noqa: E402

jax.config.update("jax_enable_x64", os.environ.get("AOTJAX_TEST_X64", "1") != "0")

import pytest  # noqa: E402

import aotjax  # noqa: E402


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    doctest_namespace["aotjax"] = aotjax
