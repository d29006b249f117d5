"""The floor every op family stands on, importing no family: PyTorch's type promotion (`promotion`), output
layouts (`layout`), the combinators that make a primitive cost a few lines (`combinators`, `from_jax`), the argument
helpers and `bind_inplace` (`frontend`), the cast primitive (`casts`) and tensors from data (`data`)."""
