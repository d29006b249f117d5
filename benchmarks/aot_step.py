"""AOTAutograd gradient steps: aotjax's `aot` vs JAX's jit / fwd_and_bwd, same math, same run.

    python benchmarks/aot_step.py [--number 5] [--repeat 15] [--quick]

The two models of `grad_step.py` (a 3-layer MLP with an MSE loss; a pre-norm transformer block,
batch 8 x seq 128 x width 256), gradients with respect to the dict of parameters. Printed per model:

1. `aot(grad(loss))` (the whole gradient as one compiled program, called plainly) vs
   `jax.jit(jax.grad(loss_jnp))`: the step time and the ratio (target <= 1.05x).
2. `grad(aot(loss))` (aot's compiled forward, then its compiled backward, through aotjax's call
   path: `aot_call`'s jvp, `aot_lin`'s transpose) vs JAX's forward and backward executables
   (`jax.fwd_and_bwd(loss_jnp, argnums=0)`, both jitted; a step is the forward then the backward on
   its residuals): the step time and the ratio (target <= 1.10x). Beside it, for attribution: the
   same aot forward and backward executables called directly on arrays (no aotjax boundary; the
   difference is the boundary and eager autodiff around them), each alone against JAX's, JAX's
   backward asked for every input's cotangent (`argnums=(0, 1, 2)`, what aot's backward returns),
   and `grad(aot(loss, partition=min_cut_partition()))`.
3. Residual bytes: `aot(loss, partition=default_partition)` and `min_cut_partition()`
   (`.lower(...).residual_bytes`), and the leaves of JAX's residuals (the `fwd` output's pytree;
   leaves that are one array counted once).
4. Compile times. For 1, the first call minus a warm call, on both sides (trace, lower, compile).
   For 2, aotjax's `.lower()` (trace, functionalize, joint, partition) and `.compile()` (both
   programs through XLA) vs JAX's `fwd` and `bwd` `.lower()` and `.compile()`. One-shot times,
   noisier than the steps.

The largest absolute difference of each gradient from JAX's is printed. Step times are the least of
`repeat` runs of `number` calls, interleaved across the contenders, every gradient leaf blocked on.
`--quick` uses tiny sizes (a smoke test of the script).
"""
from __future__ import annotations

import grad_step
import jax
import jax.numpy as jnp
import numpy as np
from timing import block_all, interleaved, once

import aotjax
from aotjax.partition import default_partition, min_cut_partition
from aotjax.transforms.aot import xla_compiler


# -- measuring --------------------------------------------------------------------------------------
def _max_diff(g, g_ref) -> float:
    return max(float(np.max(np.abs(np.asarray(g[k]) - np.asarray(g_ref[k])))) for k in g_ref)


def _unique_nbytes(leaves) -> int:
    return sum({id(a): a.nbytes for a in leaves}.values())


def _ms(t: float) -> str:
    return f"{t * 1e3:9.3f} ms"


# -- the benchmark ----------------------------------------------------------------------------------
def bench(name: str, loss, loss_jnp, inputs, number: int, repeat: int) -> None:
    params, x, y = inputs
    ours_args = jax.tree_util.tree_map(lambda a: aotjax.tensor(np.array(a)), (params, x, y))
    jax_args = jax.tree_util.tree_map(jnp.asarray, (params, x, y))
    print(f"\n{name}")

    # reference gradient
    g_ref = jax.jit(jax.grad(loss_jnp))(*jax_args)
    block_all(g_ref)

    # -- 1. aot(grad(loss)) vs jax.jit(jax.grad(loss_jnp)) ------------------------------------------
    step_ours = aotjax.aot(aotjax.grad(loss))
    step_jax = jax.jit(jax.grad(loss_jnp))
    first_ours = once(lambda: block_all(step_ours(*ours_args)))
    first_jax = once(lambda: block_all(step_jax(*jax_args)))
    warm_ours = min(once(lambda: block_all(step_ours(*ours_args))) for _ in range(3))
    warm_jax = min(once(lambda: block_all(step_jax(*jax_args))) for _ in range(3))
    diff1 = _max_diff(step_ours(*ours_args), g_ref)
    t = interleaved({"ours": lambda: block_all(step_ours(*ours_args)),
                      "jax": lambda: block_all(step_jax(*jax_args))}, number, repeat)
    print("  1. one compiled gradient program")
    print(f"     step     aot(grad(loss)) {_ms(t['ours'])}   jax.jit(jax.grad) {_ms(t['jax'])}   "
          f"ratio {t['ours'] / t['jax']:5.2f}x (target <= 1.05x)")

    # -- 2. grad(aot(loss)) vs JAX's forward and backward executables ----------------------------------
    aot_loss = aotjax.aot(loss)
    aot_loss_mc = aotjax.aot(loss, partition=min_cut_partition())
    grad_aot, grad_aot_mc = aotjax.grad(aot_loss), aotjax.grad(aot_loss_mc)
    fwd, bwd = jax.fwd_and_bwd(loss_jnp, argnums=0)
    fwd_all, bwd_all = jax.fwd_and_bwd(loss_jnp, argnums=(0, 1, 2))
    ct = jnp.ones((), jnp.float32)

    def run_jax_fb():
        out, res = fwd(*jax_args)
        block_all(bwd(res, ct))
        out.block_until_ready()

    def run_jax_fb_all():
        out, res = fwd_all(*jax_args)
        block_all(bwd_all(res, ct))
        out.block_until_ready()

    # aot's own forward and backward programs, compiled as aot compiles them, called on arrays
    lowered = aot_loss.lower(*ours_args)
    fw_exe = xla_compiler(lowered.forward, list(lowered.forward.in_avals))
    bw_exe = xla_compiler(lowered.backward, list(lowered.backward.in_avals))
    flat_args = jax.tree_util.tree_leaves(jax_args)
    n_out = len(lowered.forward.out_avals) - sum(i is None for i in lowered.saved_inputs)

    def run_raw():
        outs = fw_exe(*flat_args)
        block_all(bw_exe(*lowered.residuals_from(flat_args, outs), ct))
        block_all(outs[:n_out])

    outs_raw, res_jax_tree = fw_exe(*flat_args), fwd(*jax_args)[1]
    halves = {"raw_fw": lambda: block_all(fw_exe(*flat_args)), "jax_fw": lambda: block_all(fwd(*jax_args)),
              "raw_bw": lambda: block_all(bw_exe(*lowered.residuals_from(flat_args, outs_raw), ct)),
              "jax_bw": lambda: block_all(bwd(res_jax_tree, ct))}

    first_grad_aot = once(lambda: block_all(grad_aot(*ours_args)))
    block_all(grad_aot_mc(*ours_args))
    run_jax_fb(), run_jax_fb_all(), run_raw()  # warm-up
    g2, g2_mc = grad_aot(*ours_args), grad_aot_mc(*ours_args)
    diff2, diff2_mc = _max_diff(g2, g_ref), _max_diff(g2_mc, g_ref)
    t2 = interleaved({"ours": lambda: block_all(grad_aot(*ours_args)), "jax": run_jax_fb,
                       "raw": run_raw, "jax_all": run_jax_fb_all,
                       "mc": lambda: block_all(grad_aot_mc(*ours_args)), **halves}, number, repeat)
    print("  2. compiled forward, then compiled backward")
    print(f"     step     grad(aot(loss)) {_ms(t2['ours'])}   jax fwd+bwd       {_ms(t2['jax'])}   "
          f"ratio {t2['ours'] / t2['jax']:5.2f}x (target <= 1.10x)")
    print(f"     attribution: aot's fw+bw executables on arrays {_ms(t2['raw'])} "
          f"({t2['raw'] / t2['jax']:4.2f}x jax; boundary {(t2['ours'] - t2['raw']) * 1e3:6.3f} ms);")
    print(f"                  forward alone {_ms(t2['raw_fw'])} vs jax {_ms(t2['jax_fw'])} "
          f"({t2['raw_fw'] / t2['jax_fw']:4.2f}x), backward alone {_ms(t2['raw_bw'])} vs jax {_ms(t2['jax_bw'])} "
          f"({t2['raw_bw'] / t2['jax_bw']:4.2f}x);")
    print(f"                  jax fwd+bwd, cotangents of every input {_ms(t2['jax_all'])} "
          f"({t2['jax_all'] / t2['jax']:4.2f}x jax)")
    print(f"     min-cut  grad(aot(loss, partition=min_cut_partition())) {_ms(t2['mc'])}   "
          f"ratio {t2['mc'] / t2['jax']:5.2f}x")

    # -- 3. residual bytes ----------------------------------------------------------------------------
    lowered_mc = aot_loss_mc.lower(*ours_args)
    lowered_default = aotjax.aot(loss, partition=default_partition).lower(*ours_args)
    res_jax = jax.tree_util.tree_leaves(res_jax_tree)
    mib = 2.0 ** 20
    print("  3. residuals")
    print(f"     default_partition   {lowered_default.residual_bytes / mib:8.2f} MiB in "
          f"{len(lowered_default.residuals):3} arrays")
    print(f"     min_cut_partition() {lowered_mc.residual_bytes / mib:8.2f} MiB in "
          f"{len(lowered_mc.residuals):3} arrays")
    print(f"     jax.vjp             {_unique_nbytes(res_jax) / mib:8.2f} MiB in "
          f"{len({id(a) for a in res_jax}):3} arrays")

    # -- 4. compile times (fresh functions: nothing cached) ------------------------------------------
    staged = {}

    def lower_ours():
        lowered = staged["ours"] = aotjax.aot(loss).lower(*ours_args)
        lowered.forward, lowered.backward  # noqa: B018  (the joint and the partition are built lazily)

    t_stage_ours = once(lower_ours)
    t_xla_ours = once(lambda: staged["ours"].compile())
    fresh_fwd, fresh_bwd = jax.fwd_and_bwd(loss_jnp, argnums=0)
    res_struct = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), res_jax_tree)
    t_lower_jax = once(lambda: staged.update(fwd=fresh_fwd.lower(*jax_args)))
    t_lower_jax += once(lambda: staged.update(bwd=fresh_bwd.lower(res_struct, ct)))
    t_compile_jax = once(lambda: staged["fwd"].compile()) + once(lambda: staged["bwd"].compile())
    c1_ours, c1_jax = first_ours - warm_ours, first_jax - warm_jax
    c2_ours, c2_jax = t_stage_ours + t_xla_ours, t_lower_jax + t_compile_jax
    print("  4. compile")
    print(f"     1: first call - warm call   aot(grad) {_ms(c1_ours)}   jax.jit(grad) {_ms(c1_jax)}   "
          f"ratio {c1_ours / c1_jax:5.2f}x")
    print(f"     2: aot(loss)  lower {_ms(t_stage_ours)} + compile {_ms(t_xla_ours)}   "
          f"ratio {c2_ours / c2_jax:5.2f}x (lower: trace, joint, partition; compile: both programs)")
    print(f"        jax fwd,bwd lower {_ms(t_lower_jax)} + compile {_ms(t_compile_jax)}")
    print(f"        (grad(aot(loss)) first call - warm call {_ms(first_grad_aot - t2['ours'])})")
    print(f"  gradients: max abs diff from jax.grad: aot(grad) {diff1:.3g}, grad(aot) {diff2:.3g}, "
          f"grad(aot, min-cut) {diff2_mc:.3g} (largest entry "
          f"{max(float(np.max(np.abs(np.asarray(v)))) for v in g_ref.values()):.3g})")


def main() -> None:
    grad_step.main(bench, "aot gradient steps", number=5, repeat=15)


if __name__ == "__main__":
    main()
