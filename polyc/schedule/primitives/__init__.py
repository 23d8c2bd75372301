"""The schedule primitives, one module each (collected into `polyc.schedule.registry.PRIMITIVES`).

Each module declares `PRIMITIVE` (a `params.Primitive`: parameters with kinds, legality
obligations, targets) and implements it as a function of a schedule state returning a new, proven
state (`rewrite.finish`).  The machinery they share (naming, rewriting the time space, re-proving)
is in `polyc.schedule.rewrite`; the scalar-dimension helpers of fuse / distribute / peel are in
`polyc.schedule.nesting`.

Naming rules (loops are addressed by these names afterwards):

- `tile(i=32, j=32)` and `split("i", 32)`: the loop `i` becomes the tile loop `i_outer`
  (`floor(i / 32)`) and the point loop `i_inner` (the original values of `i`, so statement
  subscripts read unchanged).  Parallel and block kinds go to the tile loop; vector, thread and
  unrolling stay on the point loop.
- `interchange`, `reorder`, `skew`, `reverse`, `shift` keep loop names.
- `unroll_and_jam("i", 4)` splits `i` into `i_outer` and `i_inner`, moves `i_inner` innermost and
  unrolls it fully.
"""
