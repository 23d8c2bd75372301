"""Loop kernels that define their outputs by accumulation (module-level: loop kernels need a file)."""
import polyc as pc


@pc.kernel
def column_sum_of_squares(X: pc.f64["M", "N"], c: pc.f64["N"]):
    for j in range(N):
        c[j] = 0.0
    for i in range(M):
        for j in range(N):
            c[j] += X[i, j] * X[i, j]


@pc.kernel
def running_total(X: pc.f64["M", "N"], c: pc.f64["N"]):
    for i in range(M):
        for j in range(N):
            c[j] += X[i, j]      # adds to what c held before the call: an update in place
