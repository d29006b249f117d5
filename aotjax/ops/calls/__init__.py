"""Primitives that call programs: compiled programs and aot's forward/backward pair (`compiled`), functions with
user-defined derivatives (`custom_derivatives`), and rematerialization (`remat`: checkpoint, checkpoint_name,
optimization_barrier)."""
