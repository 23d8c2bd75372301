"""Operator programs: `@pc.program` functions that call kernels, traced into one polyhedral program,
fused, contracted and memory-planned (see `polyc.program.program`)."""
