"""Testing aids for kernels (also for users' own kernel unit tests).

- `interpret` runs a kernel as written (the oracle behind `kernel.reference`);
- `check_kernel` compares a compiled kernel (any schedule, any target) against it on random inputs;
- `check_proven` proves a schedule again: legal, and every parallel or vector mark carries nothing;
- `fuzz_schedules` applies random primitive sequences: each is refused as illegal or must match;
- `fuzz_kernels` (`polyc.testing.kernel_fuzz`) generates random *kernels* (Einstein and loops)
  and runs each under a random legal schedule on "c" or "cuda-emu" against the reference;
- `check_grad` compares a `pc.grad` kernel against central finite differences in random directions.
"""
from .gradcheck import check_grad  # noqa: F401
from ..runtime.interpreter import interpret

try:  # written alongside the schedule primitives
    from .check import check_kernel, check_proven, random_inputs  # noqa: F401
    from .fuzz import fuzz_schedules  # noqa: F401
except ImportError:  # pragma: no cover - only while those modules are absent
    pass


def __getattr__(name: str):
    # Imported lazily so that `python -m polyc.testing.kernel_fuzz` does not import itself twice.
    if name == "fuzz_kernels":
        from .kernel_campaign import run_campaign
        return run_campaign
    raise AttributeError(f"module 'polyc.testing' has no attribute {name!r}")
