"""Control flow as higher-order primitives, each carrying its pure sub-programs in its params with a rule in
every interpreter: `scan` (`scan.py`), `cond`/`switch` (`cond.py`), `while_loop`/`fori_loop` (`while_loop.py`).
`_body.py` traces what they run, keeping PyTorch's eager meaning of in-place writes inside."""
from aotjax.ops.control_flow.cond import cond, cond_p, switch
from aotjax.ops.control_flow.scan import scan, scan_p
from aotjax.ops.control_flow.while_loop import fori_loop, while_loop, while_p

__all__ = ["scan", "scan_p", "cond", "switch", "cond_p", "while_loop", "fori_loop", "while_p"]
