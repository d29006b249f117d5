"""Random numbers: explicit keys as `jax.random` (`keys`, exposed as `aotjax.random`), the stateful generator as
PyTorch's (`generator`), and the distributions drawn from it (`distributions`)."""
