"""Many devices: collectives over named axes (`collectives`), the `shard_map` primitive (`shard_map`) and
`with_sharding_constraint` (`sharding`)."""
