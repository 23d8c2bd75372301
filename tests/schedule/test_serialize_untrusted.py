"""Saved schedules are untrusted input: names are checked before they can reach C, stored maps are
proven (with isl, for every size) to run each instance exactly once, and every malformed file is a
`ScheduleFileError` that says where, never a crash, a hang or a silently wrong schedule."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import polyc as pc
from polyc.errors import IllegalScheduleError, PolycError, ScheduleFileError
from polyc.schedule import Schedule

matmul = pc.kernel("C[i, j] +=! A[i, k] * B[k, j]", name="matmul")


def raw_doc() -> dict:
    """A schedule saved as maps and dims (a mark set outside the primitives: not replayable)."""
    s = matmul.schedule().tile(i=4).with_mark("j", "parallel", "my_mark('j')")
    doc = json.loads(s.to_json())
    assert doc["replayable"] is False
    return doc


def replay_doc() -> dict:
    return json.loads(matmul.schedule().tile(i=4, j=8).split("k", 2).parallel("i_outer").to_json())


def load(doc) -> Schedule:
    return Schedule.from_json(matmul, doc if isinstance(doc, str) else json.dumps(doc))


def refused(doc, where: str, match: str = "") -> ScheduleFileError:
    with pytest.raises(ScheduleFileError, match=match) as info:
        load(doc)
    assert info.value.where.startswith(where), (info.value.where, str(info.value))
    return info.value


def test_untampered_raw_schedule_still_loads_and_runs():
    s = load(raw_doc())
    A, B = np.arange(12.0).reshape(3, 4), np.arange(20.0).reshape(4, 5)
    np.testing.assert_allclose(pc.compile(matmul, s)(A=A, B=B), A @ B)


# -- names ----------------------------------------------------------------------------------------

INJECTION = 'k = ({ system("touch pwned"); 0; }), kk'


@pytest.mark.parametrize("name, match", [
    (INJECTION, "not a plain identifier"),
    ("j", "also the name of dims"),          # clashes with another loop
    ("A", "already a tensor"), ("I", "already a tensor, scalar or size"),
    ("int", "reserved"), ("for", "reserved"), ("polyc_t", "reserved"), ("_s6", "not a plain identifier"),
    ("k\u00e9", "not a plain identifier"), ("", "not a plain identifier"), ("x" * 65, "not a plain identifier"),
    (7, "must be a string"), (["k"], "must be a string"),
])
def test_loop_names_from_the_file_are_checked(name, match):
    doc = raw_doc()
    doc["dims"][6]["name"] = name
    doc["loops"][3] = name
    refused(doc, "dims[6].name", match)


def test_new_loop_names_in_replayed_steps_are_checked():
    doc = json.loads(matmul.schedule().split("k", 2, outer="ko").to_json())
    doc["steps"][0]["kwargs"]["outer"] = INJECTION
    refused(doc, "steps[0].kwargs.outer", "not a plain identifier")
    doc["steps"][0]["kwargs"]["outer"] = "B"
    refused(doc, "steps[0].kwargs.outer", "tensor")


def test_marks_and_loop_kinds_must_fit_the_dims():
    cases = [(("dims", 0, "marks"), ["parallel"], "dims[0].marks", "scalar"),
             (("dims", 4, "marks"), ["fast"], "dims[4].marks[0]", "unknown mark"),
             (("dims", 4, "unroll"), 10**6, "dims[4].unroll", "unroll value"),
             (("dims", 0, "unroll"), 2, "dims[0].unroll", "scalar"),
             (("dims", 4, "origin"), "x; y", "dims[4].origin", "plain identifier"),
             (("dims", 4, "colour"), "red", "dims[4]", "unknown fields"),
             (("loops",), ["i_outer", "i_inner", "j"], "loops", "does not list")]
    for path, value, where, match in cases:
        doc = raw_doc()
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        refused(doc, where, match)


@pytest.mark.parametrize("marks, match", [(["reduction_parallel", "block"], "blocks cannot combine a reduction"),
                                          (["reduction_parallel", "thread", "block"], "to blocks or to threads, not both")])
def test_gpu_marks_no_primitive_gives_are_refused(marks, match):
    """A tampered CUDA schedule: its tree-reduced loop marked a block loop too (every block then
    added into y[i] unsynchronised)."""
    from polyc.schedule.auto_gpu import auto_gpu_schedule
    k = pc.kernel("y[i] +=! A[i, j] * x[j]", name="mv")
    doc = json.loads(auto_gpu_schedule(k.schedule()).to_json())
    dim = next(d for d in doc["dims"] if d["marks"] == ["reduction_parallel", "thread"])
    dim["marks"] = marks
    with pytest.raises(IllegalScheduleError, match=match):
        Schedule.from_json(k, json.dumps(doc))


# -- tampered maps ---------------------------------------------------------------------------------

S1 = "[I, K, J] -> { S1[i, j, k] -> [1, o1, i, 0, j, 0, k, 0] : -3 + i <= 4o1 <= i }"


@pytest.mark.parametrize("text, match", [
    # every update twice: an extra time coordinate 0 <= t <= 1
    ("[I, K, J] -> { S1[i, j, k] -> [1, o1, i, 0, j, 0, k, t] : -3 + i <= 4o1 <= i and 0 <= t <= 1 }",
     "more than one time"),
    # skipped rows
    ("[I, K, J] -> { S1[i, j, k] -> [1, o1, i, 0, j, 0, k, 0] : -3 + i <= 4o1 <= i and i < 1 }",
     "every instance .* e.g. S1\\[i=1"),
    # right for one size only
    ("[I, K, J] -> { S1[i, j, k] -> [1, o1, i, 0, j, 0, k, 0] : -3 + i <= 4o1 <= i and I = 5 }",
     "every size"),
    # all k at one time: the order of the updates is undefined
    ("[I, K, J] -> { S1[i, j, k] -> [1, o1, i, 0, j, 0, 0, 0] : -3 + i <= 4o1 <= i }", "same schedule time"),
    ("[I, K, J] -> { S0[i, j, k] -> [1, o1, i, 0, j, 0, k, 0] : -3 + i <= 4o1 <= i }", "must map statement S1"),
    # k moved to a scalar dimension: a loop with no name, hidden from marks and the outline
    ("[I, K, J] -> { S1[i, j, k] -> [1, o1, i, 0, j, k, 0, 0] : -3 + i <= 4o1 <= i }", "scalar .* makes it a loop"),
    ("[I, K, J] -> { S1[i, j, k] -> [1, i, 0, j, 0, k, 0] }", "8-dimensional"),
    ("[I, K, J] -> { S1[i, j, k] -> T[1, o1, i, 0, j, 0, k, 0] : -3 + i <= 4o1 <= i }", "anonymous"),
    ("[I, K, J, Q] -> { S1[i, j, k] -> [1, o1, i, 0, j, 0, k, Q] : -3 + i <= 4o1 <= i }", "sizes Q"),
    ("[I, K, J] -> { S1[i, j, k] -> [1, o1, i, 0, j, 0, 8589934593k, 0] : -3 + i <= 4o1 <= i }",
     "beyond"),
    ("[I, K, J] -> { S1[i, j, k] -> [1, o1, i, 0, j, 0, k, 0] : ", "not an isl map"),
    ("{ S1[i] -> [0] }; { S0[i] -> [1] }", "must map statement S1"),
])
def test_tampered_maps_are_refused(text, match):
    doc = raw_doc()
    assert doc["maps"]["S1"] == S1
    doc["maps"]["S1"] = text
    refused(doc, "maps.S1", match)


def test_two_statements_at_the_same_time_are_refused():
    doc = raw_doc()
    doc["maps"]["S0"] = "[I, K, J] -> { S0[i, j] -> [1, o1, i, 0, j, 0, 0, 0] : -3 + i <= 4o1 <= i }"
    refused(doc, "maps", "two statements run at the same schedule time")


def test_a_bijective_map_that_breaks_a_dependence_is_still_illegal():
    doc = raw_doc()
    doc["maps"]["S1"] = S1.replace("[1,", "[-1,")  # the update before the initialisation
    with pytest.raises(IllegalScheduleError):
        load(doc)


def test_a_missing_map_is_refused():
    doc = raw_doc()
    del doc["maps"]["S0"]
    refused(doc, "maps", "no map for statements S0")
    doc = raw_doc()
    doc["maps"]["S9"] = S1
    refused(doc, "maps.S9", "no statement")


# -- malformed files --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, where, match", [
    ("[" * 100000, "", "nested too deeply"),
    ("{not json", "", "invalid JSON"),
    ('{"format": "polyc-schedule", "version": NaN}', "", "invalid JSON"),
    ("[1, 2]", "", "not an object"),
    (b"\xff\xfe", "", "UTF-8"),
    ('{"steps": []}', "format", "not a saved polyc schedule"),
])
def test_unreadable_text_is_a_schedule_file_error(text, where, match):
    with pytest.raises(ScheduleFileError, match=match) as info:
        Schedule.from_json(matmul, text)
    assert info.value.where == where


def test_wrong_types_in_steps_are_refused_with_their_place():
    base = replay_doc()
    cases = [(lambda d: d.__setitem__("steps", "tile"), "steps", "must be a list"),
             (lambda d: d["steps"].__setitem__(0, "tile(i=4)"), "steps[0]", "must be an object"),
             (lambda d: d["steps"][0]["kwargs"].__setitem__("i", "4"), "steps[0].kwargs.i", "plain identifier"),
             (lambda d: d["steps"][0]["kwargs"].__setitem__("i", 4.0), "steps[0].kwargs.i", "positive integers"),
             (lambda d: d["steps"][1].__setitem__("args", ["k", "2"]), "steps[1].args[1]", "plain identifier"),
             (lambda d: d["steps"][1].__setitem__("args", ["k", True]), "steps[1].args[1]", "must be an integer"),
             (lambda d: d["steps"][1].__setitem__("args", ["k", [2]]), "steps[1].args[1]", "must be an integer"),
             (lambda d: d["steps"][1].__setitem__("args", ["k", [[2]]]), "steps[1].args[1][0]", "a list holds"),
             (lambda d: d["steps"][1].__setitem__("args", ["k", {"a": [2]}]), "steps[1].args[1].a", "a size"),
             (lambda d: d["steps"][1].__setitem__("args", ["k", 2**80]), "steps[1].args[1]", "beyond"),
             (lambda d: d["steps"][1].__setitem__("args", [3, 2]), "steps[1].args[0]", "must be a loop name"),
             (lambda d: d["steps"][1].__setitem__("args", []), "steps[1].args", "bad arguments"),
             (lambda d: d["steps"][2].__setitem__("kwargs", {"_step": {}}), "steps[2].kwargs", "no argument"),
             (lambda d: d["steps"][2].__setitem__("kwargs", {"speed": 1}), "steps[2].kwargs.speed", "takes no argument"),
             (lambda d: d["steps"][0].__setitem__("primitive", "__class__"), "steps[0].primitive", "unknown"),
             (lambda d: d["steps"][0].__setitem__("primitive", 3), "steps[0].primitive", "unknown"),
             (lambda d: d.__setitem__("replayable", "yes"), "replayable", "true or false"),
             (lambda d: d.__setitem__("version", True), "version", "not supported"),
             (lambda d: d["maps"].__setitem__("S1", "{ S1[i] -> "), "maps.S1", "not an isl map"),
             (lambda d: d["maps"].__setitem__("S1", 5), "maps.S1", "must be a string"),
             (lambda d: d["maps"].__setitem__("S1", S1), "maps.S1", "different schedule")]
    for change, where, match in cases:
        doc = copy.deepcopy(base)
        change(doc)
        refused(doc, where, match)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            yield from _paths(v, prefix + (k,))


@pytest.mark.parametrize("make", [raw_doc, pytest.param(replay_doc, marks=pytest.mark.slow)])
def test_any_wrong_value_anywhere_is_a_typed_error(make):
    """Every place of a saved file, replaced by values of every JSON type: the result is a loaded
    schedule or a PolycError, never another exception."""
    base = make()
    replacements = [None, True, -1, 2**70, 1.5, "x", "", [], {}, [[1]], {"a": {}}]
    for path in list(_paths(base))[1:]:
        for value in replacements:
            doc = copy.deepcopy(base)
            target = doc
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
            try:
                load(doc)
            except PolycError:
                pass


def test_a_map_too_expensive_to_prove_is_a_schedule_file_error(monkeypatch):
    """The proof runs under polyc's isl operation budget: a file can cost an error, never a hang."""
    import polyc.poly.islutil as islutil
    doc = raw_doc()
    matmul.model.domains, matmul.model.dependences  # computed before the budget shrinks
    monkeypatch.setattr(islutil, "DEFAULT_BUDGET", 50)
    refused(doc, "maps", "could not be proven correct: .*isl operations")


@pytest.mark.parametrize("edit, where", [
    (lambda d: d["dims"][1].update(name='x; system("rm -rf /")'), "dims[1]"),
    (lambda d: d["dims"][1].update(marks=[]), "dims[1]"),
    (lambda d: d["loops"].__setitem__(0, "int"), "loops"),
    (lambda d: d["dims"].pop(), "dims"),
])
def test_a_replayable_file_whose_other_fields_were_edited_is_refused(edit, where):
    # The steps alone rebuild the schedule; fields that disagree with them were edited by hand.
    doc = replay_doc()
    load(doc)
    edit(doc)
    refused(doc, where, "steps make")
