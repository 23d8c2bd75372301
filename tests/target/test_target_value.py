"""`pc.Target` as a value: construction, validation of untrusted input, serialisation, display."""
import json

import pytest

import polyc as pc
from polyc.errors import PolycError, TargetError
from polyc.target import Target


def test_exported_and_typed():
    assert pc.Target is Target
    assert issubclass(pc.TargetError, PolycError) and pc.TargetError is TargetError


def test_host_describes_this_machine_as_a_c_target():
    t = Target.host()
    assert t.kind == "c" and t.is_cpu and not t.is_gpu
    assert t.vector_bytes in (16, 32, 64) and t.cores >= 1
    assert 1024 <= t.l1 <= t.l2 <= t.l3
    assert "openmp" in t.features and t.cuda_arch is None
    assert Target.host() == t            # probed once: equal values, equal fingerprints
    assert Target.host().fingerprint() == t.fingerprint()


def test_host_reads_compiler_and_flags_from_the_environment(monkeypatch):
    monkeypatch.setenv("POLYC_CFLAGS", "-O1 -g")
    monkeypatch.setenv("POLYC_CC", "gcc")
    monkeypatch.setenv("POLYC_VECTOR_MATH", "0")
    t = Target.host()
    assert t.flags == ("-O1", "-g") and t.compiler == "gcc" and t.vector_math == ()


def test_host_cores_are_the_threads_openmp_will_run(monkeypatch):
    from polyc.target import openmp_threads
    assert openmp_threads(8, {}) == 8
    assert openmp_threads(8, {"OMP_NUM_THREADS": "3"}) == 3
    assert openmp_threads(2, {"OMP_NUM_THREADS": "16"}) == 2          # never more than the cores
    assert openmp_threads(8, {"OMP_NUM_THREADS": "4,2"}) == 4         # nested lists: the outer level
    for junk in ("", "0", "-1", "two", " "):
        assert openmp_threads(8, {"OMP_NUM_THREADS": junk}) == 8
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = Target.host()
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert one.cores == 1 and Target.host().cores >= 1
    if Target.host().cores > 1:                  # a library decided for one thread is not reused on two
        assert one.fingerprint() != Target.host().fingerprint()


def test_with_changes_fields_and_the_fingerprint():
    h = Target.host()
    t = h.with_(l2=256 * 1024, vector_bytes=32, cores=8)
    assert (t.l2, t.vector_bytes, t.cores) == (256 * 1024, 32, 8) and t.l1 == h.l1
    assert t.fingerprint() != h.fingerprint()
    assert t.fingerprint() == h.with_(l2=256 * 1024, vector_bytes=32, cores=8).fingerprint()
    assert len(t.fingerprint()) == 64 and int(t.fingerprint(), 16) >= 0
    with pytest.raises(TargetError) as e:
        h.with_(l2_cache=1)
    assert e.value.field == "l2_cache"


def test_json_round_trip():
    for t in (Target.host().with_(l3=12 << 20), Target.cuda("sm_80"), Target.cuda_emu()):
        text = t.to_json()
        back = Target.from_json(text)
        assert back == t and back.fingerprint() == t.fingerprint()
        assert Target.from_dict(json.loads(text)) == t
        assert set(t.to_dict()) == {"kind", "isa", "vector_bytes", "l1", "l2", "l3", "cores", "compiler", "flags",
                                    "features", "cuda_arch", "shared_memory_bytes", "registers_per_block",
                                    "max_threads_per_block"}


def test_fingerprint_is_a_stable_digest_of_the_fields():
    """The same dict gives the same fingerprint in any process (no ids, no set order)."""
    d = Target.host().to_dict()
    d["features"] = list(reversed(d["features"]))
    assert Target.from_dict(d).fingerprint() == Target.host().fingerprint()


def _tampered(field, value):
    d = Target.host().to_dict()
    d[field] = value
    return json.dumps(d)


@pytest.mark.parametrize("field, value", [
    ("kind", "opencl"), ("kind", 3), ("l2", "big"), ("l2", -1), ("l2", 1.5), ("l3", 2 ** 80),
    ("cores", True), ("cores", 0), ("vector_bytes", 48), ("vector_bytes", 1024),
    ("flags", ["-O2", "-o", "/tmp/elsewhere.so"]), ("flags", "-O2"), ("flags", ["-Wl,-o,x"]), ("flags", [3]),
    ("flags", ["@file"]), ("features", "openmp"), ("features", ["ok", "rm -rf /"]), ("compiler", "gcc -O0"),
    ("compiler", "-ogcc"), ("compiler", ""), ("isa", "x86 64"), ("cuda_arch", "sm_90"),
    ("shared_memory_bytes", -5), ("max_threads_per_block", None),
])
def test_from_json_refuses_bad_fields_naming_them(field, value):
    with pytest.raises(TargetError) as e:
        Target.from_json(_tampered(field, value))
    assert e.value.field == field
    assert field in str(e.value)


def test_from_json_refuses_malformed_documents():
    for text, field in (("not json", "target"), ("[1, 2]", "target"), ("{" * 100000, "target"),
                        ('{"kind": "c"}', "isa"), (b"\xff\xfe", "target"), ("x" * (1 << 17), "target")):
        with pytest.raises(TargetError) as e:
            Target.from_json(text)
        assert e.value.field == field, text[:20]
    d = Target.host().to_dict()
    d["extra"] = 1
    with pytest.raises(TargetError, match="unknown field 'extra'"):
        Target.from_dict(d)


def test_cuda_targets_validate_the_architecture():
    t = Target.cuda("sm_90")
    assert t.kind == "cuda" and t.cuda_arch == "sm_90" and t.is_gpu
    assert t.shared_memory_bytes == 48 * 1024 and t.max_threads_per_block == 1024
    assert t.registers_per_block == 65536 and t.compiler == "nvcc"
    assert Target.cuda("sm_90a").cuda_arch == "sm_90a"
    for bad in ("90", "sm90", "sm_9", "compute_90", "sm_90; rm -rf /", 90):
        with pytest.raises(TargetError) as e:
            Target.cuda(bad)
        assert e.value.field == "cuda_arch"
    d = Target.cuda("sm_80").to_dict()
    d["cuda_arch"] = None
    with pytest.raises(TargetError, match="needs cuda_arch"):
        Target.from_dict(d)
    with pytest.raises(TargetError) as e:
        Target.cuda_emu().with_(max_threads_per_block=64)
    assert e.value.field == "max_threads_per_block"


def test_from_description_strings_and_dicts():
    t = Target.from_description("c l2=256K vector_bytes=32 cores=8 -avx512f +myfeature")
    h = Target.host()
    assert (t.kind, t.l2, t.vector_bytes, t.cores, t.l1) == ("c", 256 * 1024, 32, 8, h.l1)
    assert "avx512f" not in t.features and "myfeature" in t.features
    assert Target.from_description("host, l3=16M").l3 == 16 << 20
    assert Target.from_description("cuda:sm_80").cuda_arch == "sm_80"
    assert Target.from_description("c flags=-O2;-g").flags == ("-O2", "-g")
    assert Target.from_description({"kind": "c", "l1": 48 * 1024, "flags": ["-O2"]}).l1 == 48 * 1024
    assert Target.from_description({"kind": "cuda", "cuda_arch": "sm_75"}).cuda_arch == "sm_75"
    assert Target.resolve("c") == h and Target.resolve(t) is t and Target.resolve("cuda-emu").kind == "cuda-emu"


@pytest.mark.parametrize("text, field", [
    ("", "kind"), ("opencl", "kind"), ("c l2=lots", "l2"), ("c colour=red", "colour"), ("c l2", "l2"),
    ("c flags=-o;x", "flags"), ("cuda:90", "cuda_arch"), ("c +bad feature", "feature"), ("c cores=0", "cores"),
])
def test_from_description_errors_name_the_field(text, field):
    with pytest.raises(TargetError) as e:
        Target.from_description(text)
    assert e.value.field == field


def test_from_description_refuses_other_types():
    for bad in (None, 3, ["c"]):
        with pytest.raises(TargetError):
            Target.from_description(bad)
    with pytest.raises(TargetError):
        Target.from_description({"kind": "c", "l2": "x"})
    with pytest.raises(TargetError) as e:
        Target.from_description({"kind": "c", "nope": 1})
    assert e.value.field == "nope"


def test_repr_and_html_are_short_summaries():
    t = Target.host().with_(l2=256 * 1024, vector_bytes=32, cores=8)
    r = repr(t)
    assert r.startswith("<polyc Target c ") and "256-bit SIMD" in r and "L2 256 KiB" in r and "8 cores" in r
    assert len(r) < 200 and t.fingerprint()[:12] in r
    html = t._repr_html_()
    assert "polyc Target" in html and "256 KiB" in html and "<table>" in html
    g = repr(Target.cuda("sm_90"))
    assert "sm_90" in g and "48 KiB shared memory" in g and "1024 threads per block" in g
    with pytest.raises(TargetError):          # feature names are plain words: nothing to escape
        Target.host().with_(features=frozenset({"a<b>"}))


def test_only_the_target_module_asks_the_operating_system_about_the_machine():
    """Machine facts reach decisions only through a Target: no other module probes the host."""
    from pathlib import Path
    root = Path(pc.__file__).parent
    probes = ("/proc/", "/sys/", "cpu_count(", "sched_getaffinity", "find_library(", "platform.machine(",
              "importlib.import_module(\"polyc.codegen")
    found = [f"{path.relative_to(root)}: {p}" for path in sorted(root.rglob("*.py")) if path.name != "target.py"
             for p in probes if p in path.read_text(encoding="utf-8")]
    assert found == []


@pytest.mark.parametrize("field, value", [
    ("flags", ["-O2", "-wrapper", "/tmp/evil.sh"]), ("flags", ["-fplugin=/tmp/x.so"]), ("flags", ["-B/tmp/x"]),
    ("flags", ["-specs=/tmp/x"]), ("flags", ["-I/tmp/x"]), ("flags", ["-include", "x.h"]),
    ("flags", ["-Dexp=system"]), ("flags", ["-Wl,-init=f"]), ("flags", ["-Wp,-include,/tmp/x.h"]),
    ("flags", ["-lfoo"]), ("flags", ["-fprofile-generate"]), ("flags", ["-fdump-tree-all"]),
    ("flags", ["-ccbin", "/tmp/x"]), ("flags", ["-fcompare-debug=-B."]), ("flags", ["-march=-B."]),
    ("flags", ["-Ofast"]), ("flags", ["-ffast-math"]), ("flags", ["-fno-signed-zeros"]),
    ("flags", ["-funsafe-math-optimizations"]), ("flags", ["--use_fast_math"]), ("flags", ["-mabi=ms"]),
    ("flags", ["-fsingle-precision-constant"]), ("flags", ["-ffixed-rbx"]), ("flags", ["-mpc32"]),
    ("flags", ["-mdaz-ftz"]),
    ("compiler", "/tmp/evil"), ("compiler", "python3"), ("compiler", "./cc"),
])
def test_a_saved_target_cannot_run_other_programs(field, value):
    # a Target read from a file becomes a command line: only a compiler on PATH and plain options
    with pytest.raises(TargetError) as e:
        Target.from_json(_tampered(field, value))
    assert e.value.field == field and "file" in str(e.value)


def test_a_saved_target_keeps_ordinary_options_and_compilers():
    for flags in (["-O3", "-march=native"], ["-O2", "-mavx2", "-mno-avx512f", "-mprefer-vector-width=256",
                                             "-ffp-contract=off", "-funroll-loops", "-fno-trapping-math", "-Wall",
                                             "-g", "-std=c11", "-fopenmp"]):
        for compiler in ("cc", "gcc", "gcc-12", "clang-17", "x86_64-linux-gnu-gcc-12"):
            t = Target.host().with_(flags=tuple(flags), compiler=compiler)
            assert Target.from_json(t.to_json()) == t
    # set in code, any compiler and flag the user chooses stays theirs
    assert Target.host().with_(flags=("-O2", "-DNDEBUG"), compiler="/usr/bin/gcc").flags == ("-O2", "-DNDEBUG")
