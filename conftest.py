import os

os.environ.setdefault("AOTJAX_TYPECHECK", "1")  # every pass typechecks the jaxpr it produces


def _compile_less() -> str | None:
    """Half of the suite's time is XLA compiling small programs; three settings shrink that without changing what a
    test checks (the programs, their semantics and the jaxprs are the same):
    - LLVM at -O0 (`--xla_backend_optimization_level=0`): XLA's HLO passes (fusion, layout, buffer donation) still
      run; only machine-code optimization, which the tests do not measure, is left out;
    - XLA:CPU's elemental IR emitter for its fused loops (`--xla_cpu_use_fusion_emitters=false`): the same fusions,
      emitted by the older code generator, which compiles faster (10-30% less XLA compile time, measured on the
      tests' programs and on small fused ones); its transcendental functions may differ from the default
      emitter's in the last bit (doctests that print one elide it);
    - one persistent compilation cache for the run, shared by the xdist workers and the processes tests start (the
      notebooks, the benchmark scripts), so a program two of them compile is compiled once. A fresh directory per
      run unless `JAX_COMPILATION_CACHE_DIR` is set (set it to keep the cache between runs).
    Environment variables, set before jax starts, so that the workers and subprocesses inherit them. Returns the
    directory this process made, to remove when the run ends."""
    for flag, value in (("--xla_backend_optimization_level", "0"), ("--xla_cpu_use_fusion_emitters", "false")):
        if flag not in os.environ.get("XLA_FLAGS", ""):
            os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}={value}".strip()
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:  # NOTE: the user's, or the one the xdist controller made
        return None
    import tempfile

    os.environ["JAX_COMPILATION_CACHE_DIR"] = made = tempfile.mkdtemp(prefix="aotjax-tests-xla-cache-")
    return made


_made_cache_dir = _compile_less()

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


def pytest_collection_finish(session):
    """What collection made (the modules of aotjax, jax, torch and the tests, their constants and parameters: some
    300k objects) lives until the run ends. Frozen (`gc.freeze`), the collector's full passes no longer walk it at each
    pass: they took 7-13% of a test process's time, about 4% frozen (measured with `gc.callbacks` on two op files).
    Objects the tests make are collected as before."""
    import gc

    gc.collect()
    gc.freeze()


def pytest_unconfigure(config):
    if _made_cache_dir is not None:
        import shutil

        shutil.rmtree(_made_cache_dir, ignore_errors=True)
