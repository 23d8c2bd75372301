"""The legality obligations primitives declare (what `rewrite.finish` proves before returning)."""

ORDER = "every dependence stays lexicographically positive (rewrite.validate)"
KINDS_KEPT = "every loop running parallel, vectorized or on the GPU still carries no dependence"
NOT_CARRIED = "the loop carries no dependence (legality.check_parallel)"
REDUCTION_ONLY = "with reduction=True: the loop carries only a reduction's updates (is_reduction_dependence)"
ONE_TARGET = "a reassociated vector reduction updates one element for the whole loop"
INNERMOST = "the loop is the innermost loop of every statement it iterates"
SMALL_TRIP_COUNT = "a fully unrolled loop has a constant trip count of at most 1024"
INSTANCES_ONCE = "every statement instance still runs exactly once"
COEFFICIENTS = "schedule coefficients stay within +-2**32 (64-bit loop arithmetic)"
CONTRACTION = "the statement is a contraction whose updates keep their order per element"

COMMON = (ORDER, KINDS_KEPT, COEFFICIENTS)
