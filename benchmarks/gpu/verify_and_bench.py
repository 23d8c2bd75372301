"""Verify every library kernel on a real GPU (target "cuda") and time polyc against vendor code.

Run on a machine with an NVIDIA GPU, pycuda (see benchmarks/gpu/README.md) and PyTorch or CuPy:

    PYTHONPATH=/tmp/site:$PWD python3 benchmarks/gpu/verify_and_bench.py [--quick] [--only NAME ...]

Part 1 (verify): each kernel of `kernels.all_kernels()`, in each of its dtypes, at its "small"
(or PolyBench "MINI") sizes, compiled for "cuda" with the default mapping and compared with its
reference; numpy in, numpy out (the copy path), plus the device-array path for the Einstein kernels.

Part 2 (bench): median of interleaved runs (polyc, vendor, polyc, vendor, ...), timed with CUDA
events around device-resident arrays (no copies).  "polyc" replays a bound call (`f.bind(...)`:
arguments checked once, launches recorded); "full call" is `f(**arrays)` with its Python-side
checks, which matter for sub-millisecond kernels:
- fp32 matmul 4096^3 vs cuBLAS (torch.matmul with TF32 off, or cupy.matmul);
- softmax, layernorm, conv2d vs PyTorch;
- memory-bound kernels: effective bandwidth vs a device-to-device copy of the same bytes.
Ratios are vendor time / polyc time (1.0 = as fast as the vendor; higher is better).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import polyc as pc
import kernels

ROUNDS = 15


# -- part 1: verification --------------------------------------------------------------------------

def _close(got: Any, expected: Any, rtol: float, atol: float) -> Tuple[bool, float]:
    if isinstance(expected, dict):
        results = [_close(got[k], v, rtol, atol) for k, v in expected.items()]
        return all(r[0] for r in results), max((r[1] for r in results), default=0.0)
    if isinstance(expected, (tuple, list)):
        results = [_close(g, e, rtol, atol) for g, e in zip(got, expected)]
        return all(r[0] for r in results), max((r[1] for r in results), default=0.0)
    got, expected = np.asarray(got), np.asarray(expected)
    err = float(np.max(np.abs(got - expected))) if got.size else 0.0
    return bool(np.allclose(got, expected, rtol=rtol, atol=atol)), err


def verify(only: Optional[List[str]]) -> int:
    print(f"{'kernel':<16} {'dtype':<5} {'result':<8} {'max err':>10} {'compile+run s':>14}")
    failures = 0
    for lk in kernels.all_kernels():
        if only and lk.name not in only:
            continue
        sizes = lk.sizes.get("small") or lk.sizes.get("MINI")
        for dt in lk.dtypes:
            start = time.perf_counter()
            try:
                inputs = lk.make_inputs(sizes, dt, np.random.default_rng(0))
                expected = lk.expected(inputs)
                f = pc.compile(lk.kernel, target="cuda")
                got = f(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()})
                ok, err = _close(got, expected, *lk.tol(dt))
                status = "ok" if ok else "WRONG"
            except Exception as e:  # noqa: BLE001 - report and go on
                ok, err, status = False, float("nan"), "ERROR"
                print(f"  {lk.name} {dt}: {type(e).__name__}: {str(e)[:400]}")
            failures += not ok
            print(f"{lk.name:<16} {dt:<5} {status:<8} {err:>10.2e} {time.perf_counter() - start:>14.2f}")
    print(f"verification: {failures} failure(s)")
    return failures


# -- part 2: benchmarks ----------------------------------------------------------------------------

class Timer:
    """CUDA-event timing of a callable on device-resident data (torch or cupy events)."""

    def __init__(self, backend: str):
        self.backend = backend
        if backend == "torch":
            import torch
            self.torch = torch
        else:
            import cupy
            self.cupy = cupy

    def time_ms(self, fn: Callable[[], Any], repeat: int = 1) -> float:
        if self.backend == "torch":
            t = self.torch
            a, b = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
            t.cuda.synchronize()
            a.record()
            for _ in range(repeat):
                fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) / repeat
        cp = self.cupy
        a, b = cp.cuda.Event(), cp.cuda.Event()
        cp.cuda.Device().synchronize()
        a.record()
        for _ in range(repeat):
            fn()
        b.record()
        b.synchronize()
        return cp.cuda.get_elapsed_time(a, b) / repeat


def interleaved(timer: Timer, contenders: Dict[str, Callable[[], Any]], rounds: int = ROUNDS,
                repeat: int = 3) -> Dict[str, float]:
    """Median milliseconds per call of each contender, measured round-robin."""
    for fn in contenders.values():      # warm-up (compilation, caches)
        fn()
    samples: Dict[str, List[float]] = {k: [] for k in contenders}
    names = list(contenders)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            samples[name].append(timer.time_ms(contenders[name], repeat))
    return {k: statistics.median(v) for k, v in samples.items()}


def _device_arrays(backend: str, arrays: Dict[str, np.ndarray]) -> Dict[str, Any]:
    if backend == "torch":
        import torch
        return {k: torch.from_numpy(np.ascontiguousarray(v)).cuda() for k, v in arrays.items()}
    import cupy
    return {k: cupy.asarray(v) for k, v in arrays.items()}


def _row(name: str, polyc_ms: float, ref_name: str, ref_ms: float, extra: str = "") -> None:
    print(f"{name:<28} polyc {polyc_ms:9.3f} ms   {ref_name:<16} {ref_ms:9.3f} ms   ratio {ref_ms / polyc_ms:6.3f}  {extra}")


def bench(backend: str, quick: bool) -> None:
    timer = Timer(backend)
    rng = np.random.default_rng(0)
    if backend == "torch":
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        F = torch.nn.functional

    # fp32 matmul vs cuBLAS.
    n = 1024 if quick else 4096
    mm = kernels.by_name("matmul").kernel
    f = pc.compile(mm, target="cuda")
    dev = _device_arrays(backend, {"A": rng.random((n, n), dtype=np.float32),
                                   "B": rng.random((n, n), dtype=np.float32),
                                   "C": np.zeros((n, n), np.float32)})
    if backend == "torch":
        vendor = lambda: torch.matmul(dev["A"], dev["B"], out=dev["C"])  # noqa: E731
    else:
        import cupy
        vendor = lambda: cupy.matmul(dev["A"], dev["B"], out=dev["C"])  # noqa: E731
    out = f(**dev)
    ref = (dev["A"] @ dev["B"])
    err = float(abs(out - ref).max())
    t = interleaved(timer, {"polyc": f.bind(**dev), "call": lambda: f(**dev), "cublas": vendor})
    _row(f"matmul f32 {n}^3", t["polyc"], "cuBLAS", t["cublas"],
         f"{2 * n ** 3 / t['polyc'] / 1e9:.1f} TFLOP/s, max err {err:.1e}, full call {t['call']:.3f} ms")

    if backend != "torch":
        print("(softmax/layernorm/conv2d comparisons need PyTorch)")
        return
    specs = [("softmax", {"I": 8192, "J": 2048}, lambda d: torch.softmax(d["X"], dim=1)),
             ("layernorm", {"M": 8192, "N": 2048},
              lambda d: F.layer_norm(d["X"], (d["X"].shape[1],), d["gamma"], d["beta"], 1e-5)),
             ("conv2d", {"N": 8, "C": 64, "H": 58, "W": 58, "F": 64, "KH": 3, "KW": 3},
              lambda d: F.conv2d(d["X"], d["K"]))]
    for name, sizes, torch_fn in specs:
        if quick:
            sizes = {k: max(1, v // 4) if v > 8 else v for k, v in sizes.items()}
        lk = kernels.by_name(name)
        inputs = lk.make_inputs(sizes, "f32", rng)
        arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
        scalars = {k: v for k, v in inputs.items() if not isinstance(v, np.ndarray)}
        d = _device_arrays(backend, arrays)
        f = pc.compile(lk.kernel, target="cuda")
        got = f(**d, **scalars)
        want = torch_fn(d)
        err = float((torch.as_tensor(got, device="cuda") - want).abs().max()) if hasattr(got, "shape") else float("nan")
        t = interleaved(timer, {"polyc": f.bind(**d, **scalars), "call": lambda: f(**d, **scalars),
                                "torch": lambda: torch_fn(d)})
        _row(f"{name} f32 {sizes}", t["polyc"], "PyTorch", t["torch"],
             f"max err {err:.1e}, full call {t['call']:.3f} ms")

    # Memory-bound kernels: bytes moved (inputs read once + outputs written once) per second,
    # against a device-to-device copy of the same number of bytes.
    print()
    for name in ("bias_relu", "transpose", "softmax", "layernorm", "avgpool2d", "jacobi-2d"):
        lk = kernels.by_name(name)
        sizes = lk.sizes.get("bench") or lk.sizes.get("LARGE")
        if quick:
            sizes = {k: max(2, v // 4) if v > 8 else v for k, v in sizes.items()}
        dt = "f32" if "f32" in lk.dtypes else lk.dtypes[0]
        inputs = lk.make_inputs(sizes, dt, rng)
        arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
        scalars = {k: v for k, v in inputs.items() if not isinstance(v, np.ndarray)}
        d = _device_arrays(backend, arrays)
        f = pc.compile(lk.kernel, target="cuda")
        got = f(**d, **scalars)
        outs = got.values() if isinstance(got, dict) else [got]
        nbytes = sum(v.nbytes for v in arrays.values()) + sum(
            int(np.prod(o.shape)) * arrays[next(iter(arrays))].itemsize for o in outs if o is not None and hasattr(o, "shape")
            and not any(o is v for v in d.values()))
        if name == "jacobi-2d":     # TSTEPS x two sweeps, each reading one N x N array and writing another
            nbytes = sizes["TSTEPS"] * 2 * 2 * arrays["A"].nbytes
        src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
        dst = torch.empty_like(src)
        t = interleaved(timer, {"polyc": f.bind(**d, **scalars), "copy": lambda: dst.copy_(src)})
        _row(f"{name} {dt} (mem-bound)", t["polyc"], "d2d copy", t["copy"],
             f"{nbytes / t['polyc'] / 1e6:.0f} GB/s vs copy {nbytes / t['copy'] / 1e6:.0f} GB/s")


def bench_programs(quick: bool, compiled: bool) -> None:
    """Operator programs (`kernels.programs`) on target "cuda" with device inputs (PyTorch CUDA
    tensors; intermediates in device buffers from the memory plan), against PyTorch eager and,
    with `compiled`, `torch.compile` on the same tensors.  TF32 off (set by `bench`)."""
    import torch
    from benchmarks import programs as BP
    from kernels import programs as P
    timer = Timer("torch")
    sizes = {"attention": dict(S=4096, D=64), "mlp": dict(B=4096, D=1024, H=4096),
             "ln_residual_gelu": dict(M=8192, N=1024)}
    print()
    for name, sz in sizes.items():
        if quick:
            sz = {k: max(8, v // 4) for k, v in sz.items()}
        prog = getattr(P, name)(target="cuda")
        host = P.inputs(prog, sz)
        dev = {k: torch.from_numpy(v).cuda() for k, v in host.items()}
        fn = BP._torch_fn(name)
        out = prog(**dev)
        want = fn(**dev)
        err = float((torch.as_tensor(out.get(), device="cuda") - want).abs().max())
        contenders = {"polyc": lambda: prog(**dev), "torch": lambda: fn(**dev)}
        if compiled:
            cfn = torch.compile(fn)
            cfn(**dev)
            contenders["torch.compile"] = lambda: cfn(**dev)
        t = interleaved(timer, contenders, rounds=7, repeat=2)
        extra = f"  torch.compile {t['torch.compile']:.3f} ms ({t['torch.compile'] / t['polyc']:.2f}x)" if compiled else ""
        print(f"program {name:<18} polyc {t['polyc']:8.3f} ms   PyTorch {t['torch']:8.3f} ms "
              f"({t['torch'] / t['polyc']:.2f}x){extra}  max err {err:.1e}; {prog.memory.summary()}")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller benchmark sizes")
    p.add_argument("--only", nargs="*", help="verify only these kernels")
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--no-bench", action="store_true")
    p.add_argument("--programs", action="store_true", help="also time the operator programs (needs PyTorch)")
    p.add_argument("--compile", action="store_true", help="with --programs: torch.compile as a contender")
    args = p.parse_args(argv)
    import pycuda.autoprimaryctx  # noqa: F401
    import pycuda.driver as drv
    dev = drv.Context.get_device()
    print(f"device: {dev.name()} (sm_{''.join(map(str, dev.compute_capability()))})")
    failures = 0 if args.no_verify else verify(args.only)
    if not args.no_bench:
        backend = None
        try:
            import torch  # noqa: F401
            backend = "torch" if torch.cuda.is_available() else None
        except ImportError:
            pass
        if backend is None:
            try:
                import cupy  # noqa: F401
                backend = "cupy"
            except ImportError:
                print("no PyTorch or CuPy: skipping benchmarks")
        if backend:
            try:
                bench(backend, args.quick)
            except Exception:  # noqa: BLE001
                traceback.print_exc()
                failures += 1
    if args.programs:
        try:
            bench_programs(args.quick, args.compile)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
