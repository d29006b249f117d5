"""The recurrent layers `RNN`, `LSTM`, `GRU` and their single steps `RNNCell`, `LSTMCell`, `GRUCell`, as
`torch.nn`'s: the same constructors, parameter names and shapes, gate order and equations, so a torch model's
`state_dict` loads and gives the same outputs.

A layer's time loop is one `aotjax.lax.scan` per layer and direction (the reverse direction is `reverse=True`):
eagerly, under `jit` and under `grad` the program holds one step, whatever the sequence length. The input
projection `x @ W_ih.T + b_ih` of every step is one matmul before the loop; the loop body is the cell's step, the
same function the `*Cell` modules call. Variable lengths (a `PackedSequence`) run as a padded time-major batch and a
mask: past its end a sequence's state stays put, so its final state is the one at its own last step, in either
direction.
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from aotjax.core.errors import ConcretizationError, ShapeError
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import user_stacklevel, where
from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.parameter import Parameter
from aotjax.nn.utils.rnn import PackedSequence
from aotjax.ops.base.data import as_tensor
from aotjax.ops.control_flow.scan import scan
from aotjax.ops.creation.factories import empty, zeros
from aotjax.ops.linalg.matmul import linear
from aotjax.ops.math.elementwise import where as select
from aotjax.ops.nn.normalization import dropout
from aotjax.ops.shape.copies import cat, stack

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# -- the steps: (input projection gx, state tuple, recurrent weights) -> new state tuple; output is state[0] --------
def _tanh_step(gx, state, w_hh, b_hh, w_hr=None):
    return ((gx + linear(state[0], w_hh, b_hh)).tanh(),)


def _relu_step(gx, state, w_hh, b_hh, w_hr=None):
    return ((gx + linear(state[0], w_hh, b_hh)).relu(),)


def _lstm_step(gx, state, w_hh, b_hh, w_hr=None):
    h, c = state
    i, f, g, o = (gx + linear(h, w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return (h if w_hr is None else linear(h, w_hr), c)


def _gru_step(gx, state, w_hh, b_hh, w_hr=None):
    # NOTE: b_hn sits inside the reset gate's product, `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`
    h = state[0]
    xr, xz, xn = gx.chunk(3, -1)
    hr, hz, hn = linear(h, w_hh, b_hh).chunk(3, -1)
    r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return ((1 - z) * n + z * h,)


_STEPS = {"RNN_TANH": _tanh_step, "RNN_RELU": _relu_step, "LSTM": _lstm_step, "GRU": _gru_step}
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_NAMES = {"RNN_TANH": "RNN", "RNN_RELU": "RNN", "LSTM": "LSTM", "GRU": "GRU"}


def _rnn_mode(nonlinearity: str, op: str) -> str:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{op}: unknown nonlinearity {nonlinearity!r}; select from 'tanh' or 'relu'")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


def _run_direction(step, gx, state: tuple, weights: tuple, mask, reverse: bool):
    """One layer in one direction over the time-major input projection `gx` `[L, N, G]`, as one `scan`: the final
    state tuple and the outputs `[L, N, H_out]`. With `mask` (`[L, N, 1]` bool), a step past a sequence's end keeps
    its state."""
    def body(carry, xs):
        g, m = xs
        new = step(g, carry, *weights)
        if m is not None:
            new = tuple(select(m, n, c) for n, c in zip(new, carry))
        return new, new[0]

    return scan(body, state, (gx, mask), reverse=reverse)


# -- packed sequences: run padded, time-major, with a mask of the valid steps ------------------------------------
def _padded(op: str, packed):
    """A packed sequence as its padded time-major batch `[T, B, *]` and the mask `[T, B, 1]` of valid steps (numpy),
    both in the packed (sorted) batch order."""
    batch_sizes = packed.batch_sizes
    if isinstance(batch_sizes, Tracer):
        raise ConcretizationError(
            f"{op}: a PackedSequence's batch_sizes set the loop's shapes, so they must be known when the function is "
            f"traced, but they are a traced tensor ({batch_sizes.aval.str_short()}){where()}. Pack from lengths "
            f"known at trace time (a Python list or an eager tensor), or pass a PackedSequence to the compiled "
            f"function (its batch_sizes stay static)")
    sizes = np.asarray(batch_sizes).astype(np.int64)
    steps, batch = len(sizes), int(sizes[0]) if len(sizes) else 0
    valid = np.arange(batch)[None, :] < sizes[:, None]  # [T, B]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rows = np.where(valid, offsets[:, None] + np.arange(batch)[None, :], 0).astype(np.int32)
    return packed.data[as_tensor(rows)], valid.reshape(steps, batch, 1)


def _repacked(packed, output, valid):
    """The padded output `[T, B, F]` packed as `packed` (time-major, the valid steps only)."""
    steps, batch, features = output.shape
    rows = np.flatnonzero(valid.reshape(-1)).astype(np.int32)
    data = output.reshape(steps * batch, features)[as_tensor(rows)]
    return PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)


def _check_options(op: str, mode: str, dropout, num_layers, hidden_size, proj_size) -> None:
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1:
        raise ValueError(f"{op}: dropout should be a number in range [0, 1] representing the probability of an "
                         f"element being zeroed, got {dropout!r}")
    if dropout > 0 and num_layers == 1:
        warnings.warn(f"{op}: dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                      f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                      stacklevel=user_stacklevel())
    if not isinstance(hidden_size, int) or hidden_size <= 0:
        raise ValueError(f"{op}: hidden_size must be an integer greater than zero, got {hidden_size!r}")
    if not isinstance(num_layers, int) or num_layers <= 0:
        raise ValueError(f"{op}: num_layers must be an integer greater than zero, got {num_layers!r}")
    if proj_size < 0:
        raise ValueError(f"{op}: proj_size should be a positive integer or zero to disable projections, got "
                         f"{proj_size}")
    if proj_size >= hidden_size:
        raise ValueError(f"{op}: proj_size has to be smaller than hidden_size, got proj_size={proj_size} and "
                         f"hidden_size={hidden_size}")
    if proj_size and mode != "LSTM":
        raise ValueError(f"{op}: proj_size argument is only supported for LSTM, not RNN or GRU")


class RNNBase(Module):
    """What `RNN`, `LSTM` and `GRU` share: parameters `weight_ih_l{k}`, `weight_hh_l{k}`, `bias_ih_l{k}`,
    `bias_hh_l{k}` (and `weight_hr_l{k}` with an LSTM's `proj_size`), `_reverse` for the second direction, all drawn
    uniform on ±1/sqrt(hidden_size), as torch's; the forward of every layer and direction as one `scan`. `mode` is
    torch's: `'RNN_TANH'`, `'RNN_RELU'`, `'LSTM'` or `'GRU'`.

    >>> aotjax.nn.modules.rnn.RNNBase("GRU", 2, 3).weight_ih_l0.shape
    (9, 2)
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__()
        op = _NAMES.get(mode)
        if op is None:
            raise ValueError(f"RNNBase: unknown mode {mode!r}; expected 'RNN_TANH', 'RNN_RELU', 'LSTM' or 'GRU'")
        _check_options(op, mode, dropout, num_layers, hidden_size, proj_size)
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        gates = _GATES[mode] * hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [("weight_ih", (gates, layer_input)), ("weight_hh", (gates, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                if proj_size > 0:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
                for name, shape in shapes:
                    self.register_parameter(name + suffix, Parameter(empty(*shape, dtype=dtype)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw every weight and bias anew, uniform on ±1/sqrt(hidden_size) (PyTorch's initialization)."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def flatten_parameters(self) -> None:
        """Nothing to do: the weights are not packed into one cuDNN buffer (kept for PyTorch code that calls it)."""

    @property
    def all_weights(self) -> list:
        """The parameters of each layer and direction, as lists in torch's order."""
        per = len(self._flat_weights_names) // (self.num_layers * (2 if self.bidirectional else 1))
        flat = [getattr(self, name) for name in self._flat_weights_names]
        return [flat[i:i + per] for i in range(0, len(flat), per)]

    def _weights(self, layer: int, direction: int) -> tuple:
        """`(w_ih, b_ih)` and the recurrent `(w_hh, b_hh, w_hr)` of one layer and direction (None where absent)."""
        suffix = f"_l{layer}" + ("_reverse" if direction else "")

        def get(name):
            return getattr(self, name + suffix, None)

        return (get("weight_ih"), get("bias_ih")), (get("weight_hh"), get("bias_hh"), get("weight_hr"))

    def _state_shapes(self, batch: int) -> list[tuple]:
        layers = self.num_layers * (2 if self.bidirectional else 1)
        shapes = [(layers, batch, self.proj_size or self.hidden_size)]
        return (shapes + [(layers, batch, self.hidden_size)]) if self.mode == "LSTM" else shapes

    def _initial_states(self, hx, batch: int, batched: bool, dtype, order) -> tuple:
        """The initial states as a tuple (`(h_0,)` or `(h_0, c_0)`), batched `[D * num_layers, N, H]`, in the order of
        the batch the loop runs (`order`: a packed sequence's sorted_indices, or None)."""
        op, shapes = _NAMES[self.mode], self._state_shapes(batch)
        if hx is None:
            return tuple(zeros(*shape, dtype=dtype) for shape in shapes)
        pair = isinstance(hx, (tuple, list))
        if pair != (self.mode == "LSTM") or (pair and len(hx) != 2):
            expected = "a pair of tensors (h_0, c_0)" if self.mode == "LSTM" else "one tensor h_0"
            got = f"a {type(hx).__name__} of {len(hx)}" if pair else f"a {type(hx).__name__}"
            raise TypeError(f"{op}: expected the initial state as {expected}, got {got}{where()}")
        states, names = (tuple(hx) if pair else (hx,)), ("h_0", "c_0")
        out = []
        for name, state, shape in zip(names, states, shapes):
            if state.ndim != (3 if batched else 2):
                raise ShapeError(f"{op}: for {'batched 3-D' if batched else 'unbatched 2-D'} input, {name} should "
                                 f"also be {3 if batched else 2}-D, but got a {state.ndim}-D tensor{where()}")
            state = state if batched else state.unsqueeze(1)
            if tuple(state.shape) != shape:
                expected = list(shape) if batched else [shape[0], shape[2]]
                got = list(state.shape) if batched else [state.shape[0], state.shape[2]]
                raise ShapeError(f"{op}: expected {name} of shape {expected}, got {got}{where()}")
            out.append(state if order is None else state.index_select(1, order))
        return tuple(out)

    def _time_major(self, input):
        """The input as `[L, N, H_in]`, whether it was batched, and the mask of valid steps (None unless packed)."""
        op = _NAMES[self.mode]
        data = input.data if isinstance(input, PackedSequence) else input
        if data.ndim not in (2, 3) or (data is not input and data.ndim != 2):
            raise ShapeError(f"{op}: expected input to be 2-D (unbatched [L, H_in], or a PackedSequence's data) or "
                             f"3-D (batched), got {data.ndim}-D of shape {list(data.shape)}{where()}")
        if data.shape[-1] != self.input_size:
            raise ShapeError(f"{op}: input.size(-1) must be equal to input_size; expected {self.input_size}, got "
                             f"{data.shape[-1]}{where()}")
        if data is not input:
            x, mask = _padded(op, input)
            return x, True, mask
        if input.ndim == 2:
            return input.unsqueeze(1), False, None
        return (input.transpose(0, 1) if self.batch_first else input), True, None

    def _run(self, input, hx):
        """The forward shared by RNN, LSTM and GRU: the output (a PackedSequence for one) and the final state tuple,
        in the input's layout."""
        packed = isinstance(input, PackedSequence)
        x, batched, valid = self._time_major(input)
        order = input.sorted_indices if packed else None
        states = self._initial_states(hx, x.shape[1], batched, x.dtype, order)
        mask = None if valid is None else as_tensor(valid)
        step, directions, finals = _STEPS[self.mode], 2 if self.bidirectional else 1, []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                (w_ih, b_ih), recurrent = self._weights(layer, direction)
                k = layer * directions + direction
                final, ys = _run_direction(step, linear(x, w_ih, b_ih), tuple(s[k] for s in states), recurrent,
                                           mask, reverse=direction == 1)
                outputs.append(ys)
                finals.append(final)
            x = outputs[0] if directions == 1 else cat(outputs, -1)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                x = dropout(x, self.dropout, True)
        final = tuple(stack([f[i] for f in finals]) for i in range(len(states)))
        if packed:
            if input.unsorted_indices is not None:
                final = tuple(s.index_select(1, input.unsorted_indices) for s in final)
            return _repacked(input, x, valid), final
        if not batched:
            return x.squeeze(1), tuple(s.squeeze(1) for s in final)
        return (x.transpose(0, 1) if self.batch_first else x), final

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """An Elman RNN, `h_t = nonlinearity(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)` with `nonlinearity` `'tanh'`
    or `'relu'`, stacked `num_layers` deep (each layer after the first reads the one below, through `dropout` in
    training) and run both ways with `bidirectional`, as `torch.nn.RNN`. `forward(input, h_0=None)` takes `[L, N,
    H_in]` (`[N, L, H_in]` with `batch_first`), unbatched `[L, H_in]` or a `PackedSequence`, and `h_0` of shape
    `[D * num_layers, N, H_out]` (zeros by default); returns the last layer's outputs `[L, N, D * H_out]` and the
    final states `h_n`. Each layer and direction runs as one `aotjax.lax.scan`.

    >>> rnn = aotjax.nn.RNN(4, 8, num_layers=2, nonlinearity="relu", bidirectional=True)
    >>> out, h_n = rnn(aotjax.ones(5, 3, 4))
    >>> out.shape, h_n.shape
    ((5, 3, 16), (4, 3, 8))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None):
        super().__init__(_rnn_mode(nonlinearity, "RNN"), input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        output, (h_n,) = self._run(input, hx)
        return output, h_n


class LSTM(RNNBase):
    """A long short-term memory RNN, as `torch.nn.LSTM`: gates `i, f, g, o` (in that order in the weights' rows),
    `c_t = f * c_{t-1} + i * g`, `h_t = o * tanh(c_t)`, projected by `weight_hr` to `proj_size` features when
    `proj_size > 0`. `forward(input, (h_0, c_0)=None)`: the input as for `RNN`; `h_0` `[D * num_layers, N, H_out]`
    (`H_out` is `proj_size` or `hidden_size`), `c_0` `[D * num_layers, N, hidden_size]`; returns the outputs
    `[L, N, D * H_out]` and `(h_n, c_n)`. Each layer and direction runs as one `aotjax.lax.scan`.

    >>> lstm = aotjax.nn.LSTM(4, 8, num_layers=2, batch_first=True, proj_size=3)
    >>> out, (h_n, c_n) = lstm(aotjax.ones(2, 5, 4))
    >>> out.shape, h_n.shape, c_n.shape
    ((2, 5, 3), (2, 2, 3), (2, 2, 8))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        output, (h_n, c_n) = self._run(input, hx)
        return output, (h_n, c_n)


class GRU(RNNBase):
    """A gated recurrent unit RNN, as `torch.nn.GRU`: gates `r, z, n` (in that order in the weights' rows),
    `n_t = tanh(W_in x_t + b_in + r * (W_hn h_{t-1} + b_hn))`, `h_t = (1 - z) * n_t + z * h_{t-1}`.
    `forward(input, h_0=None)` and its results as for `RNN`. Each layer and direction runs as one
    `aotjax.lax.scan`.

    >>> gru = aotjax.nn.GRU(4, 8)
    >>> out, h_n = gru(aotjax.ones(5, 4))
    >>> out.shape, h_n.shape
    ((5, 8), (1, 8))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)

    def forward(self, input, hx=None):
        output, (h_n,) = self._run(input, hx)
        return output, h_n


# -- the single steps ------------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """What the cells share: `weight_ih` `[gates * hidden_size, input_size]`, `weight_hh` `[gates * hidden_size,
    hidden_size]`, `bias_ih` and `bias_hh` `[gates * hidden_size]`, all uniform on ±1/sqrt(hidden_size), and one
    step on `[N, input_size]` or unbatched `[input_size]` input.

    >>> aotjax.nn.modules.rnn.RNNCellBase(2, 3, True, 4).weight_hh.shape
    (12, 3)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty(num_chunks * hidden_size, input_size, dtype=dtype))
        self.weight_hh = Parameter(empty(num_chunks * hidden_size, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, dtype=dtype))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw every weight and bias anew, uniform on ±1/sqrt(hidden_size) (PyTorch's initialization)."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def _step(self, step, input, hx, num_states: int):
        """`step` on `input` from the states `hx` (a tensor, or a tuple of `num_states`; zeros when None), in the
        input's layout: the new state tuple."""
        op = type(self).__name__
        if input.ndim not in (1, 2):
            raise ShapeError(f"{op}: expected input to be 1-D or 2-D, got {input.ndim}-D of shape "
                             f"{list(input.shape)}{where()}")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{op}: input has inconsistent input_size: got {input.shape[-1]}, expected "
                             f"{self.input_size}{where()}")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            states = tuple(zeros(x.shape[0], self.hidden_size, dtype=x.dtype) for _ in range(num_states))
        else:
            states = tuple(self._check_state(op, h, x.shape[0], batched)
                           for h in (hx if num_states > 1 else (hx,)))
        new = step(linear(x, self.weight_ih, self.bias_ih), states, self.weight_hh, self.bias_hh)
        return new if batched else tuple(s.squeeze(0) for s in new)

    def _check_state(self, op: str, h, batch: int, batched: bool):
        if h.ndim != (2 if batched else 1) or h.shape[-1] != self.hidden_size or (batched and h.shape[0] != batch):
            expected = [batch, self.hidden_size] if batched else [self.hidden_size]
            raise ShapeError(f"{op}: expected a hidden state of shape {expected}, got {list(h.shape)}{where()}")
        return h if batched else h.unsqueeze(0)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    """One step of an Elman RNN, `h' = nonlinearity(x W_ih^T + b_ih + h W_hh^T + b_hh)`, as `torch.nn.RNNCell`:
    `forward(input, hx=None)` with `input` `[N, input_size]` or `[input_size]`, `hx` `[N, hidden_size]` (zeros by
    default); returns `h'`.

    >>> cell = aotjax.nn.RNNCell(4, 8, nonlinearity="relu")
    >>> cell(aotjax.ones(3, 4)).shape, cell
    ((3, 8), RNNCell(4, 8, nonlinearity=relu))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh", device=None,
                 dtype=None):
        mode = _rnn_mode(nonlinearity, "RNNCell")
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)
        self.nonlinearity, self._mode = nonlinearity, mode

    def forward(self, input, hx=None):
        return self._step(_STEPS[self._mode], input, hx, 1)[0]


class LSTMCell(RNNCellBase):
    """One LSTM step, as `torch.nn.LSTMCell`: gates `i, f, g, o`, `c' = f * c + i * g`, `h' = o * tanh(c')`.
    `forward(input, (h, c)=None)`; returns `(h', c')`.

    >>> h, c = aotjax.nn.LSTMCell(4, 8)(aotjax.ones(4))
    >>> h.shape, c.shape
    ((8,), (8,))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._step(_lstm_step, input, hx, 2)


class GRUCell(RNNCellBase):
    """One GRU step, as `torch.nn.GRUCell`: gates `r, z, n`, `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`,
    `h' = (1 - z) * n + z * h`. `forward(input, hx=None)`; returns `h'`.

    >>> aotjax.nn.GRUCell(4, 8)(aotjax.ones(3, 4), aotjax.zeros(3, 8)).shape
    (3, 8)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._step(_gru_step, input, hx, 1)[0]
