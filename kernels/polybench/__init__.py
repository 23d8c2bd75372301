"""PolyBench/C 4.2 as polyc affine-Python kernels.

The thirty kernels are written from their mathematical definitions as affine loop nests, grouped
the way PolyBench groups them: `blas`, `linear_algebra` (PolyBench's "kernels"), `solvers`,
`datamining`, `stencils` and `medley`.  Each module exposes `KERNELS` (see `kernels.LibraryKernel`)
with the five PolyBench dataset presets, MINI ... EXTRALARGE.
"""
