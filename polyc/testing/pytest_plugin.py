"""pytest plugin: check a kernel against its reference over sizes x schedules x targets x dtypes.

Installed with polyc (entry point `pytest11`), so `pip install polyc` is enough.  Two spellings:

    def test_matmul(polyc_check):                       # one test, every case in it
        polyc_check(matmul, sizes=[{"I": 7, "J": 5, "K": 6}, {"I": 1, "J": 9, "K": 2}],
                    schedules=[None, "auto", lambda k: k.schedule().tile(i=4)],
                    targets=["c", "cuda-emu"], dtypes=["f32", "f64"])

    @pytest.mark.polyc_kernel(matmul, sizes=[...], schedules=[...], targets=[...])
    def test_matmul(polyc_case):                        # one test per case (its id names it)
        pass                                            # the plugin has checked the case first

Every case runs `polyc.testing.check_kernel` (tolerances follow the arrays' element types); a
failure names the kernel, the schedule (its primitive chain), the target, dtype and sizes, and the
first and worst differing element of each array.  A target that is not available here (no GPU or
pycuda for "cuda") skips its cases with the reason instead of failing.

Schedules are given as None or "source" (the loops as written), "auto", a `Schedule` of the
kernel, or a function kernel -> Schedule (so one list serves several kernels).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import pytest

from ..errors import PolycError, TargetUnavailableError
from .check import check_kernel, default_sizes

ScheduleSpec = Union[None, str, Any, Callable[[Any], Any]]

MARKER = "polyc_kernel"


@dataclass(frozen=True)
class KernelCase:
    """One combination to check: kernel, schedule spec, target, dtype and sizes."""

    kernel: Any
    schedule: ScheduleSpec
    target: str
    dtype: str
    sizes: Optional[Mapping[str, int]]
    reference: Optional[Callable[..., Any]] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None
    seed: int = 0

    @property
    def id(self) -> str:
        """A short pytest id: `c-auto-f32-I=7,J=5`."""
        sizes = ",".join(f"{k}={v}" for k, v in (self.sizes or {}).items()) or "default-sizes"
        return f"{self.target}-{schedule_label(self.schedule)}-{self.dtype}-{sizes}"

    def describe(self) -> str:
        sizes = self.sizes if self.sizes is not None else default_sizes(self.kernel)
        size_text = ", ".join(f"{k}={v}" for k, v in sizes.items())
        schedule = self.schedule
        if callable(schedule) and not hasattr(schedule, "history"):
            try:  # a function kernel -> Schedule reads best as the chain it builds
                schedule = schedule(self.kernel)
            except Exception:  # noqa: BLE001 - its error is reported by the check itself
                pass
        return (f"{self.kernel.name}: schedule {schedule_label(schedule, full=True)}, "
                f"target {self.target}, dtype {self.dtype}, sizes {size_text}")

    def resolve_schedule(self) -> Any:
        """The schedule to compile with: None, "auto" or a `Schedule` of this kernel."""
        s = self.schedule
        if s is None or s == "source":
            return None
        if isinstance(s, str):
            return s
        if callable(s) and not hasattr(s, "history"):
            return s(self.kernel)
        return s

    def check(self, compiled: Any = None) -> Dict[str, Any]:
        """Run the case; raises AssertionError saying which case and where it differs."""
        try:
            return check_kernel(self.kernel, self.resolve_schedule(), sizes=self.sizes, dtype=self.dtype,
                                seed=self.seed, target=self.target, reference=self.reference,
                                rtol=self.rtol, atol=self.atol, compiled=compiled)
        except AssertionError as e:
            raise AssertionError(f"{self.describe()}\n{e}") from None


def schedule_label(schedule: ScheduleSpec, full: bool = False) -> str:
    """How a schedule spec reads in ids and messages: `source`, `auto`, its primitive chain, or
    the function's name."""
    if schedule is None or schedule == "source":
        return "source"
    if isinstance(schedule, str):
        return schedule
    history = getattr(schedule, "history", None)
    if history is not None:
        text = ".".join(history) or "source"
        return text if full or len(text) <= 40 else text[:37] + "..."
    return getattr(schedule, "__name__", type(schedule).__name__)


def cases(kernel: Any, *, sizes: Union[None, Mapping[str, int], Sequence[Mapping[str, int]]] = None,
          schedules: Union[ScheduleSpec, Sequence[ScheduleSpec]] = (None,),
          targets: Union[str, Sequence[str]] = ("c",), dtypes: Union[str, Sequence[str]] = ("f64",),
          reference: Optional[Callable[..., Any]] = None, rtol: Optional[float] = None,
          atol: Optional[float] = None, seed: int = 0) -> List[KernelCase]:
    """The product sizes x schedules x targets x dtypes as `KernelCase`s (a single value counts as
    a one-element list)."""
    size_list = [None] if sizes is None else [sizes] if isinstance(sizes, Mapping) else list(sizes)
    sched_list = [schedules] if schedules is None or isinstance(schedules, str) or callable(schedules) \
        or hasattr(schedules, "history") else list(schedules)
    target_list = [targets] if isinstance(targets, str) else list(targets)
    dtype_list = [dtypes] if isinstance(dtypes, str) else list(dtypes)
    if not (size_list and sched_list and target_list and dtype_list):
        raise ValueError("polyc_check: sizes, schedules, targets and dtypes must each name at least one value")
    from .check import as_kernel
    kernel = as_kernel(kernel)
    return [KernelCase(kernel, s, t, d, z, reference, rtol, atol, seed)
            for t, s, d, z in itertools.product(target_list, sched_list, dtype_list, size_list)]


@dataclass
class CheckReport:
    """What `polyc_check` ran: the cases checked, the cases skipped (with reasons)."""

    checked: List[KernelCase] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{len(self.checked)} cases match the reference, {len(self.skipped)} skipped"


def run_cases(all_cases: Sequence[KernelCase]) -> CheckReport:
    """Check every case, compiling once per (schedule, target); raise one AssertionError listing
    every failing case.  Cases of an unavailable target are skipped (all skipped: pytest.skip)."""
    __tracebackhide__ = True  # the failure is the message, not the plugin's frames
    report, failures = CheckReport(), []
    compiled: Dict[tuple, Any] = {}
    for case in all_cases:
        key = (id(case.schedule), case.target)
        try:
            if key not in compiled:
                import polyc
                compiled[key] = polyc.compile(case.kernel, case.resolve_schedule(), target=case.target)
            case.check(compiled[key])
            report.checked.append(case)
        except TargetUnavailableError as e:
            report.skipped.append(f"{case.describe()}: {e}")
        except (AssertionError, PolycError) as e:
            failures.append(str(e) if isinstance(e, AssertionError)
                            else f"{case.describe()}\n{type(e).__name__}: {e}")
    if failures:
        head = f"{len(failures)} of {len(all_cases)} cases differ from the reference or fail:"
        raise AssertionError(head + "\n\n" + "\n\n".join(failures))
    if not report.checked and report.skipped:
        pytest.skip("; ".join(report.skipped))
    if report.skipped:     # some ran: the test passes, and pytest's summary says what did not run
        import warnings
        from ..errors import PolycWarning
        warnings.warn(PolycWarning(f"polyc_check ran {len(report.checked)} of {len(all_cases)} cases; skipped: "
                                   + "; ".join(report.skipped)), stacklevel=3)
    return report


# -- pytest hooks and fixtures --------------------------------------------------------------------

def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(kernel, sizes=..., schedules=..., targets=..., dtypes=..., reference=...): "
                   "check the kernel against its reference, one test per case (polyc plugin)")


@pytest.fixture
def polyc_check() -> Callable[..., CheckReport]:
    """`polyc_check(kernel, sizes=..., schedules=..., targets=..., dtypes=..., reference=...)`:
    check every combination; one AssertionError lists every failing case."""
    def check(kernel: Any, **options: Any) -> CheckReport:
        __tracebackhide__ = True
        return run_cases(cases(kernel, **options))
    return check


@pytest.fixture
def polyc_case(request: pytest.FixtureRequest) -> KernelCase:
    """The case of a `@pytest.mark.polyc_kernel` test (already checked when the test body runs)."""
    case = getattr(request, "param", None)
    if not isinstance(case, KernelCase):
        raise pytest.UsageError("the polyc_case fixture needs @pytest.mark.polyc_kernel(kernel, ...) on the test")
    return case


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None:
        return
    if len(marker.args) != 1:
        raise pytest.UsageError(f"@pytest.mark.{MARKER} takes the kernel as its one positional argument "
                                f"(got {len(marker.args)}) and the rest by keyword")
    if "polyc_case" not in metafunc.fixturenames:
        metafunc.fixturenames.append("polyc_case")
    found = cases(marker.args[0], **marker.kwargs)
    metafunc.parametrize("polyc_case", found, indirect=True, ids=[c.id for c in found])


#: Compiled kernels of marked tests, shared by the cases that differ only in sizes or dtype (the
#: kernels and schedule specs live in the markers for the whole session, so their ids are stable).
_COMPILED: Dict[tuple, Any] = {}


def _compiled_once(case: KernelCase) -> Any:
    import polyc
    key = (id(case.kernel), id(case.schedule), case.target)
    if key not in _COMPILED:
        _COMPILED[key] = polyc.compile(case.kernel, case.resolve_schedule(), target=case.target)
    return _COMPILED[key]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Check a marked test's case before its body runs; an unavailable target skips it."""
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("polyc_case") if callspec is not None else None
    if not isinstance(case, KernelCase) or item.get_closest_marker(MARKER) is None:
        return
    problem = skip = None
    try:
        case.check(_compiled_once(case))
    except TargetUnavailableError as e:
        skip = f"{case.describe()}: {e}"
    except AssertionError as e:
        problem = str(e)
    except PolycError as e:
        problem = f"{case.describe()}\n{type(e).__name__}: {e}"
    # outside the except blocks, so the report is the message alone (no chained traceback)
    if skip is not None:
        pytest.skip(skip)
    if problem is not None:
        pytest.fail(problem, pytrace=False)
