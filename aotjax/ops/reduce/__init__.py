"""Reductions: the reduction primitives (`reductions`: sum, prod, extrema, cumsum), statistics composed of them
(`statistics`), sorting, order statistics and scans (`sorting`), and torch.masked's reductions (`masked`)."""
