"""User-facing transforms, each built from interpreters."""
from aotjax.transforms.make_jaxpr import make_jaxpr
