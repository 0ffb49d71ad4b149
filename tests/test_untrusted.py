"""What the kit reads back is data: tampered state files and manifests, on this machine
and over SSH, never get a file removed or a process signalled that the kit cannot prove
it made (`harness.hosts.owned`); a fuzzer over both finds no traceback.

Each attack writes what an attacker would (the state file of a "killed" run, the
pending records of a "partial" run) with every value a forger can read on this machine:
the right host name, the boot id, each victim's real start time. Only the owner token
(in the mark file of a work directory, in the environment of a process) is out of reach,
and that is what must hold.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main as cli_main
from harness.errors import ResultsError
from harness.hosts import LocalHost
from harness.hosts.owned import MARK, OWNER_ENV, new_token
from harness.results import iter_run_dirs, read_manifest, verify_run
from harness.results.manifest import Manifest
from harness.run.inflight import STATE_DIR, STATE_FILE, STATE_VERSION, read_state
from tests.fixtures.servers import require_service
from tests.fixtures.sshd import SSHServer

pytestmark = pytest.mark.integration

SPEC = """\
name: attacked
workload: memcache_mix
hosts:
  server: localhost
  client: {client}
services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [client], processes: 1, connections: 1}}
params: {{key_space: 100}}
run: {{ops: 300}}
"""


def _ticks(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _boot() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


@pytest.fixture
def victims(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """What an attacker would point the kit at: directories of the user's (one plain,
    one holding a mark of another run, one reached through a symbolic link, one by a
    `..` path), files in them, and processes (one plain, one with another run's token in
    its environment)."""
    base = Path(f"/tmp/kv-victim-{uuid.uuid4().hex[:8]}")
    plain, marked = base / "plain", base / "marked"
    for d in (plain, marked):
        d.mkdir(parents=True)
        (d / "precious.json").write_text('{"state": "complete"}')
        (d / "c0.npz").write_bytes(b"precious")
    (marked / MARK).write_text(new_token())
    link = base / "link"
    link.symlink_to(marked)
    dotdot = f"{marked}/../plain"
    procs = [subprocess.Popen(["sleep", "300"], start_new_session=True),
             subprocess.Popen(["sleep", "300"], start_new_session=True,
                              env={**os.environ, OWNER_ENV: new_token()})]
    try:
        yield {"dirs": [str(plain), str(marked), str(link), dotdot],
               "files": [str(plain / "precious.json"), str(marked / "c0.npz"),
                         str(link / "precious.json"), f"{dotdot}/c0.npz"],
               "procs": procs, "base": base}
    finally:
        for p in procs:
            with __import__("contextlib").suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        subprocess.run(["rm", "-rf", str(base)], check=False)


def _assert_untouched(v: dict[str, Any]) -> None:
    for p in v["procs"]:
        assert p.poll() is None, f"victim process {p.pid} was signalled"
    for d in v["dirs"][:2]:
        assert (Path(d) / "precious.json").read_text() == '{"state": "complete"}', d
        assert (Path(d) / "c0.npz").read_bytes() == b"precious", d
    assert Path(v["dirs"][2]).is_symlink()


def _forged_state(v: dict[str, Any], client: str, token: str | None) -> dict[str, Any]:
    """A state file as a killed `harness run` leaves one, naming only the victims."""
    files = {"ready": v["files"][0], "go": v["files"][1], "status": v["files"][0],
             "out": v["files"][1], "log": v["files"][2], "alive": v["files"][3]}
    procs = v["procs"]
    manifest = {"run_id": "20260101T000000Z-x-r001-aaaaaa", "experiment": "attacked",
                "workload": "memcache_mix", "config_id": "x", "repetition": 1,
                "params": {}, "grid_point": {}, "status": "partial",
                "started_utc": "", "ended_utc": ""}
    return {
        "version": STATE_VERSION, "pid": 1, "machine": socket.gethostname(),
        "started_utc": "2026-01-01T00:00:00+00:00", "spec": "attacked.yaml",
        **({"owner": token} if token is not None else {}),
        "boots": {"server": _boot(), "client": _boot(), "localhost": _boot()},
        "servers": [{"service": "cache", "kind": "memcached", "host": "server", "pid": p.pid,
                     "started_ticks": _ticks(p.pid), "workdir": d}
                    for p, d in zip(procs, v["dirs"], strict=False)]
        + [{"service": "cache", "kind": "memcached", "host": "server", "pid": procs[0].pid,
            "started_ticks": None, "workdir": v["dirs"][2]},
           {"service": "cache", "kind": "memcached", "host": "server", "pid": 1,
            "started_ticks": _ticks(1), "workdir": v["dirs"][3]}],
        "workdirs": {"client": v["dirs"][1]},
        "scratch": v["dirs"],
        "runs": [{"run_id": manifest["run_id"], "label": "x", "manifest": manifest,
                  "workers": [{"host": "client", "client": 0, "pid": procs[1].pid,
                               "files": files, "started_ticks": _ticks(procs[1].pid)}],
                  "reason": "killed", "final": False}],
    }


@pytest.mark.parametrize("token", ["forged", "none", "malformed"])
def test_a_forged_state_file_removes_and_signals_nothing_it_cannot_prove(
        tmp_path: Path, victims: dict[str, Any], token: str,
        capsys: pytest.CaptureFixture) -> None:
    """`harness cleanup` over a state file naming the user's directories (plain, marked
    by another run, through a link, by `..`), files and processes (with the right start
    times, one with pid 1, one without a start time): all survive, each is named."""
    require_service("memcached", LocalHost())
    spec = tmp_path / "attacked.yaml"
    spec.write_text(SPEC.format(client="localhost"))
    raw = tmp_path / "raw"
    state_dir = raw / "attacked" / STATE_DIR
    state_dir.mkdir(parents=True)
    tok = {"forged": new_token(), "none": None, "malformed": "../../etc"}[token]
    (state_dir / STATE_FILE).write_text(json.dumps(_forged_state(victims, "client", tok)))
    code = cli_main(["cleanup", str(spec), "--out", str(raw)])
    out = capsys.readouterr()
    _assert_untouched(victims)
    assert "Traceback" not in out.err
    if token == "forged":
        assert code == 0, out.out + out.err
        text = out.out + out.err
        for p in victims["procs"]:
            assert f"pid {p.pid}" in text and "left alone" in text
        assert "not the earlier run's" in text
    else:
        assert "no owner token" in out.out + out.err or code == 2, out.out + out.err
    assert not list(iter_run_dirs(raw)), "a run was written from the victims' files"


def test_a_forged_state_over_ssh_removes_and_signals_nothing(
        tmp_path: Path, victims: dict[str, Any], sshd: SSHServer,
        capsys: pytest.CaptureFixture) -> None:
    """The same forgery naming an SSH host: the proofs run there, over SSH."""
    require_service("memcached", LocalHost())
    spec = tmp_path / "attacked.yaml"
    spec.write_text(SPEC.format(client=json.dumps({
        "target": sshd.target, "python": sys.executable, "known_hosts": sshd.known_hosts,
        "identity_file": sshd.identity_file})))
    raw = tmp_path / "raw"
    state_dir = raw / "attacked" / STATE_DIR
    state_dir.mkdir(parents=True)
    state = _forged_state(victims, "client", new_token())
    for s in state["servers"]:
        s["host"] = "client"
    (state_dir / STATE_FILE).write_text(json.dumps(state))
    assert cli_main(["cleanup", str(spec), "--out", str(raw)]) == 0
    text = "".join(capsys.readouterr())
    _assert_untouched(victims)
    assert "not the earlier run's" in text and "Traceback" not in text


@pytest.fixture
def partial_run(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A real run of the spec (spec path, raw dir, run dir)."""
    require_service("memcached", LocalHost())
    spec = tmp_path / "attacked.yaml"
    spec.write_text(SPEC.format(client="localhost"))
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    [run_dir] = iter_run_dirs(raw)
    return spec, raw, run_dir


@pytest.mark.parametrize("variant", ["no-owner", "forged-owner", "marked-dir", "link",
                                     "dotdot", "unknown-host", "bad-shape"])
def test_tampered_pending_records_get_nothing_read_removed_or_rewritten(
        partial_run: tuple[Path, Path, Path], victims: dict[str, Any], variant: str,
        capsys: pytest.CaptureFixture) -> None:
    """A manifest's `extra.pending_records` naming the user's files: `harness collect`
    and `harness run --resume` leave the files and the run exactly as they were."""
    spec, raw, run_dir = partial_run
    marked = victims["dirs"][1]
    token = (Path(marked) / MARK).read_text()
    dirs = {"no-owner": victims["dirs"][0], "forged-owner": victims["dirs"][0],
            "marked-dir": marked, "link": victims["dirs"][2], "dotdot": victims["dirs"][3],
            "unknown-host": marked, "bad-shape": marked}
    d = dirs[variant]
    entry: dict[str, Any] = {
        "host": "nowhere" if variant == "unknown-host" else "client", "client": 0,
        "files": {"status": f"{d}/precious.json", "out": f"{d}/c0.npz",
                  "ready": f"{d}/precious.json"},
        "error": "client 0 on client: records not copied"}
    if variant != "no-owner":
        # The marked directory's own token: as if the attacker had read it.
        entry["owner"] = new_token() if variant == "forged-owner" else token
    if variant == "bad-shape":
        entry["files"] = ["../../etc/passwd"]
    data = json.loads((run_dir / "manifest.json").read_text())
    data["status"] = "partial"
    data["extra"]["pending_records"] = [entry]
    (run_dir / "manifest.json").write_text(json.dumps(data))
    before = (run_dir / "manifest.json").read_bytes()
    for argv in (["collect", str(spec), "--out", str(raw)],
                 ["run", str(spec), "--out", str(raw), "--resume", "--no-progress", "-q"]):
        cli_main(argv)
        text = "".join(capsys.readouterr())
        assert "Traceback" not in text
        _assert_untouched(victims)
        if variant in ("marked-dir",):
            # Its token is right, so the files there are taken as the kit's, but the
            # status is not a worker's: nothing is removed before a verified copy.
            pass
        else:
            assert (run_dir / "manifest.json").read_bytes() == before, text
            assert "left as it is" in text, text
    verify_run(run_dir)


# --- fuzzing what is read back ------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False)
    | st.text(max_size=20) | st.sampled_from(["../../etc", "/", "\x1b[2J", "", "a/b"]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12)


def _mutate(base: Any, path: list[Any], value: Any) -> Any:
    """`base` with the value at `path` (keys and indexes, as far as they go) replaced."""
    if not path or not isinstance(base, (dict, list)) or not base:
        return value
    key = path[0]
    if isinstance(base, dict):
        k = sorted(base)[key % len(base)] if isinstance(key, int) else key
        return {**base, k: _mutate(base.get(k), path[1:], value)}
    i = key % len(base) if isinstance(key, int) else 0
    return [*base[:i], _mutate(base[i], path[1:], value), *base[i + 1:]]


MANIFEST_V3 = next((Path(__file__).parent / "data" / "results" / "v3" / "kv_cache")
                   .glob("*/manifest.json"))
_paths = st.lists(st.integers(0, 50) | st.text(max_size=8), min_size=0, max_size=4)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_paths, value=_json)
def test_fuzzed_state_files_are_read_or_refused_in_one_line(
        tmp_path: Path, path: list[Any], value: Any) -> None:
    base = {"version": STATE_VERSION, "pid": 5, "machine": "m", "started_utc": "",
            "spec": "s", "owner": new_token(), "boots": {"a": "b"},
            "servers": [{"service": "c", "kind": "memcached", "host": "h", "pid": 7,
                         "started_ticks": 3, "workdir": "/tmp/x"}],
            "workdirs": {"h": "/tmp/y"}, "scratch": ["/tmp/z"],
            "runs": [{"run_id": "r", "label": "l", "manifest": {}, "reason": "",
                      "final": False, "workers": [{"host": "h", "client": 0, "pid": 9,
                                                   "files": {"out": "/x"}}]}]}
    d = tmp_path / f"e{uuid.uuid4().hex[:6]}"
    (d / STATE_DIR).mkdir(parents=True)
    (d / STATE_DIR / STATE_FILE).write_text(json.dumps(_mutate(base, path, value)))
    try:
        state = read_state(d)
    except ResultsError as exc:
        assert "\n" not in str(exc) and str(d) in str(exc)
        return
    assert state is None or all(isinstance(s.pid, int) for s in state.servers)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_paths, value=_json)
def test_fuzzed_manifests_are_read_or_refused_in_one_line(
        tmp_path: Path, path: list[Any], value: Any) -> None:
    base = json.loads(MANIFEST_V3.read_text())
    d = tmp_path / f"r{uuid.uuid4().hex[:6]}"
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps(_mutate(base, path, value)))
    try:
        man = read_manifest(d)
    except ResultsError as exc:
        assert str(d) in str(exc) or "manifest" in str(exc)
        return
    assert isinstance(man, Manifest)
    assert "/" not in man.run_id and man.run_id != ".."
    _ = (man.typed_loadgen, man.typed_counts, man.typed_kit)


def test_a_run_id_or_experiment_that_leaves_the_tree_is_refused(tmp_path: Path) -> None:
    base = json.loads(MANIFEST_V3.read_text())
    for field, value in (("run_id", "../../outside"), ("experiment", "../x"),
                         ("run_id", "a/b"), ("experiment", "/etc"), ("run_id", ".hidden")):
        d = tmp_path / uuid.uuid4().hex[:6]
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps({**base, field: value}))
        with pytest.raises(ResultsError, match=field):
            read_manifest(d)


# --- the report: strings from anywhere never run script or reach local files ---------

#: Each would run script, load a local file or attach one if it reached the page as HTML.
PAYLOADS = [
    "```\n</code></pre><img src=x onerror=\"window.pwned='img'\">",
    "<script>window.pwned='script'</script>",
    "<svg onload=\"window.pwned='svg'\"><circle r=9></circle></svg>",
    "<a href=\"javascript:window.pwned='href'\">click</a>",
    "[click](javascript:window.pwned='md')",
    "![local](file:///etc/hostname)",
    "<link rel=\"attachment\" href=\"file:///etc/hostname\">",
    "<a rel=\"attachment\" href=\"file:///etc/hostname\">x</a>",
    "<iframe src=\"file:///etc/hostname\"></iframe>",
    "<style>body{background:url(file:///etc/hostname)}</style>",
    "\x1b]0;title\x07 <b onmouseover=\"window.pwned='b'\">bold</b>",
]


def _attacked_tree(raw: Path) -> Path:
    """An own experiment whose manifests carry the payloads wherever a string goes: the
    spec's description, a server's version and settings, an error, a host's CPU."""
    from tests.fixtures.rawdata import GRID_EXPERIMENT, write_grid

    write_grid(raw, repetitions=2)
    payload = "\n".join(PAYLOADS)
    for i, m in enumerate(sorted((raw / GRID_EXPERIMENT).rglob("manifest.json"))):
        data = json.loads(m.read_text())
        data["extra"]["spec"] = {"name": GRID_EXPERIMENT, "description": payload,
                                 "workload": data["workload"]}
        data["spec_file"] = PAYLOADS[0]
        data["services"] = {"kv": {"kind": "redis", "host": PAYLOADS[1],
                                   "version": PAYLOADS[2],
                                   "config": {"save": PAYLOADS[3], "x": PAYLOADS[6]}}}
        data["hosts"] = {"server": {"cpu_model": PAYLOADS[8], "cpu_count": 2,
                                    "kernel": PAYLOADS[9]}}
        if i == 0:
            data["status"], data["error"] = "partial", payload
        m.write_text(json.dumps(data))
    return raw


def _html_problems(text: str) -> list[str]:
    """What in `text` (HTML) could run script or fetch a local file."""
    from html.parser import HTMLParser

    problems: list[str] = []

    class Check(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag in ("script", "iframe", "link", "object", "embed", "svg", "base"):
                problems.append(f"<{tag}>")
            for name, value in attrs:
                v = (value or "").strip().lower()
                if name.startswith("on"):
                    problems.append(f"<{tag} {name}>")
                if name in ("href", "src") and not (v.startswith(("#", "http://", "https://"))
                                                    or v.startswith("data:image/png;base64,")
                                                    or v.startswith("data:image/svg+xml;")):
                    problems.append(f"<{tag} {name}={v[:40]}>")
                if name == "rel" and "attachment" in v:
                    problems.append(f"<{tag} rel=attachment>")

    Check().feed(text)
    return problems


def test_strings_from_manifests_reach_the_report_as_text_only(
        tmp_path: Path, browser: Any) -> None:
    """Every payload, wherever a manifest carries it: report.html has no element or
    attribute that runs script or fetches a file (parsed), running it in headless
    Chromium sets nothing, and report.pdf embeds no file (pdfdetach) and shows the
    payloads as text."""
    from harness.report import build_report

    raw = _attacked_tree(tmp_path / "raw")
    out = build_report(raw, tmp_path / "report", progress=False,
                       figures_dir=tmp_path / "figures")
    html = out["html"].read_text()
    assert _html_problems(html) == []
    assert "window.pwned" in html  # shown, as text
    page = browser.new_page()
    hits: list[str] = []
    page.on("dialog", lambda d: (hits.append(d.message), d.dismiss()))
    me = out["html"].as_uri()
    page.on("request", lambda r: hits.append(r.url) if r.url.startswith("file:")
            and r.url != me else None)
    page.goto(me)
    page.wait_for_load_state("load")
    for el in page.query_selector_all("b, a, img"):  # what a reader's mouse would touch
        el.dispatch_event("mouseover")
    assert page.evaluate("window.pwned") is None and hits == [], hits
    listed = subprocess.run(["pdfdetach", "-list", str(out["pdf"])], capture_output=True,
                            text=True, check=True).stdout
    assert listed.startswith("0 embedded files"), listed
    text = subprocess.run(["pdftotext", str(out["pdf"]), "-"], capture_output=True,
                          text=True, check=True).stdout
    assert "window.pwned='script'" in text
    assert Path("/etc/hostname").read_text().strip() not in text.replace(
        socket.gethostname(), "")  # the payloads' file is not printed into it


def test_a_template_beside_the_report_is_not_loaded(tmp_path: Path) -> None:
    """A template.html.j2 in the output directory (anyone who can write there) is not the
    report's: the kit's own is used."""
    from harness.report import build_report
    from tests.fixtures.rawdata import write_tiny

    raw = write_tiny(tmp_path / "raw")
    out_dir = tmp_path / "report"
    out_dir.mkdir()
    (out_dir / "template.html.j2").write_text(
        "{{ ''.__class__.__mro__[1].__subclasses__() }} PLANTED")
    html = build_report(raw, out_dir, pdf=False, progress=False,
                        figures_dir=tmp_path / "figures")["html"].read_text()
    assert "PLANTED" not in html and "Contents" in html
