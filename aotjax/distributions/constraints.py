"""Constraints: the sets a distribution's parameters (`arg_constraints`) and values (`support`) live in, as
`torch.distributions.constraints`. `constraint.check(value)` is a bool tensor, True where `value` lies in the set;
a constraint with `event_dim` n judges the n rightmost dims together (a simplex is a vector: one bool per vector).

>>> from aotjax.distributions import constraints
>>> constraints.positive.check(aotjax.tensor([1.0, 0.0]))
tensor([ True, False])
>>> constraints.simplex.check(aotjax.tensor([0.25, 0.75]))
tensor(True)
"""
from __future__ import annotations

__all__ = ["Constraint", "boolean", "dependent", "dependent_property", "greater_than", "greater_than_eq",
           "half_open_interval", "independent", "integer_interval", "interval", "is_dependent", "less_than",
           "nonnegative", "nonnegative_integer", "one_hot", "positive", "positive_integer", "real", "real_vector",
           "simplex", "unit_interval"]


class Constraint:
    """A set of values. `is_discrete`: it holds integers only; `event_dim`: how many rightmost dims make one
    element of the set."""
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError(f"{type(self).__name__}.check is not implemented: a Constraint subclass defines "
                                  f"check(value), a bool tensor True where value lies in the set")

    def __repr__(self) -> str:
        return f"{type(self).__name__.lstrip('_')}()"


class _Dependent(Constraint):
    """A placeholder for a constraint that depends on other parameters (Uniform's `low` < `high`): not checked."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete, self._event_dim = is_discrete, event_dim

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically for a dependent constraint")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically for a dependent constraint")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented) -> "_Dependent":
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, value):
        raise ValueError("a dependent constraint cannot be checked on its own: it depends on other parameters")


def is_dependent(constraint) -> bool:
    """Whether `constraint` is a dependent placeholder (left unchecked)."""
    return isinstance(constraint, _Dependent)


class dependent_property(property):
    """A property whose value is a constraint computed from the distribution's parameters (Uniform's `support`)."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        super().__init__(fn)
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, fn) -> "dependent_property":
        return dependent_property(fn, is_discrete=self.is_discrete, event_dim=self.event_dim)


class _IndependentConstraint(Constraint):
    """`base` applied elementwise, its `reinterpreted_batch_ndims` rightmost dims judged together (all must hold)."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int):
        self.base_constraint, self.reinterpreted_batch_ndims = base_constraint, int(reinterpreted_batch_ndims)

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result, n = self.base_constraint.check(value), self.reinterpreted_batch_ndims
        if n == 0:
            return result
        if result.ndim < n:
            raise ValueError(f"IndependentConstraint.check: expected a value of at least {self.event_dim} dims, "
                             f"got shape {tuple(value.shape)}")
        return result.reshape(tuple(result.shape[:result.ndim - n]) + (-1,)).all(-1)

    def __repr__(self) -> str:
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _Real(Constraint):
    def check(self, value):
        return value == value  # NOTE: False only at NaN


class _Bounded(Constraint):
    """The base of the bounded sets: the bounds (numbers or tensors), printed by name."""
    _bounds: tuple[str, ...] = ()

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={getattr(self, name)}" for name in self._bounds)
        return f"{type(self).__name__.lstrip('_')}({args})"


class _GreaterThan(_Bounded):
    _bounds = ("lower_bound",)

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return value > self.lower_bound


class _GreaterThanEq(_GreaterThan):
    def check(self, value):
        return value >= self.lower_bound


class _LessThan(_Bounded):
    _bounds = ("upper_bound",)

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound


class _Interval(_Bounded):
    """The closed interval [lower_bound, upper_bound]."""
    _bounds = ("lower_bound", "upper_bound")

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value >= self.lower_bound) & (value <= self.upper_bound)


class _HalfOpenInterval(_Interval):
    """The interval [lower_bound, upper_bound)."""

    def check(self, value):
        return (value >= self.lower_bound) & (value < self.upper_bound)


class _IntegerInterval(_Interval):
    """The integers in [lower_bound, upper_bound] (a float tensor holding whole numbers passes)."""
    is_discrete = True

    def check(self, value):
        return (value % 1 == 0) & super().check(value)


class _IntegerGreaterThan(_GreaterThanEq):
    """The integers >= lower_bound."""
    is_discrete = True

    def check(self, value):
        return (value % 1 == 0) & super().check(value)


class _Simplex(Constraint):
    """Vectors of nonnegative entries summing to one (within 1e-6)."""
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


dependent = _Dependent()
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
real = _Real()
real_vector = _IndependentConstraint(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
interval = _Interval
half_open_interval = _HalfOpenInterval
unit_interval = _Interval(0.0, 1.0)
integer_interval = _IntegerInterval
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
simplex = _Simplex()
