"""Fuzzing the spec loader: whatever the file holds, `load_spec` returns a Spec or raises
SpecError naming the file; never another exception, never a hang.

Two generators, both deterministic (`derandomize=True`) and bounded: random YAML-ish
documents (nested mappings, lists and scalars, dumped as YAML or as broken text), and
mutations of the built-in specs in experiments/ (keys deleted, values swapped for other
types, junk keys inserted, text truncated or spliced). Scalars include what broke the
loader before (issue 24): integers too long for Python to read (over 4,300 digits),
zero and negative numbers, huge and tiny floats, and numbers just past the limits. The
counts of each outcome are printed (`pytest -s`) for the record.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import SpecError
from harness.services import SERVICES
from harness.settings import check_bounds
from harness.spec import CLIENT_FIELDS, RUN_FIELDS, Spec, expand, load_spec
from harness.spec.limits import target_port_problem
from harness.studies import STUDIES
from harness.workloads import WORKLOADS

ROOT = Path(__file__).resolve().parents[2]
#: The built-in specs: those the studies register (a user's own spec saved beside them in
#: experiments/ is not one, and the same suite must pass after the README is followed).
BUILTIN = sorted(spec.path() for name in STUDIES for spec in STUDIES.get(name).specs)
EXAMPLES = 400

FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Keys a spec uses, so random documents reach past the top-level checks.
KEYS = ["name", "workload", "hosts", "services", "clients", "params", "grid", "run",
        "repetitions", "on_failure", "timeline", "exclude", "inventory", "kind", "host",
        "settings", "target", "python", "processes", "connections", "inflight", "ops",
        "duration_s", "warmup_ops", "timeout_s", "op", "memory_mb", "at_s", "action",
        "fail_if_error_rate_above", "clients.processes", "services.cache.threads",
        "memcached", "postgres", "localhost", "datastore_memcache", "memcache_mix"]

SPLICES = [":", "- ", "{", "]", "\t", "&a", "*a", "!!python/object:os.system", "'",
           "\n  x: 1\n", "\n- 1\n", "? ", "|\n", "%YAML 1.1\n", "---\n"]


class LongInt(str):
    """The digits of an integer Python refuses to read (int max str digits: 4,300), so
    that it can be dumped: YAML reads it back as an int; as a Python value it is text."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    LongInt, lambda dumper, v: dumper.represent_scalar("tag:yaml.org,2002:int", str(v)))

long_ints = st.builds(lambda n, sign: LongInt(sign + "9" * n), st.integers(4301, 6000),
                      st.sampled_from(["", "-"]))
# Zero, negatives, powers of two and the kit's own limits, each one off: where bounds are.
edges = st.sampled_from([0, -1, 1, -0.0, 2**31, 2**31 - 1, 2**32, 2**63, 2**64, 10**20,
                         65535, 65536, 10_000, 10_001, 28_000, 2**25, 2**25 + 1, 2_592_000,
                         2_592_001, 4_000_000, 4_000_001, 1e-300, -1e-300, 5e-324])
big_floats = st.floats(min_value=1e9, max_value=1.7e308) | st.floats(max_value=-1e9,
                                                                     min_value=-1.7e308)
numbers = st.one_of(st.integers(-10**12, 10**12), st.integers(-10**30, 10**30),
                    st.floats(allow_nan=True, allow_infinity=True), big_floats, edges,
                    long_ints)
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=20),
                    st.sampled_from(KEYS))
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=12), st.integers(-5, 5),
                 st.booleans())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(keys, inner, max_size=6)),
    max_leaves=25,
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside nested dicts and lists."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _parent(doc: Any, path: tuple) -> Any:
    for p in path[:-1]:
        doc = doc[p]
    return doc


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@st.composite
def mutated_builtin(draw: st.DrawFn) -> str:
    """A built-in spec with 1-4 structural mutations, then maybe a text mutation. One kind
    of mutation swaps a number for another number (zero, negative, huge, just past a
    limit): what only range checks refuse."""
    source = draw(st.sampled_from(BUILTIN))
    doc = copy.deepcopy(yaml.safe_load(source.read_text()))
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["delete", "replace", "insert", "wrap", "renumber"]))
        if action == "renumber":
            numeric = [p for p in paths if _is_number(_parent(doc, p)[p[-1]])]
            path = draw(st.sampled_from(numeric)) if numeric else path
        parent = _parent(doc, path)
        if action == "renumber":
            parent[path[-1]] = draw(numbers)
        elif action == "delete":
            del parent[path[-1]]
        elif action == "replace":
            parent[path[-1]] = draw(values)
        elif action == "wrap":
            parent[path[-1]] = [parent[path[-1]]]
        elif isinstance(parent, dict):
            parent[draw(keys)] = draw(values)
        else:
            parent.insert(draw(st.integers(0, len(parent))), draw(values))
    text = yaml.dump(doc, Dumper=_Dumper, sort_keys=False)
    return _text_mutation(draw, text)


def _text_mutation(draw: st.DrawFn, text: str) -> str:
    action = draw(st.sampled_from(["none", "none", "truncate", "splice", "drop_line"]))
    if action == "truncate" and text:
        return text[:draw(st.integers(0, len(text) - 1))]
    if action == "splice":
        at = draw(st.integers(0, len(text)))
        junk = draw(st.one_of(st.text(max_size=10), st.sampled_from(SPLICES)))
        return text[:at] + junk + text[at:]
    if action == "drop_line":
        lines = text.splitlines(keepends=True)
        if lines:
            del lines[draw(st.integers(0, len(lines) - 1))]
        return "".join(lines)
    return text


@st.composite
def random_document(draw: st.DrawFn) -> str:
    doc = draw(st.one_of(values, st.dictionaries(st.sampled_from(KEYS), values, max_size=8)))
    try:
        text = yaml.dump(doc, Dumper=_Dumper, sort_keys=False)
    except yaml.YAMLError:  # e.g. a key YAML cannot represent: use its repr instead
        text = repr(doc)
    return _text_mutation(draw, text)


def _assert_bounded(spec: Spec) -> None:
    """What a valid spec promises the runner (issue 24): every number of every run within
    its bounds, a client host to put processes on, TCP ports that are ports."""
    workload = WORKLOADS.get(spec.workload)
    for plan in expand(spec):
        assert plan.clients.hosts
        checks = [(k, getattr(plan.clients, k), CLIENT_FIELDS[k])
                  for k in ("processes", "connections", "inflight")]
        checks += [(k, getattr(plan.size, k), RUN_FIELDS[k]) for k in RUN_FIELDS]
        checks += [(k, plan.params[k], s) for k, s in workload.params.items()]
        checks += [(k, svc.settings[k], s) for svc in plan.services.values()
                   for k, s in SERVICES.get(svc.kind).settings.items()]
        for key, value, setting in checks:
            assert check_bounds(value, setting) is None, (key, value)
    for host in spec.hosts.values():
        assert target_port_problem(host.target) is None, host.target


def _check(path: Path, text: str, counts: Counter) -> None:
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    t0 = time.monotonic()
    try:
        spec = load_spec(path)
    except SpecError as exc:
        assert exc.problems, "a SpecError must say what is wrong"
        for problem in exc.problems:
            assert problem.startswith(str(path)), problem  # names the file
        counts["SpecError"] += 1
        return
    finally:
        assert time.monotonic() - t0 < 10, "a spec of a few KB takes milliseconds"
    assert isinstance(spec, Spec)
    assert expand(spec)  # a valid spec has at least one run
    _assert_bounded(spec)
    counts["valid Spec"] += 1


@pytest.mark.parametrize("kind", ["random documents", "mutated built-in specs"])
def test_load_spec_returns_a_spec_or_raises_spec_error(kind: str, tmp_path: Path) -> None:
    counts: Counter = Counter()
    strategy = random_document() if kind == "random documents" else mutated_builtin()

    @FUZZ
    @given(text=strategy)
    def check(text: str) -> None:
        _check(tmp_path / "fuzz.yaml", text, counts)

    check()
    print(f"\nfuzz load_spec, {kind}: {sum(counts.values())} examples: {dict(counts)}")
    assert sum(counts.values()) >= EXAMPLES * 0.9
    assert counts["SpecError"] > 0
    if kind == "mutated built-in specs":
        assert counts["valid Spec"] > 0  # mutations that keep a spec valid are tried too


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True))
PATHOLOGICAL = {
    "not UTF-8": b"\xff\xfe\x00junk",
    "NUL character": b"name: \x00\x01",
    "continuation bytes": b"name: t\n\x80\x80",
    "empty": b"",
    "nested 3000 deep": b"[" * 3000 + b"]" * 3000,
    "nested 100 deep": b"a: " + b"{a: " * 100 + b"1" + b"}" * 100,
    "aliases expanding to 9**9 values": LAUGHS.encode(),
    "a python tag": b"name: !!python/object/apply:os.system ['true']\n",
}


@pytest.mark.parametrize("case", PATHOLOGICAL)
def test_pathological_documents_are_quick_spec_errors(case: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(PATHOLOGICAL[case])
    t0 = time.monotonic()
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert time.monotonic() - t0 < 5
    assert all(p.startswith(str(path)) for p in info.value.problems), info.value.problems


# Overrides are Python values (`load_spec(path, overrides)`): here long integers are ints.
py_long_ints = st.builds(lambda n, sign: sign * (10**n - 1), st.integers(4301, 6000),
                         st.sampled_from([1, -1]))
py_scalars = scalars.filter(lambda v: not isinstance(v, LongInt)) | py_long_ints
py_values = st.recursive(
    py_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(keys, inner, max_size=6)),
    max_leaves=25,
)


@FUZZ
@given(overrides=st.dictionaries(
    st.one_of(st.sampled_from(["run.ops", "repetitions", "clients.processes", "grid.op",
                               "services.cache.settings.memory_mb", "run.timeout_s",
                               "hosts.server", "name", "run.fail_if_error_rate_above",
                               "clients.hosts", "clients.connections", "run.duration_s",
                               "run.warmup_ops", "params.value_size_bytes", "grid",
                               "grid.clients.processes", "services.cache.settings.threads",
                               "hosts.client", "inventory", "until.max_repetitions"]),
              st.text(min_size=1, max_size=15)),
    py_values, max_size=3))
def test_overrides_on_the_seed_spec_never_crash(overrides: dict[str, Any]) -> None:
    with contextlib.suppress(SpecError):
        _assert_bounded(load_spec(ROOT / "experiments" / "datastore_vs_memcache.yaml",
                                  overrides))
