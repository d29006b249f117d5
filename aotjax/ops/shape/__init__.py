"""Shapes: the view primitives, each with its inverse and strides (`views`), the copy primitive (`clone`), the shape
ops that make new values (`copies`: cat, stack, flip, roll, repeat, tril) and the compositions of both
(`arrangement`: splits, stacks, flips, broadcasting, the `*_copy` forms)."""
