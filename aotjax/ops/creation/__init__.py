"""Creation ops: `zeros ones full arange linspace eye`, their `_like` forms, `empty`, `Tensor.new_*`, `logspace`,
the triangle indices, placement (`device_put`)."""
