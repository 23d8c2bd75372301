"""Loop kernels for the tuning tests, defined the README's way: `@pc.kernel` on module-level
functions of an importable module (the decorator rebinds each name to its Kernel)."""
import polyc as pc


@pc.kernel
def double(A: pc.f64["N"], O: pc.f64["N"]):
    for i in range(N):
        O[i] = A[i] * 2.0


def _triple(A: pc.f64["N"], O: pc.f64["N"]):
    for i in range(N):
        O[i] = A[i] * 3.0


triple = pc.kernel(_triple)


def script_like(A: pc.f64["N"], O: pc.f64["N"]):
    """Made into a kernel by a test that pretends it was defined in the script being run."""
    for i in range(N):
        O[i] = A[i] + 1.0
