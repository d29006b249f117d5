"""User-facing transforms, each built from interpreters."""
from aotjax.transforms.functionalize import functionalize
from aotjax.transforms.jit import jit
from aotjax.transforms.make_jaxpr import make_jaxpr
