"""The core: IR, primitives, the interpreter stack, the printer and the type checker. Knows no op."""
from aotjax.core.avals import ShapedArray, canonicalize_dtype, dtype_short_name, get_aval
from aotjax.core.errors import AliasingError, AotjaxError, ConcretizationError, DTypeError, ShapeError, UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import MainTrace, Trace, Tracer, bind, full_raise, new_main
from aotjax.core.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, dce, dce_jaxpr
from aotjax.core.pretty import pp_jaxpr  # noqa: F401  (installs Jaxpr.pretty and ClosedJaxpr.pretty)
from aotjax.core.primitive import Kind, Primitive, abstract_eval, all_primitives
from aotjax.core.source_info import SourceInfo, user_source_info, where
from aotjax.core.typecheck import JaxprTypeError, typecheck, typecheck_enabled
from aotjax.core.views import Chain, ViewStep, apply_chain, write_through
