"""Issue 15's performance table in one run: every row, aotjax beside JAX on the same machine, the ratio, the goal.

    python benchmarks/table.py [--quick] [--number 300] [--repeat 7] [--skip ROW,...]

Rows (`--skip` takes their keys):

    jit          `aotjax.jit` call on 1 / 10 / 100 args f32[4], two written in place, vs `jax.jit` donating them
                 (`boundary_overhead.py`'s functions)
    grad_aot     `grad(aot(f))` on a tiny function vs `jax.fwd_and_bwd`'s two executables (forward, then backward)
    eager        eager ops (`eager_overhead.py`'s cases) vs `jax.numpy` eager: geometric mean, worst, `add_`
    trace        `make_jaxpr(grad(f))` of a chain of elementwise ops: the time's growth from ~2k to ~10k equations
                 (linear: 5x), and the times themselves vs `jax.make_jaxpr(jax.grad(f))`
    min_cut      `min_cut_partition(memory_budget=0.5)` on a 4-layer transformer's joint (JAX has no partitioner
                 of this kind: no ratio)
    import       `import aotjax` + a first op vs `import jax` + a first op, each in a fresh process
    transformer  the compiled training step of a 4-layer transformer (`jit(grad(loss))`) vs JAX's written two
                 ways: dense layers as 3-D matmuls ([b, s, w] @ [w, n], the obvious way) and as 2-D ones
                 ([b * s, w] @ [w, n]); and `grad(aot(loss))` vs `jax.fwd_and_bwd` (2-D)

Times are the least of `repeat` runs of `number` calls, the two sides interleaved, results blocked on. `--quick`
uses tiny sizes and few calls (a smoke test of the script).
"""
from __future__ import annotations

import argparse
import math
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import aotjax

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import boundary_overhead  # noqa: E402
import eager_overhead  # noqa: E402
import grad_step  # noqa: E402
from timing import block_all, interleaved  # noqa: E402

from aotjax.partition import default_partition, min_cut_partition  # noqa: E402


class Table:
    """Rows of (figure, aotjax, jax, ratio, goal), printed as they come and again at the end."""

    def __init__(self):
        self.rows: list[tuple[str, str, str, str, str]] = []

    def add(self, figure: str, ours: str, theirs: str, ratio: float | None, goal: str) -> None:
        row = (figure, ours, theirs, f"{ratio:.2f}x" if ratio is not None else "-", goal)
        self.rows.append(row)
        print(f"  {figure}: aotjax {ours}, jax {theirs}, ratio {row[3]} (goal {goal})", flush=True)

    def print(self) -> None:
        widths = [max(len(r[i]) for r in [self.header, *self.rows]) for i in range(5)]
        for r in [self.header, tuple("-" * w for w in widths), *self.rows]:
            print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")

    header = ("figure", "aotjax", "jax", "ratio", "goal")


def _us(t: float) -> str:
    return f"{t * 1e6:.1f} µs"


def _ms(t: float) -> str:
    return f"{t * 1e3:.2f} ms"


def _warm(fn, n: int = 20) -> None:
    for _ in range(n):
        fn()


# -- rows -----------------------------------------------------------------------------------------------------------
def jit_rows(table: Table, number: int, repeat: int) -> None:
    runners = getattr(boundary_overhead, "runners", None)
    goals = {1: "1.2x", 10: "1.2x", 100: "1.3x"}
    if runners is None:  # NOTE: an older boundary_overhead.py: its one row (10 args), read from its output
        out = subprocess.run([sys.executable, str(HERE / "boundary_overhead.py"), "--number", str(number),
                              "--repeat", str(repeat), "--size", "4"], capture_output=True, text=True,
                             check=True).stdout
        ours = float(re.search(r"^aotjax\.jit\s+([\d.]+)", out, re.M).group(1)) * 1e-6
        theirs = float(re.search(r"^jax\.jit\s+([\d.]+)", out, re.M).group(1)) * 1e-6
        table.add("jit call, 10 args", _us(ours), _us(theirs), ours / theirs, goals[10])
        return
    for n in (1, 10, 100):
        run_ours, run_jax = runners(n, 4, True)
        t = interleaved({"ours": run_ours, "jax": run_jax}, number, repeat)
        table.add(f"jit call, {n} arg{'s' if n > 1 else ''}", _us(t["ours"]), _us(t["jax"]), t["ours"] / t["jax"],
                  goals[n])


def grad_aot_row(table: Table, number: int, repeat: int) -> None:
    def f(x, w):
        return (x * w).sin().sum()

    def f_jnp(x, w):
        return jnp.sin(x * w).sum()

    x, w = aotjax.ones(4), aotjax.ones(4) * 0.5
    step = aotjax.grad(aotjax.aot(f), argnums=(0, 1))
    fwd, bwd = jax.fwd_and_bwd(f_jnp, argnums=(0, 1))
    jx, jw, ct = jnp.ones(4), jnp.ones(4) * 0.5, jnp.ones(())

    def ours():
        block_all(step(x, w))

    def theirs():
        _, res = fwd(jx, jw)
        block_all(bwd(res, ct))

    _warm(ours)
    _warm(theirs)
    t = interleaved({"ours": ours, "jax": theirs}, number, repeat)
    table.add("grad(aot(f)) step, tiny f", _us(t["ours"]), _us(t["jax"]), t["ours"] / t["jax"], "1.3x")


def eager_rows(table: Table, number: int, repeat: int) -> None:
    ratios = {}
    for name, ours, theirs in eager_overhead.make_cases(32):
        _warm(ours, 50)
        _warm(theirs, 50)
        t = interleaved({"ours": ours, "jax": theirs}, number, repeat)
        ratios[name] = (t["ours"], t["jax"])
    r = {k: a / b for k, (a, b) in ratios.items()}
    issue = [k for k in eager_overhead.ISSUE_OPS if k in r]  # NOTE: the issue's six ops; the others are extra rows
    geomean = math.exp(sum(math.log(r[k]) for k in issue) / len(issue))
    worst = max(issue, key=r.get)
    table.add(f"eager ops, geomean of the issue's {len(issue)}", "", "", geomean, "1.1x")
    table.add(f"eager ops, worst ({worst})", _us(ratios[worst][0]), _us(ratios[worst][1]), r[worst], "1.2x")
    for name in (k for k in r if k != worst):
        table.add(f"eager {name}{'' if name in issue else ' (extra)'}", _us(ratios[name][0]), _us(ratios[name][1]),
                  r[name], "1.2x" if name in issue else "-")


def _chain(n: int, jnp_ops: bool):
    def f(x):
        for i in range(n):
            if jnp_ops:
                x = x * 1.0001 if i % 2 else jnp.sin(x)
            else:
                x = x * 1.0001 if i % 2 else x.sin()
        return x.sum()

    return f


def trace_rows(table: Table, small: int, repeat: int) -> None:
    x, jx = aotjax.ones(8), jnp.ones(8)
    times, eqns = {}, {}
    for n in (small, 5 * small):
        f, f_jnp = _chain(n, False), _chain(n, True)
        eqns[n] = len(aotjax.make_jaxpr(aotjax.grad(f))(x).eqns)
        times[n] = (grad_step._best(lambda f=f: aotjax.make_jaxpr(aotjax.grad(f))(x), repeat),
                    grad_step._best(lambda f_jnp=f_jnp: jax.make_jaxpr(jax.grad(f_jnp))(jx), repeat))
    big = 5 * small
    growth = [times[big][k] / times[small][k] for k in (0, 1)]
    table.add(f"make_jaxpr(grad(f)) growth, {eqns[small]} -> {eqns[big]} eqns", f"{growth[0]:.2f}",
              f"{growth[1]:.2f}", None, "<= 5.2 (linear: 5)")
    for n in (small, big):
        table.add(f"make_jaxpr(grad(f)), {eqns[n]} eqns", _ms(times[n][0]), _ms(times[n][1]),
                  times[n][0] / times[n][1], "-")


def min_cut_row(table: Table, layers: int, batch: int, seq: int, width: int, heads: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    params = [_tensors(grad_step.block_inputs(rng, batch, seq, width)[0]) for _ in range(layers)]
    x = _tensors(rng.normal(size=(batch, seq, width)).astype(np.float32))

    def loss(ps, x, y):
        for p in ps:
            x = grad_step.block(p, x, heads)
        return ((x - y) ** 2).mean()

    joints = []

    def keep(joint):
        joints.append(joint)
        return default_partition(joint)

    aotjax.aot(loss, partition=keep).lower(params, x, x)
    partition = min_cut_partition(memory_budget=0.5)
    t = grad_step._best(lambda: partition(joints[0]), repeat)
    table.add(f"min_cut_partition(0.5), {layers}-layer transformer ({len(joints[0].jaxpr.eqns)} eqns)", _ms(t),
              "-", None, "<= 300 ms")


def _tensors(tree):
    return jax.tree_util.tree_map(lambda a: aotjax.tensor(np.array(a)), tree)


_IMPORT = {
    "aotjax": "import aotjax\naotjax.ones(3).add(1).numpy()",
    "jax": "import jax.numpy as jnp\nimport numpy as np\nnp.asarray(jnp.ones(3) + 1)",
}


def import_row(table: Table, repeat: int) -> None:
    import os
    import tempfile

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(aotjax.__file__).resolve().parents[1]),
                                                      os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # NOTE: as an installed package is: imported from bytecode
    cache = tempfile.mkdtemp(prefix="aotjax-pycache-")  # the checkout's bytecode, written by a first, untimed run

    def command(code: str) -> list[str]:
        script = f"import time\nt0 = time.perf_counter()\n{code}\nprint(time.perf_counter() - t0)"
        return [sys.executable, "-X", f"pycache_prefix={cache}", "-c", script]

    def timed(run: list[str]) -> float:
        return float(subprocess.run(run, capture_output=True, text=True, env=env, check=True).stdout.split()[-1])

    runs = {side: command(code) for side, code in _IMPORT.items()}
    for run in runs.values():
        timed(run)  # NOTE: writes the bytecode; the file cache warm for both
    times: dict[str, list[float]] = {side: [] for side in runs}
    for _ in range(repeat):  # NOTE: the two sides interleaved, the least disturbed run of each counts
        for side, run in runs.items():
            times[side].append(timed(run))
    ours, theirs = min(times["aotjax"]), min(times["jax"])
    table.add("import + first op", _ms(ours), _ms(theirs), ours / theirs, "1.2x")


def transformer_rows(table: Table, layers: int, batch: int, seq: int, width: int, heads: int, number: int,
                     repeat: int) -> None:
    rng = np.random.default_rng(0)
    params = [grad_step.block_inputs(rng, batch, seq, width)[0] for _ in range(layers)]
    x = rng.normal(size=(batch, seq, width)).astype(np.float32)
    y = rng.normal(size=(batch, seq, width)).astype(np.float32)
    ours_args = _tensors((params, x, y))
    jax_args = jax.tree_util.tree_map(jnp.asarray, (params, x, y))

    def loss(ps, x, y):
        for p in ps:
            x = grad_step.block(p, x, heads)
        return ((x - y) ** 2).mean()

    def loss_jnp(ps, x, y, flat):
        for p in ps:
            x = grad_step.block_jnp(p, x, heads, flat)
        return ((x - y) ** 2).mean()

    step = aotjax.jit(aotjax.grad(loss))
    step_aot = aotjax.grad(aotjax.aot(loss))
    steps_jax = {flat: jax.jit(jax.grad(lambda *a, flat=flat: loss_jnp(*a, flat))) for flat in (False, True)}
    fwd, bwd = jax.fwd_and_bwd(lambda *a: loss_jnp(*a, True), argnums=0)
    ct = jnp.ones((), jnp.float32)

    def fwd_bwd():
        _, res = fwd(*jax_args)
        block_all(bwd(res, ct))

    fns = {"ours": lambda: block_all(step(*ours_args)), "aot": lambda: block_all(step_aot(*ours_args)),
           "3d": lambda: block_all(steps_jax[False](*jax_args)), "2d": lambda: block_all(steps_jax[True](*jax_args)),
           "fb": fwd_bwd}
    for fn in fns.values():
        _warm(fn, 5)
    t = interleaved(fns, number, repeat)
    what = f"{layers}-layer transformer step, x f32[{batch},{seq},{width}]"
    table.add(f"{what}: jit(grad) vs jax 3-D matmuls", _ms(t["ours"]), _ms(t["3d"]), t["ours"] / t["3d"], "-")
    table.add(f"{what}: jit(grad) vs jax 2-D matmuls", _ms(t["ours"]), _ms(t["2d"]), t["ours"] / t["2d"], "-")
    table.add(f"{what}: grad(aot) vs jax fwd_and_bwd (2-D)", _ms(t["aot"]), _ms(t["fb"]), t["aot"] / t["fb"], "-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--number", type=int, default=300, help="calls per timing run (the per-call rows)")
    parser.add_argument("--repeat", type=int, default=7, help="timing runs (the minimum counts)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few calls: a smoke test of the script")
    parser.add_argument("--skip", default="", help="comma-separated row keys to leave out (see above)")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    number, repeat = (5, 1) if args.quick else (args.number, args.repeat)
    model = dict(layers=1, batch=2, seq=8, width=16, heads=2) if args.quick else \
        dict(layers=4, batch=8, seq=128, width=256, heads=4)
    jax.jit(lambda a: a + 1).lower(jnp.ones(2)).compile()  # jax's one-time setup, charged to neither side
    print(f"issue 15's table, float32, {jax.devices()[0].platform}; min of {repeat} x {number} calls")
    table = Table()
    rows = {
        "jit": lambda: jit_rows(table, number, repeat),
        "grad_aot": lambda: grad_aot_row(table, number, repeat),
        "eager": lambda: eager_rows(table, number, repeat),
        "trace": lambda: trace_rows(table, 20 if args.quick else 800, repeat),
        "min_cut": lambda: min_cut_row(table, **model, repeat=repeat),
        "import": lambda: import_row(table, 1 if args.quick else 7),
        "transformer": lambda: transformer_rows(table, **model, number=max(number // 100, 2),
                                                repeat=repeat),
    }
    for key, row in rows.items():
        if key not in skip:
            row()
    print()
    table.print()


if __name__ == "__main__":
    main()
