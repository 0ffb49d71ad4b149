"""The file-store study end to end through `Runner`: the app launched locally, on the
loopback SSH host, and started by hand and named by URL (`external`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.datasets.filegen import file_sizes
from harness.errors import ServiceError, SpecError
from harness.hosts import LocalHost
from harness.results import iter_run_dirs, read_ops, verify_run
from harness.run.runner import Runner
from harness.spec import expand, load_spec
from tests.fixtures.filestore import app_started_by_hand
from tests.fixtures.servers import StartServer, require_service
from tests.fixtures.sshd import SSHServer

pytestmark = pytest.mark.integration

FILES, OPS, WARMUP = 12, 10, 2
SPEC = f"""\
name: fs
workload: filestore
hosts:
  server: localhost
  client: localhost
services:
  cache: {{kind: memcached, host: server}}
  app: {{kind: filestore, host: server}}
clients: {{hosts: [client], processes: 1, connections: 2}}
params: {{files: {FILES}, median_bytes: 30000, sigma: 1.5, rtt_probes: 5}}
grid:
  op: [insert, find, remove]
  memcache: [true, false]
repetitions: 1
run: {{ops: {OPS}, warmup_ops: {WARMUP}, timeout_s: 5}}
"""
SIZES = file_sizes(FILES, "lognormal", 1, median_bytes=30000, sigma=1.5)


@pytest.fixture(autouse=True)
def _memcached_installed() -> None:
    require_service("memcached", LocalHost())


def check_runs(raw: Path, n_runs: int) -> list:
    mans = []
    for run_dir in iter_run_dirs(raw):
        man = verify_run(run_dir)
        assert man.status == "complete", man.error
        assert man.counts["ok"] == OPS and man.counts["warmup"] == WARMUP
        base = man.extra["baseline"]
        assert base["tcp_connect_ms"]["n"] == 5 and base["http_noop_ms"]["min"] > 0
        ops = read_ops(run_dir).to_pandas()
        assert set(ops["op"].astype(str)) == {man.grid_point["op"]}
        # `bytes` is each op's file size: file seq % files of the client's set.
        assert sorted(ops["bytes"]) == sorted(SIZES[:OPS + WARMUP])
        mans.append(man)
    assert len(mans) == n_runs
    return mans


def test_local_runs_of_the_grid(tmp_path: Path) -> None:
    path = tmp_path / "fs.yaml"
    path.write_text(SPEC)
    raw = tmp_path / "raw"
    outcomes = Runner(load_spec(path), raw, progress=False).run()
    assert [o.status for o in outcomes] == ["complete"] * 6
    mans = check_runs(raw, 6)
    app = mans[0].services["app"]
    assert app["kind"] == "filestore" and app["version"].startswith("uvicorn ")
    assert app["config"]["memcached"] == f"127.0.0.1:{mans[0].services['cache']['port']}"


def test_app_on_the_loopback_ssh_host(tmp_path: Path, sshd: SSHServer) -> None:
    spec = sshd.host_spec("server")
    hosts = (f"  server: {{target: '{spec.target}', python: '{spec.python}', "
             f"known_hosts: '{spec.known_hosts}', identity_file: '{spec.identity_file}'}}")
    text = SPEC.replace("  server: localhost", hosts)
    text = text.replace("op: [insert, find, remove]", "op: [insert, find]")
    path = tmp_path / "fs-ssh.yaml"
    path.write_text(text.replace("memcache: [true, false]", "memcache: [true]"))
    raw = tmp_path / "raw"
    outcomes = Runner(load_spec(path), raw, progress=False).run()
    assert [o.status for o in outcomes] == ["complete"] * 2
    mans = check_runs(raw, 2)
    assert mans[0].services["app"]["host"] == "server"
    assert mans[0].hosts["server"]["kernel"]


def _external_spec(tmp_path: Path, url: str, name: str, entry: str = "") -> Path:
    """The spec with the app named by `url` (kind external; `entry`: more fields of the
    service entry, e.g. tls), inserts only."""
    text = SPEC.replace(
        "  cache: {kind: memcached, host: server}\n"
        "  app: {kind: filestore, host: server}",
        f"  app: {{kind: external, host: server, {entry}"
        f"settings: {{provides: filestore, url: '{url}'}}}}")
    path = tmp_path / name
    path.write_text(text.replace("op: [insert, find, remove]", "op: [insert]"))
    return path


def test_an_app_started_by_hand_named_by_url(tmp_path: Path,
                                             start_server: StartServer) -> None:
    cache = start_server("memcached")
    storage = tmp_path / "by-hand"
    storage.mkdir()
    env = {"FILESTORE_MEMCACHED": f"127.0.0.1:{cache.endpoint.port}"}
    with app_started_by_hand(storage, **env) as url:
        spec = load_spec(_external_spec(tmp_path, url, "fs-ext.yaml"))
        assert len(expand(spec)) == 2
        outcomes = Runner(spec, tmp_path / "raw", progress=False).run()
        assert [o.status for o in outcomes] == ["complete"] * 2
    mans = check_runs(tmp_path / "raw", 2)
    assert mans[0].services["app"]["kind"] == "external"
    assert mans[0].services["app"]["config"]["url"] == url
    assert mans[0].services["app"]["version"] == "uvicorn"
    # The files went to the app started by hand, under the client's names.
    stored = sorted(p.name for p in (storage / "files").iterdir())
    assert stored == sorted(f"c0-{i}.txt" for i in range(OPS + WARMUP))


def test_spec_counts_external_as_the_kind_it_provides(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SPEC.replace("  app: {kind: filestore, host: server}\n", ""))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert any("needs exactly one 'filestore' service, found 0" in p
               for p in info.value.problems)
    path.write_text(SPEC.replace(
        "  app: {kind: filestore, host: server}",
        "  app: {kind: external, host: server, "
        "settings: {provides: filestore, url: 'http://127.0.0.1:1/'}}"))
    assert load_spec(path).services["app"].kind == "external"


def test_memcached_after_the_app_is_a_clear_failure(tmp_path: Path) -> None:
    path = tmp_path / "order.yaml"
    path.write_text(SPEC.replace(
        "  cache: {kind: memcached, host: server}\n  app: {kind: filestore, host: server}",
        "  app: {kind: filestore, host: server}\n  cache: {kind: memcached, host: server}"))
    with pytest.raises(Exception, match="no memcached service is started before it"):
        Runner(load_spec(path), tmp_path / "raw", progress=False).run()


def test_built_in_specs_validate() -> None:
    root = Path(__file__).resolve().parents[3] / "experiments"
    assert len(expand(load_spec(root / "filestore_memcache.yaml"))) == 60
    assert len(expand(load_spec(root / "filestore_external.yaml"))) >= 1


def test_a_password_in_the_apps_url_is_in_no_file_the_run_writes(
        tmp_path: Path, start_server: StartServer) -> None:
    """The same app named by a URL with `user:password@`: every manifest (the services'
    config, the spec copy) and the report show it masked; the password is in no file."""
    from harness.report import build_report

    cache = start_server("memcached")
    storage = tmp_path / "by-hand"
    storage.mkdir()
    env = {"FILESTORE_MEMCACHED": f"127.0.0.1:{cache.endpoint.port}"}
    secret = "s3cr3t-pw-" + tmp_path.name[-6:]
    with app_started_by_hand(storage, **env) as url:
        url = url.replace("http://", f"http://bench:{secret}@")
        path = _external_spec(tmp_path, url, "fs-ext.yaml")
        outcomes = Runner(load_spec(path), tmp_path / "raw", progress=False).run()
        assert [o.status for o in outcomes] == ["complete"] * 2
    mans = check_runs(tmp_path / "raw", 2)
    assert mans[0].services["app"]["config"]["url"].startswith("http://bench:***@")
    build_report(tmp_path / "raw", tmp_path / "report", progress=False,
                 figures_dir=tmp_path / "figures")
    for root in (tmp_path / "raw", tmp_path / "report"):
        for f in (p for p in root.rglob("*") if p.is_file()):
            assert secret.encode() not in f.read_bytes(), f"password in {f}"


def test_an_app_over_https_named_by_url(tmp_path: Path, start_server: StartServer) -> None:
    """The app started by hand behind TLS (uvicorn's own), named by an https:// URL with
    the CA that signed its certificate: measured, and a wrong CA is one line first."""
    from tests.services.test_attached import _ca

    cache = start_server("memcached")
    storage = tmp_path / "by-hand"
    storage.mkdir()
    ca = _ca(tmp_path / "ca")
    env = {"FILESTORE_MEMCACHED": f"127.0.0.1:{cache.endpoint.port}"}
    with app_started_by_hand(storage, tls=(ca["cert"], ca["key"]), **env) as url:
        assert url.startswith("https://")
        path = _external_spec(tmp_path, url, "fs-https.yaml",
                              f"tls: {{ca_file: '{ca['ca']}'}}, ")
        outcomes = Runner(load_spec(path), tmp_path / "raw", progress=False).run()
        assert [o.status for o in outcomes] == ["complete"] * 2
        other = _ca(tmp_path / "other")
        path.write_text(path.read_text().replace(str(ca["ca"]), str(other["ca"])))
        with pytest.raises(ServiceError, match="not signed by a CA the kit trusts"):
            Runner(load_spec(path), tmp_path / "raw2", progress=False).run()
    mans = check_runs(tmp_path / "raw", 2)
    assert mans[0].services["app"]["config"]["url"] == url
