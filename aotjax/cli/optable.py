"""Print, write or check the README's "Supported ops" table, generated from what the package exposes.

The rows come from the op families (each `aotjax/ops/<family>.py`: its `__all__` are `aotjax.X` functions, its
`FUNCTIONAL` list `aotjax.nn.functional.X`), the namespaces (`aotjax.linalg`, `aotjax.special`, `aotjax.fft`,
`aotjax.random`, `aotjax.lax`, `aotjax.func`), the Tensor methods the families do not already list, the layers of
`aotjax.nn`, `aotjax.nn.init` and `aotjax.optim`; then the ops left out on purpose (`aotjax.ops.unsupported`) and
those that work eagerly only. Each family's title and note are written once, in `FAMILIES` below; a new family
module appears under its module name until it gets a row there. In the table `add(_)` stands for `add` and its
in-place `add_`, and `conv1d/2d/3d` for `conv1d conv2d conv3d`.

    python -m aotjax ops            # print the generated block
    python -m aotjax ops --write    # rewrite it in README.md, between the optable markers
    python -m aotjax ops --check    # exit 1 if README.md differs from what the package exposes
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import FunctionType, ModuleType

import aotjax
from aotjax import ops
from aotjax.ops.unsupported import UNSUPPORTED, unsupported_error

START, END = "<!-- optable:start -->", "<!-- optable:end -->"
README = Path(__file__).resolve().parents[2] / "README.md"
FUNCTIONAL = "aotjax.nn.functional"


@dataclass(frozen=True)
class Family:
    """The README row of an op family (a module of `aotjax.ops`): its title and a short hand-written note."""
    title: str
    note: str = ""


# Op family module (its path under aotjax/ops/, dotted) -> its row, in the README's order; None: not user-facing ops
# (internals, or the functions of a namespace row below).
FAMILIES: dict[str, Family | None] = {
    "creation.factories": Family("creation", "`dtype=`, sizes as ints or one tuple; `device=`, "
                                 "`layout=aotjax.strided` (the only layout) and `pin_memory=` as torch's; "
                                 "`empty_strided` with contiguous strides only; `Tensor.new_*` below; "
                                 "`linspace`/`logspace` ends may be 0-d tensors, traced ones too (no derivative "
                                 "in them, as torch); an integer `linspace` rounds as torch's (float64, fused)"),
    "base.data": Family("creation from data", "`tensor` takes lists, NumPy and jax arrays; `as_tensor` keeps a tensor "
                        "as it is; `promote`: torch's type promotion"),
    "base.casts": Family("casts", "`Tensor.to` and the cast methods (`float double half bfloat16 int long bool "
                         "short byte char cfloat cdouble type_as`, each taking `memory_format=`) are elementwise"),
    "random.generator": Family("random: the stateful generator", "one key tensor updated in place; `generator=` "
                               "arguments; under `vmap`, `randomness=`; in-place samplers are Tensor methods (below)"),
    "random.distributions": Family("random: distributions", "from the stateful generator (`generator=`)"),
    "math.elementwise": Family("elementwise", "torch's type promotion; casts (`to`, Tensor `float double half "
                               "bfloat16 int long bool type_as`); the Python operators"),
    "math.functions": Family("math functions", "inverse trigonometric, logarithms, rounding, two-operand float math, "
                             "predicates; `arc*` aliases; `<<` `>>`; special functions also in `aotjax.special`"),
    "math.special": Family("special functions", "`igamma igammac` (also `special.gammainc gammaincc`) "
                           "differentiable in `other` only, as torch; `frexp` returns (mantissa, int32 exponent); "
                           "the rest of torch.special in `aotjax.special` below"),
    "math.complex": Family("complex", "`Tensor.real`/`.imag` (settable), `conj`, `view_as_real`, `view_as_complex`, "
                           "`mH`/`H`: views as in torch (writes go through; strides in real elements); elementwise "
                           "ops, `sum mean prod var std matmul eq ne` take complex; ordering ops, extrema and sorts "
                           "refuse it. `grad` w.r.t. a complex leaf follows JAX: the conjugate of torch's `.grad` "
                           "(equal for real leaves)"),
    "reduce.reductions": Family("reductions", "`dim=` int or tuple, `keepdim=`"),
    "reduce.statistics": Family("statistics", "`bincount` under tracing needs `minlength` (JAX's `length=`); "
                                "`histogram`, the trapezoid rule, `gradient`"),
    "reduce.sorting": Family("sorting and scans", "a stable `sort` primitive (NaN last ascending); native scan "
                             "primitives; `unique unique_consecutive` eagerly (see below)"),
    "linalg.matmul": Family("matrix products", "`@`"),
    "linalg.products": Family("matrix products with scaling, Kronecker, tensor products",
                              "`beta`/`alpha` (an integer result truncates a float one, `addr` refuses it, as "
                              "torch); `addr` promotes its operands"),
    "linalg.decompositions": Family("linear algebra", "more in `aotjax.linalg`"),
    "linalg.lapack": Family("linear algebra: torch's older names", "`cholesky qr svd lu lu_solve triangular_solve` "
                            "with torch's arguments and results, through `aotjax.linalg`"),
    "shape.views": Family("views", "views share their base's storage as in torch; basic indexing `x[i]`, `x[a:b:c]`, "
                          "`x[..., None]`; metadata mutations `t_ transpose_ squeeze_ unsqueeze_`; `narrow select` "
                          "at a traced 0-d tensor position: a gathered copy"),
    "shape.arrangement": Family("arrangement", "views where torch returns views; `repeat_interleave` takes "
                                "`output_size=` for traced counts; the `*_copy` forms: the view's values in a new "
                                "contiguous tensor"),
    "shape.clone": Family("clone", "`memory_format=` (strides are metadata)"),
    "shape.copies": Family("new values", "copies"),
    "indexing.subscripts": Family("indexing", "`getitem`/`setitem` are `x[i]` and `x[i] = v` (integer-tensor "
                                  "indexing traced, boolean masks eagerly; `x[mask] = v` traced)"),
    "indexing.gather_scatter": Family("scatter and gather", "`scatter_reduce` (sum prod mean amax amin, "
                                      "`include_self`); `masked_select argwhere` eagerly; `nonzero(size=, "
                                      "fill_value=)` and `nonzero_static` traced"),
    "nn.activations": Family("activations", "`inplace=`; `relu gelu silu sigmoid tanh` are the elementwise ops"),
    "nn.losses": Family("losses", "`reduction`, `weight`, `ignore_index`, `pos_weight`, `log_target`; `ctc_loss` "
                        "(padded or concatenated targets; a `scan` over time; torch's gradient, whose backward assumes "
                        "`log_softmax` outputs)"),
    "nn.normalization": Family("normalization and dropout", "`dropout(key=` or a generator`)`"),
    "nn.conv": Family("convolution", "stride, padding incl. `'same'`, dilation, groups; one `conv` primitive whose "
                      "transposes are convolutions: derivatives of any order; `vmap` folds the batch into N or groups; "
                      "integer inputs as torch's CPU kernels (any integer dtype; transposed: int64)"),
    "nn.pooling": Family("pooling", "`return_indices`; `unfold fold` (im2col); `max_unpool*` (`output_size=`); "
                                    "`fractional_max_pool*` (`_random_samples`, else `key=`/`generator=`); a batch "
                                    "of 0; `avg_pool*` of int64 truncates each mean, as torch"),
    "linalg.compact": Family("linear algebra: LAPACK's compact forms",
                             "`lu_unpack`; `geqrf` (not differentiable, as torch) with `orgqr ormqr`; "
                             "`aotjax.linalg.ldl_factor ldl_solve` (torch's pivots)"),
    "linalg.lowrank": Family("randomized low-rank", "draws from aotjax's generator (`generator=`)"),
    "nn.resampling": Family("resampling", "`pad` (constant reflect replicate circular), `interpolate` (nearest "
                            "nearest-exact linear bilinear bicubic trilinear area, `align_corners`); `upsample_*` "
                            "aliases of `interpolate`; `grid_sample` 4-D and 5-D (bilinear nearest; zeros border "
                            "reflection)"),
    "nn.linear": Family("linear layers", ""),
    "nn.sparse": Family("embedding", "`padding_idx=`"),
    "nn.attention": Family("attention", "`scaled_dot_product_attention` with masks, `is_causal`, dropout; "
                                        "`multi_head_attention_forward`"),
    "linalg.solvers": None,  # aotjax.linalg's functions: its namespace row
    "fft.fourier": None,  # the rows of aotjax.fft
    "random.keys": None,  # aotjax.random's row
    "reduce.masked": None,  # aotjax.masked's row
    "base.frontend": None,  # argument helpers (`canonical_dim`, `to_dtype`, ...), not ops
}
# Folders whose modules are never rows: primitives other rows' ops are made of, or namespaces' (aotjax.lax).
INTERNAL = ("base.combinators", "base.from_jax", "base.layout", "base.promotion", "calls.", "control_flow.",
            "distributed.")

# Namespaces: module path -> note. A namespace that does not exist (yet) is left out.
NAMESPACES: dict[str, str] = {
    "aotjax.linalg": "torch's result NamedTuples; batched over leading dims; real floats (`eig eigvals` return "
                     "complex); the factorizations are "
                     "`from_jax` primitives whose derivatives, transposes and batching are JAX's, with torch's "
                     "conventions (a symmetric input's gradient is symmetric: `cholesky`, `eigh`; "
                     "`pinv(hermitian=True)` reads one triangle); `pinv matrix_rank` take tolerance tensors; "
                     "`lstsq`'s results per CPU `driver`",
    "aotjax.special": "the polynomials take integer degrees `n` (tensors or numbers; no derivative, as torch)",
    "aotjax.masked": "torch.masked's functions on plain tensors with `mask=` (no `MaskedTensor`); fully masked "
                     "results as torch",
    "aotjax.fft": "torch's `n`/`s`, `dim`, `norm`; `aotjax.stft istft` (`Tensor.stft istft`; `return_complex=True`); "
                  "the transforms are `from_jax` primitives",
    "aotjax.signal.windows": "constants of the length `M` (computed in float64 with NumPy); `sym=`",
    "aotjax.random": "JAX-style explicit keys",
    "aotjax.lax": "JAX's control flow on tensors; collectives over named axes",
    "aotjax.func": "`torch.func`'s, for modules under transforms",
    "aotjax.nn.utils": "gradient clipping (eagerly and inside a compiled step), parameter vectors",
    "aotjax.nn.utils.rnn": "packed and padded sequences (lengths are host values)",
    "aotjax.optim.lr_scheduler": "torch's schedulers; changing lr never retraces a compiled step",
    "aotjax.utils.data": "`torch.utils.data`: datasets, samplers, `DataLoader` (shuffling from aotjax's generator)",
    "aotjax.distributions": "`torch.distributions`: log_prob, entropy, moments, cdf/icdf, sample/rsample from "
                            "aotjax's generator, validation as torch's; `kl_divergence` of same-family pairs",
    "aotjax.testing": "`torch.testing.assert_close`: torch's default tolerances by dtype and its messages",
    "aotjax.utils.checkpoint": "`torch.utils.checkpoint`: activation checkpointing on `aotjax.checkpoint` (the "
                               "recomputation replays the forward's random numbers)",
    "aotjax.amp": "`autocast` with torch's op policies; `GradScaler` (a skipped step is data inside a compiled step)",
    "aotjax.cuda": "what a script asks of a GPU, from jax's devices",
}
LAYERS: dict[str, str] = {
    "aotjax.nn": "torch-style modules (`state_dict`, `train`/`eval`, `named_parameters`, ...)",
    "aotjax.nn.init": "",
    "aotjax.optim": "torch-style optimizers that update in place; optax's protocol (`init`/`update`)",
}

# Ops that exist but need concrete values: (title, names, text). Checked by tests/test_op_table.py.
EAGER_ONLY = (
    ("data-dependent shapes", ("masked_select", "nonzero", "argwhere", "unique", "unique_consecutive"),
     "work eagerly; under `jit`, `grad`, `vmap` or `make_jaxpr` they raise, since their result's shape depends on "
     "the values. Traced alternatives: `nonzero(x, size=, fill_value=)` (JAX's `size=`), `bincount(minlength=)`, "
     "`repeat_interleave(output_size=)`, `where(mask, x, 0)`, `masked_fill`, `x[mask] = v`"),
    ("boolean-mask indexing", (), "`x[mask]` works eagerly and raises under tracing; `x[mask] = v` traces"),
)


@dataclass(frozen=True)
class Row:
    """One line of the table: a title, where its names resolve (a module path, or `aotjax.Tensor`), the tokens
    (`add(_)`, `conv1d/2d/3d`, `sum`) and a note."""
    title: str
    namespace: str
    tokens: tuple[str, ...]
    note: str


def expand(token: str) -> list[str]:
    """The names a table token stands for.

    >>> expand("conv1d/2d/3d"), expand("add(_)"), expand("sum")
    (['conv1d', 'conv2d', 'conv3d'], ['add', 'add_'], ['sum'])
    """
    inplace = token.endswith("(_)")
    base = token.removesuffix("(_)")
    m = re.fullmatch(r"(.*?)(\d)d((?:/\dd)+)", base)
    names = [f"{m[1]}{k}d" for k in m[2] + m[3].replace("d", "").replace("/", "")] if m else [base]
    return [v for n in names for v in ((n, n + "_") if inplace else (n,))]


def resolve(path: str) -> object:
    """The object a dotted path from `aotjax` names (`"aotjax.nn.functional"`, `"aotjax.Tensor"`); AttributeError
    when it does not exist.

    >>> resolve("aotjax.nn.functional.relu") is aotjax.relu
    True
    """
    obj = aotjax
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def _is_op(obj: object) -> bool:
    """A function or class a user calls, not a submodule, a NamedTuple result or a constant."""
    return callable(obj) and not isinstance(obj, ModuleType) and not (isinstance(obj, type) and issubclass(obj, tuple))


def _ops_of(namespace: str, candidates: list[str], owner: str = "aotjax") -> list[str]:
    ns = resolve(namespace)
    # NOTE: `x_p` names are primitives, except op functions so named (`legendre_polynomial_p`)
    return [n for n in dict.fromkeys(candidates) if not n.startswith("_")
            and not (n.endswith("_p") and not isinstance(getattr(ns, n, None), FunctionType))
            and _is_op(getattr(ns, n, None)) and unsupported_error(owner, n) is None]


def _tokens(names: list[str], has_inplace) -> tuple[str, ...]:
    """`names` with `x_` folded into `x(_)` where `has_inplace(x)`, and `x1d x2d x3d` into `x1d/2d/3d`."""
    present = set(names)
    out = [f"{n}(_)" if has_inplace(n) else n for n in names if not (n.endswith("_") and n[:-1] in present
                                                                    and has_inplace(n[:-1]))]
    groups: dict[tuple[str, str], list[str]] = {}
    for tok in out:
        m = re.fullmatch(r"(.*?)(\d)d(\(_\))?", tok)
        groups.setdefault((m[1], m[3] or "") if m else (tok, "\0"), []).append(m[2] if m else tok)
    return tuple(ks[0] if suffix == "\0" else f"{stem}{'/'.join(k + 'd' for k in ks)}{suffix}"
                 for (stem, suffix), ks in groups.items())


def family_modules() -> list[tuple[str, ModuleType]]:
    """The public op family modules of `aotjax.ops` (`"creation.factories"`: each folder's modules), those with a row
    in `FAMILIES` first, in its order; a new module appears under its name until it gets a row there."""
    found = {}
    for folder in pkgutil.iter_modules(ops.__path__):
        if not folder.ispkg:
            continue
        package = importlib.import_module(f"aotjax.ops.{folder.name}")
        for m in pkgutil.iter_modules(package.__path__):
            name = f"{folder.name}.{m.name}"
            if not m.name.startswith("_") and not name.startswith(INTERNAL):
                found[name] = importlib.import_module(f"aotjax.ops.{name}")
    order = [n for n in FAMILIES if n in found] + sorted(n for n in found if n not in FAMILIES)
    return [(n, found[n]) for n in order if FAMILIES.get(n, Family(n)) is not None and hasattr(found[n], "__all__")]


def family_rows() -> list[Row]:
    """One row per op family: `aotjax.X` functions, or `aotjax.nn.functional.X` for a family with `FUNCTIONAL`."""
    rows = []
    for name, module in family_modules():
        functional = getattr(module, "FUNCTIONAL", None)
        namespace = FUNCTIONAL if functional is not None else "aotjax"
        top_level = list(getattr(module, "TOP_LEVEL", []))  # NOTE: `aotjax.X` names of a namespace's family
        names = _ops_of(namespace, list(functional or []) + top_level + list(module.__all__))
        ns = resolve(namespace)
        inplace = lambda n, ns=ns: (_is_op(getattr(ns, n + "_", None)) or _is_op(getattr(aotjax.Tensor, n + "_", None)))
        family = FAMILIES.get(name) or Family(name)
        title = family.title + (" (`F.`)" if functional is not None else "")
        if names:  # a module of internals (no user op) has no row
            rows.append(Row(title, namespace, _tokens(names, inplace), family.note))
    # An in-place form shown as `x(_)` in one row is not listed again in another (`cumsum_` beside `cumsum(_)`).
    folded = {t[:-3] for r in rows for t in r.tokens if t.endswith("(_)")}
    return [Row(r.title, r.namespace, tuple(t for t in r.tokens if not (t.endswith("_") and t[:-1] in folded)),
                r.note) for r in rows]


def namespace_rows(paths: dict[str, str]) -> list[Row]:
    """One row per existing module of `paths`, its `__all__` (or public names) that are ops."""
    rows = []
    for path, note in paths.items():
        try:
            module = resolve(path)
        except AttributeError:
            continue
        names = _ops_of(path, list(getattr(module, "__all__", None) or sorted(vars(module))))
        rows.append(Row(f"`{path}`", path, _tokens(names, lambda n, ns=module: _is_op(getattr(ns, n + "_", None))),
                        note))
    return rows


def tensor_row(listed: list[Row]) -> Row:
    """The Tensor methods and properties that no function row already names."""
    covered = {n for r in listed for t in r.tokens for n in expand(t)
               if r.namespace == "aotjax" or getattr(resolve(r.namespace), n, None) is getattr(aotjax.Tensor, n, 0)}
    names = [n for n in sorted(dir(aotjax.Tensor), key=lambda n: (n.lower(), n))
             if not n.startswith("_") and n not in covered and unsupported_error("Tensor", n) is None]
    present = set(names)
    return Row("Tensor methods and properties", "aotjax.Tensor",
               _tokens(names, lambda n: n + "_" in present),
               "beside the functions above that are also methods. `unfold` is a view (a write through overlapping "
               "windows raises); `H mH` of real tensors; `uniform_ normal_ cauchy_ ...` draw from the stateful "
               "generator")


def rows() -> list[Row]:
    """Every row of the table, in order."""
    ops_rows = family_rows() + namespace_rows(NAMESPACES)
    return ops_rows + [tensor_row(ops_rows)] + namespace_rows(LAYERS)


def defined_in(row: Row) -> str:
    """The modules whose code defines the row's names (`ops/linalg/solvers.py`), from each function's `__module__`;
    a folder when they are many (`nn/modules/`); for the Tensor row, how to ask for one name.

    >>> defined_in(Row("views", "aotjax", ("t", "unsqueeze(_)"), ""))
    '`aotjax/ops/shape/views.py`'
    """
    if row.namespace == "aotjax.Tensor":
        return "`python -m aotjax where Tensor.NAME`"
    ns = resolve(row.namespace)
    modules = []
    for name in (n for t in row.tokens for n in expand(t)):
        obj = getattr(ns, name, None) or getattr(aotjax.Tensor, name, None)  # NOTE: some `x_` are methods only
        module = getattr(inspect.unwrap(obj), "__module__", None) or ""
        if module.startswith("aotjax.") and module not in modules:
            modules.append(module)
    paths = [_source_path(m) for m in modules]
    if len(paths) > 3:
        folders = list(dict.fromkeys(p.rsplit("/", 1)[0] + "/" if p.count("/") > 1 else p for p in paths))
        paths = folders if len(folders) <= 3 else ["many; `python -m aotjax where NAME`"]
    return " ".join(f"`{p}`" for p in paths)


def _source_path(module: str) -> str:
    """`aotjax/amp/__init__.py` for a package, `aotjax/cuda.py` for a module."""
    path = getattr(sys.modules.get(module), "__file__", "") or ""
    return "/".join(module.split(".")) + ("/__init__.py" if path.endswith("__init__.py") else ".py")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    """The README block between the markers (markers included), as the package is now."""
    lines = [START, "<!-- generated by `python -m aotjax ops --write` from the op registry: edit aotjax/cli/optable.py "
             "(titles, notes) or the ops, not this block -->", "",
             "Names are `aotjax.X` functions (most also Tensor methods, as in torch) unless the row says otherwise; "
             "`F.` is `aotjax.nn.functional`. `add(_)` is `add` and its in-place `add_`; `conv1d/2d/3d` is `conv1d "
             "conv2d conv3d`. `python -m aotjax where NAME` says where any name is defined (`where Tensor.add_`).", "",
             "| family | ops | defined in | notes |", "|---|---|---|---|"]
    lines += [f"| {r.title} | `{' '.join(r.tokens)}` | {defined_in(r)} | {_cell(r.note)} |" for r in rows()]
    lines += ["", "**Deliberately unsupported.** Looking these up raises `UnsupportedOpError` (an `AttributeError`) "
              "that says why and what to use instead:", "", "| | ops | why | instead |", "|---|---|---|---|"]
    for u in UNSUPPORTED:
        names = [f"`aotjax.{n}`" for n in u.functions] + [f"`Tensor.{n}`" for n in u.methods]
        lines.append(f"| {u.topic} | {' '.join(names)} | {_cell(u.why)} | {_cell(u.instead)} |")
    lines += ["", "**Eager only.**"]
    lines += [f"- {title}: " + (f"`{' '.join(names)}` " if names else "") + f"{text}."
              for title, names, text in EAGER_ONLY]
    return "\n".join(lines + [END])


def replace_block(text: str, block: str) -> str:
    """`text` with the part between the optable markers (markers included) replaced by `block`."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"ops: the README has no {START} ... {END} block to rewrite; add the two markers where "
                         "the table goes")
    return text[:start] + block + text[end + len(END):]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the table in the README")
    mode.add_argument("--check", action="store_true", help="exit 1 if the README's table is out of date")
    parser.add_argument("--readme", type=Path, default=README, help="the README to write or check")


def run(args: argparse.Namespace) -> int:
    block = render()
    if not (args.write or args.check):
        print(block)
        return 0
    text = args.readme.read_text()
    new = replace_block(text, block)
    if args.check:
        if new != text:
            print(f"{args.readme}: the op table is out of date; run `python -m aotjax ops --write`", file=sys.stderr)
            return 1
        return 0
    args.readme.write_text(new)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m aotjax.cli.optable [--write | --check]`; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m aotjax.cli.optable", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
