"""Elementwise math: PyTorch's dtype classes of the elementwise ops (`dtype_classes`); the arithmetic, comparison,
selection and unary primitives with torch's promotion (`elementwise`); the named functions built on them
(`functions`: inverse trigonometric, rounding, predicates, the special functions torch has at its top level);
`torch.special`'s polynomials and Bessel functions (`special`); and complex numbers (`complex`: `real`, `imag`,
`conj` are views)."""
