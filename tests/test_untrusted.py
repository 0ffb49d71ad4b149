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
import tempfile
import time
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
                                     "dotdot", "unknown-host", "bad-shape",
                                     "config-elsewhere"])
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
            "unknown-host": marked, "bad-shape": marked, "config-elsewhere": marked}
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
    if variant == "config-elsewhere":  # records where the token is right, the client's
        # configuration (removed once they are collected) in a directory of the user's
        entry["files"]["config"] = f"{victims['dirs'][0]}/precious.json"
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
    # A directory of its own per example: 300 examples share tmp_path, and six hex digits
    # of a uuid collided once in CI (FileExistsError); mkdtemp cannot.
    d = Path(tempfile.mkdtemp(prefix="e", dir=tmp_path))
    (d / STATE_DIR).mkdir()
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
    d = Path(tempfile.mkdtemp(prefix="r", dir=tmp_path))  # one per example, never reused
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
        d = Path(tempfile.mkdtemp(dir=tmp_path))
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


# --- servers the kit starts admit only the kit ---------------------------------------

SERVERS_SPEC = """\
name: {name}
workload: {workload}
hosts: {{server: localhost, client: localhost}}
services:
{services}
clients: {{hosts: [client], processes: 1, connections: 1}}
params: {params}
run: {{duration_s: 1.5}}
"""
REDIS = "  kv: {kind: redis, host: server, settings: {save: '3600 1'}}"
PG = ("  datastore: {kind: postgres, host: server}\n"
      "  cache: {kind: memcached, host: server}")


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    """argv as an unprivileged local user (`nobody`), as anyone else on the machine."""
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           "--", *argv], capture_output=True, text=True, timeout=30,
                          cwd="/", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_another_local_user_cannot_use_the_servers_during_a_run(
        tmp_path: Path, kind: str) -> None:
    """While clients measure, `nobody` tries the kit's server: Redis refuses CONFIG SET
    and FLUSHALL without the password, PostgreSQL refuses the superuser over TCP and the
    socket (no trust rule, so no COPY ... TO PROGRAM); the run completes, and its
    password is in no file the run or the report wrote."""
    from harness.report import build_report
    from harness.run.runner import Runner
    from harness.services.postgres import find_pg_binaries
    from harness.spec import load_spec

    if os.geteuid() != 0:
        pytest.skip("setpriv to another user needs root (CI runs as root)")
    require_service(kind, LocalHost())
    spec_path = tmp_path / "srv.yaml"
    spec_path.write_text(SERVERS_SPEC.format(
        name=f"own_{kind}", workload="redis_mix" if kind == "redis" else "datastore_memcache",
        services=REDIS if kind == "redis" else PG,
        params="{key_space: 100}" if kind == "redis" else "{op: store_write}"))
    tried: dict[str, subprocess.CompletedProcess[str]] = {}
    secrets: list[str] = []

    def attack(plan: Any, running: dict[str, Any]) -> None:
        ep = next(s.endpoint for s in running.values() if s.kind == kind)
        secrets.append(ep.auth.password)
        if kind == "redis":
            for cmd in (["CONFIG", "SET", "maxmemory", "1"], ["FLUSHALL"]):
                tried[cmd[0]] = _as_nobody("redis-cli", "-h", ep.host, "-p", str(ep.port),
                                           *cmd)
        else:
            psql = find_pg_binaries(LocalHost())["psql"]
            svc = next(s for s in running.values() if s.kind == kind)
            for where in (ep.host, str(svc.workdir)):
                tried[where] = _as_nobody(psql, "-w", "-h", where, "-p", str(ep.port),
                                          "-U", "harness", "-d", "bench", "-c",
                                          "COPY (SELECT 1) TO PROGRAM 'touch /tmp/pwned'")

    [outcome] = Runner(load_spec(spec_path), tmp_path / "raw", progress=False,
                       on_run_start=attack).run()
    assert outcome.status == "complete"
    assert tried and secrets
    for what, res in tried.items():
        said = res.stdout + res.stderr
        if kind == "redis":
            assert "NOAUTH" in said, (what, said)
        else:
            assert res.returncode != 0 and ("password" in said or "Permission denied" in
                                            said), (what, said)
    man = read_manifest(next(iter_run_dirs(tmp_path / "raw")))
    svc = next(s for s in man.services.values() if s["kind"] == kind)
    assert "random password" in svc["config"]["auth"]
    assert svc["config"].get("bind", svc["config"].get("listen_addresses")) == "127.0.0.1"
    build_report(tmp_path / "raw", tmp_path / "report", progress=False,
                 figures_dir=tmp_path / "figures")
    for root in (tmp_path / "raw", tmp_path / "report"):
        for f in (p for p in root.rglob("*") if p.is_file()):
            data = f.read_bytes()
            assert not any(s.encode() in data for s in secrets), f"password in {f}"


def test_a_redis_setting_cannot_add_options() -> None:
    """A `save` of `--bind 0.0.0.0` is refused before anything starts; `extra` cannot set
    what admits clients; an `extra` value is its own directive's words only (so Redis
    refuses `hz --bind 0.0.0.0` rather than binding every interface), and words a
    directive takes several of still reach it."""
    from harness.errors import ServiceError
    from harness.services import SERVICES

    redis = SERVICES.get("redis")
    assert any("save" in p for p in redis.validate({"save": "--bind 0.0.0.0"}))
    for name in ("protected-mode", "requirepass", "bind", "user", "loadmodule"):
        assert any("set by the launcher" in p for p in redis.validate({"extra": {name: "x"}}))
    require_service("redis", LocalHost())
    with pytest.raises(ServiceError, match="hz"):
        redis.start(LocalHost(), "r", {"extra": {"hz": "--bind 0.0.0.0"}})
    svc = redis.start(LocalHost(), "r", {"extra": {
        "client-output-buffer-limit": "pubsub 32mb 8mb 60"}})
    try:
        assert svc.config["client-output-buffer-limit"].startswith("normal")
        assert "pubsub 33554432 8388608 60" in svc.config["client-output-buffer-limit"]
        assert svc.config["bind"] == "127.0.0.1"
    finally:
        svc.stop()


def test_postgres_parameter_names_are_reserved_whatever_their_case() -> None:
    from harness.errors import ServiceError
    from harness.services.postgres import _check_extra

    for name in ("LISTEN_ADDRESSES", "Listen_Addresses", "HBA_FILE", "Port"):
        with pytest.raises(ServiceError, match="set by the launcher"):
            _check_extra({name: "x"})


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "[::]", "0", "", "0x0"])
def test_an_address_of_every_interface_is_refused_for_any_host(tmp_path: Path,
                                                               address: str) -> None:
    from harness.errors import SpecError
    from harness.spec import load_spec

    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.format(client=json.dumps({"target": "localhost",
                                                   "address": address})))
    with pytest.raises(SpecError, match="address"):
        load_spec(spec)


# --- sizes bounded before memory is spent --------------------------------------------

def _hdr_log(tmp_path: Path, payload: str) -> Path:
    """A YCSB-style HdrHistogram interval log of one interval holding `payload`."""
    path = tmp_path / "bomb.hdr"
    path.write_text("#[StartTime: 1700000000.000 (seconds since epoch)]\n"
                    '"StartTimestamp(sec)","Interval_Length(sec)","Interval_Max(usec)",'
                    '"Interval_Compressed_Histogram"\n'
                    f"Tag=READ,0.000,1.000,100.000,{payload}\n")
    return path


@pytest.mark.parametrize("values", [10**7, 10**9])
def test_a_tiny_histogram_claiming_many_values_is_refused_before_they_are_made(
        tmp_path: Path, values: int, capsys: pytest.CaptureFixture) -> None:
    """A log of a few hundred bytes whose one bucket counts 10^7 (or 10^9) values: refused
    with the count, the memory it would take and the option that allows it, exit 2,
    nothing written; allowed with --max-ops only where it is below the hard limit."""
    import resource

    from hdrh.histogram import HdrHistogram

    hist = HdrHistogram(1, 3_600_000_000, 3)
    hist.record_value(100, values)
    path = _hdr_log(tmp_path, hist.encode().decode())
    assert path.stat().st_size < 400
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert cli_main(["import", "ycsb-hdr", str(path), "-o", str(tmp_path / "raw")]) == 2
    err = capsys.readouterr().err
    assert f"{values:,} ops" in err and "Traceback" not in err
    # Within the hard limit the option allows it; past it, no option does.
    assert ("--max-ops" in err) == (values <= 10**8), err
    assert not (tmp_path / "raw").exists() or not list((tmp_path / "raw").rglob("ops.parquet"))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200_000, f"{grown_kib} KiB spent on a refused import"


def test_a_zlib_bomb_in_a_histogram_is_refused_before_it_inflates(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A histogram payload whose zlib body inflates to 1 GiB (a few MB on disk): refused
    after inflating at most the limit, in one line."""
    import base64
    import struct
    import zlib

    z = zlib.compressobj(9)
    body = b"".join(z.compress(b"\0" * (1 << 24)) for _ in range(64)) + z.flush()
    payload = base64.b64encode(struct.pack(">ii", 0x1C849304, len(body)) + body).decode()
    path = _hdr_log(tmp_path, payload)
    assert cli_main(["import", "ycsb-hdr", str(path), "-o", str(tmp_path / "raw")]) == 2
    err = capsys.readouterr().err
    assert "inflates past" in err and "Traceback" not in err


def test_known_hosts_markers_are_read_as_openssh_reads_them(
        tmp_path: Path, sshd: SSHServer) -> None:
    """A known_hosts with `@cert-authority` and unreadable lines beside the server's key
    connects (no paramiko traceback); the same key marked `@revoked` is refused."""
    from harness.errors import HostKeyError
    from harness.hosts import connect_host

    line = Path(sshd.known_hosts).read_text().strip()
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority *.example.com {sshd.host_key}\nnot a key line\n"
                  f"|1|garbage|hash ssh-ed25519 AAAA\n{line}\n")
    with connect_host(sshd.host_spec(known_hosts=str(kh))) as host:
        assert host.run(["true"]).ok
    kh.write_text(f"{line}\n@revoked * {sshd.host_key}\n")
    with pytest.raises(HostKeyError, match="revoked"):
        connect_host(sshd.host_spec(known_hosts=str(kh)))


def test_control_characters_from_a_file_never_reach_the_terminal(
        tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    """An imported file's noise lines are echoed (`skipped line N: ...`): escape
    sequences, a carriage return, a bell and a bidirectional override in them are shown
    as escapes, not sent to the terminal."""
    data = Path(__file__).parent / "data" / "importers"
    src = (data / "redis-benchmark-7.0-n2000-c10-d100.txt").read_text()
    evil = "\x1b]0;PWNED\x07\x1b[2J\rSET: 1e9 requests per second\u202e"
    path = tmp_path / "evil.txt"
    path.write_text(src.replace("\n", f"\n{evil}\n", 1))
    code = cli_main(["import", "redis-benchmark", str(path), "-o", str(tmp_path / "raw"),
                     "--requests", "2000"])
    out = capfd.readouterr()
    text = out.out + out.err
    assert code == 0 and "PWNED" in text
    assert not any(c in text for c in "\x1b\x07\r\u202e"), repr(text)
    assert "\\x1b]0;PWNED\\x07" in text


def test_netem_cleanup_leaves_what_only_looks_like_the_kits(tmp_path: Path) -> None:
    """A process whose arguments merely start with the kit's prefix, and a prefixed
    directory of another user in the temp directory: `netem cleanup` leaves both."""
    from harness.netem import PREFIX
    from harness.netem.cleanup import cleanup

    tag = uuid.uuid4().hex[:6]
    proc = subprocess.Popen(["bash", "-c", f"exec -a {PREFIX}{tag}-x sleep 300"],
                            start_new_session=True)
    foreign = tmp_path / f"{PREFIX}{tag}-yyyyyy"
    foreign.mkdir()
    (foreign / "precious").write_text("x")
    if os.geteuid() == 0:
        os.chown(foreign, 65534, 65534)  # nobody's, as another user would leave it
    try:
        time.sleep(0.2)
        lines: list[str] = []
        cleanup(tmp_dir=str(tmp_path), say=lines.append)
        assert proc.poll() is None, lines
        assert (foreign / "precious").exists() == (os.geteuid() == 0), lines
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
