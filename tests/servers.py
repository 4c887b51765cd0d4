"""Real servers for integration tests, started on free loopback ports (never fakes)."""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

#: Headless Chromium, offline: no sandbox (root in CI), no GPU, nothing fetched in the background. The page
#: tests and ``scripts/screenshot_report.py`` launch the browser with these, so the picture is what is tested.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require_binary(name: str) -> str:
    """The binary's path; skip locally when absent, but fail under CI, where it must be installed."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is required in CI (scripts/test.sh installs it)")
        pytest.skip(f"{name} not installed")
    return path


def require_package(name: str) -> Any:
    """Import an optional framework a test needs; skip locally when absent, fail under CI (the ``test``
    extra installs it there)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is required in CI (pip install -e .[test] installs it)")
        pytest.skip(f"{name} not installed")


class RedisServer:
    """A redis-server process on 127.0.0.1 that a test may stop and start again on the same port."""

    def __init__(self, workdir: Path, password: str | None = None) -> None:
        self.binary = require_binary("redis-server")
        self.workdir = workdir
        self.port = free_port()
        self.password = password
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.workdir),
            "--logfile",
            str(self.workdir / "redis.log"),
        ]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


# -- TLS, Sentinel and Cluster deployments -----------------------------------------------------------------


def reset_after(port: int, request: bytes) -> None:
    """Send ``request`` to a server on loopback and close with a TCP reset before the reply is read
    (``SO_LINGER`` 0): a client that goes away mid-reply, such as a Prometheus scrape past its timeout."""
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(request)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def wait_ready(port: int, proc: subprocess.Popen[Any] | None = None, timeout: float = 30.0) -> None:
    """Poll the ``/readyz`` of a worker (or demo) process on 127.0.0.1:``port`` until it answers 200; fail
    the test when ``timeout`` passes or ``proc`` exits first."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline and (proc is None or proc.poll() is None), "worker never became ready"
        time.sleep(0.1)


def lines_until(proc: subprocess.Popen[str], marker: str, timeout: float = 120.0) -> list[str]:
    """The lines ``proc`` printed (its stdout, a text pipe) up to the first that contains ``marker``, its end
    of output, or ``timeout``, whichever comes first."""
    assert proc.stdout is not None
    printed: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        printed.append(line)
        if marker in line:
            break
    return printed


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _spawn(args: list[str]) -> subprocess.Popen[bytes]:
    """Start a server in the foreground; it logs to the ``--logfile`` in its args (stdout/stderr are dropped)."""
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _terminate(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    _reap(proc, 10)


def interrupt(proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """Stop ``proc`` as Ctrl-C would (SIGINT, so it shuts down the way a user stops it), kill it when it
    is not gone within ``timeout``, and close its stdout pipe."""
    proc.send_signal(signal.SIGINT)
    _reap(proc, timeout)
    if proc.stdout is not None:
        proc.stdout.close()


def _reap(proc: subprocess.Popen[Any], timeout: float) -> None:
    """Wait for ``proc`` to exit; kill it after ``timeout`` seconds."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _wait_until(
    what: str, check: Callable[[], object], log: Path, proc: subprocess.Popen[bytes], timeout: float = 10.0
) -> None:
    """Poll ``check()`` until it returns truthy; fail with the server's log when it dies or times out."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what}: process exited with code {proc.returncode}; log tail:\n{_log_tail(log)}")
        try:
            if check():
                return
        except Exception as exc:  # not ready yet
            last = exc
        time.sleep(0.05)
    raise RuntimeError(f"{what}: not ready after {timeout:.0f}s (last error: {last!r}); log tail:\n{_log_tail(log)}")


def _redis_args(binary: str, workdir: Path, port: int, log: Path) -> list[str]:
    return [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
        "--logfile",
        str(log),
    ]


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(
        [require_binary("openssl"), *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr.strip()}")


def generate_ca(workdir: Path, name: str = "ca") -> tuple[Path, Path]:
    """A self-signed CA (EC P-256, valid one day): ``(certificate, key)`` as PEM files in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    ext = workdir / f"{name}.ext"
    ext.write_text(
        "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n"
    )
    cert, key = workdir / f"{name}.pem", workdir / f"{name}.key"
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key.name, cwd=workdir)
    _openssl("req", "-new", "-key", key.name, "-subj", f"/CN=ragwatch test {name}", "-out", f"{name}.csr", cwd=workdir)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-signkey", key.name, "-days", "1", "-extfile", ext.name,
        "-out", cert.name, cwd=workdir,
    )  # fmt: skip
    return cert, key


def generate_server_cert(workdir: Path, ca: tuple[Path, Path], name: str = "server") -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 / localhost signed by ``ca``: ``(certificate, key)``."""
    ext = workdir / f"{name}.ext"
    ext.write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    )
    cert, key = workdir / f"{name}.pem", workdir / f"{name}.key"
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key.name, cwd=workdir)
    _openssl("req", "-new", "-key", key.name, "-subj", "/CN=127.0.0.1", "-out", f"{name}.csr", cwd=workdir)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-set_serial", "1",
        "-days", "1", "-extfile", ext.name, "-out", cert.name, cwd=workdir,
    )  # fmt: skip
    return cert, key


class TLSRedisServer:
    """A redis-server speaking only TLS (``--port 0``) with a certificate from a fresh self-signed CA."""

    def __init__(self, workdir: Path) -> None:
        self.binary = require_binary("redis-server")
        self.workdir = workdir
        self.log = workdir / "redis-tls.log"
        self.port = free_port()
        self.ca_cert, self.ca_key = generate_ca(workdir / "pki")
        self.cert, self.key = generate_server_cert(workdir / "pki", (self.ca_cert, self.ca_key))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Verifying the server against the test CA (the form documented for production)."""
        return self.url_with_ca(self.ca_cert)

    def url_with_ca(self, ca_cert: Path) -> str:
        from urllib.parse import quote

        return f"rediss://127.0.0.1:{self.port}/0?ssl_cert_reqs=required&ssl_ca_certs={quote(str(ca_cert), safe='/')}"

    def client(self) -> object:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, ssl=True, ssl_ca_certs=str(self.ca_cert), socket_timeout=2)

    def flushall(self) -> None:
        client = self.client()
        try:
            client.flushall()  # type: ignore[attr-defined]
        finally:
            client.close()  # type: ignore[attr-defined]

    def start(self) -> None:
        args = [*_redis_args(self.binary, self.workdir, 0, self.log)]
        args += [
            "--tls-port", str(self.port), "--tls-cert-file", str(self.cert), "--tls-key-file", str(self.key),
            "--tls-ca-cert-file", str(self.ca_cert), "--tls-auth-clients", "no",
        ]  # fmt: skip
        self.proc = _spawn(args)

        def ready() -> bool:
            client = self.client()
            try:
                return bool(client.ping())  # type: ignore[attr-defined]
            finally:
                client.close()  # type: ignore[attr-defined]

        try:
            _wait_until(f"TLS redis-server on port {self.port}", ready, self.log, self.proc)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        _terminate(self.proc)
        self.proc = None


class SentinelSetup:
    """A master redis-server, optionally replicas, and one Sentinel monitoring it as ``mymaster``
    (quorum 1). The sentinel is ``redis-sentinel`` when installed, else ``redis-server --sentinel``
    (the same binary)."""

    master_name = "mymaster"

    def __init__(self, workdir: Path, replicas: int = 0) -> None:
        self.binary = require_binary("redis-server")
        self.sentinel_binary = shutil.which("redis-sentinel")
        self.workdir = workdir
        self.master_port = free_port()
        self.replica_ports = [free_port() for _ in range(replicas)]
        self.sentinel_port = free_port()
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{self.master_name}/0"

    def flushall(self) -> None:
        """Empty the current master (and through replication its replicas)."""
        import redis

        host, port = self.master_address()
        client = redis.Redis(host=host, port=port, socket_timeout=2)
        try:
            client.flushall()
            if self.replica_ports:
                client.execute_command("WAIT", len(self.replica_ports), 2000)
        finally:
            client.close()

    def _start_redis(self, name: str, port: int, extra: list[str]) -> None:
        workdir = self.workdir / name
        workdir.mkdir(parents=True, exist_ok=True)
        log = workdir / "redis.log"
        proc = _spawn([*_redis_args(self.binary, workdir, port, log), *extra])
        self.procs.append(proc)
        _wait_until(f"{name} redis-server on port {port}", lambda: _ping(port), log, proc)

    def start(self) -> None:
        try:
            self._start_redis("master", self.master_port, ["--repl-diskless-sync-delay", "0"])
            for i, port in enumerate(self.replica_ports):
                self._start_redis(f"replica{i}", port, ["--replicaof", "127.0.0.1", str(self.master_port)])
                log, proc = self.workdir / f"replica{i}" / "redis.log", self.procs[-1]
                _wait_until(f"replica{i} in sync", lambda port=port: _replica_in_sync(port), log, proc)
            workdir = self.workdir / "sentinel"
            workdir.mkdir(parents=True, exist_ok=True)
            log = workdir / "sentinel.log"
            conf = workdir / "sentinel.conf"  # sentinel rewrites its config file: it must be writable
            conf.write_text(
                f"port {self.sentinel_port}\nbind 127.0.0.1\ndaemonize no\ndir {workdir}\nlogfile {log}\n"
                f"sentinel monitor {self.master_name} 127.0.0.1 {self.master_port} 1\n"
                f"sentinel down-after-milliseconds {self.master_name} 1000\n"
                f"sentinel failover-timeout {self.master_name} 5000\n"
            )
            sentinel = [self.sentinel_binary] if self.sentinel_binary else [self.binary]
            proc = _spawn([*sentinel, str(conf), *([] if self.sentinel_binary else ["--sentinel"])])
            self.procs.append(proc)
            _wait_until(f"sentinel on port {self.sentinel_port}", self._sentinel_sees_all, log, proc)
        except BaseException:
            self.stop()
            raise

    def _sentinel_sees_all(self) -> bool:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.sentinel_port, socket_timeout=1)
        try:
            master = client.execute_command("SENTINEL", "MASTER", self.master_name)
            replicas = client.execute_command("SENTINEL", "REPLICAS", self.master_name) if self.replica_ports else []
        finally:
            client.close()
        # a replica can be promoted once the sentinel has read its INFO: flags "slave", master link "ok"
        ready = [r for r in map(_pairs, replicas) if r.get("flags") == "slave" and r.get("master-link-status") == "ok"]
        return _pairs(master).get("flags") == "master" and len(ready) == len(self.replica_ports)

    def master_address(self) -> tuple[str, int]:
        """Where the sentinel says the master is now."""
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.sentinel_port, socket_timeout=2)
        try:
            host, port = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name)
        finally:
            client.close()
        return host.decode(), int(port)

    def failover(self, timeout: float = 15.0) -> tuple[str, int]:
        """Force a failover to a replica and wait until the sentinel names it and it is a writable master."""
        import redis

        before = self.master_address()
        client = redis.Redis(host="127.0.0.1", port=self.sentinel_port, socket_timeout=2)
        try:
            client.execute_command("SENTINEL", "FAILOVER", self.master_name)
        finally:
            client.close()

        def promoted() -> bool:
            address = self.master_address()
            return address != before and _role(address[1]) == "master"

        _wait_until("sentinel failover", promoted, self.workdir / "sentinel" / "sentinel.log", self.procs[-1], timeout)
        return self.master_address()

    def stop(self) -> None:
        for proc in reversed(self.procs):  # the sentinel first, so it does not react to the others stopping
            _terminate(proc)
        self.procs = []


class RedisCluster:
    """Three cluster-enabled redis-server masters (no replicas) joined with ``redis-cli --cluster create``."""

    def __init__(self, workdir: Path, nodes: int = 3) -> None:
        self.binary = require_binary("redis-server")
        self.cli = require_binary("redis-cli")
        self.workdir = workdir
        self.ports = [free_port() for _ in range(nodes)]
        self.bus_ports = [free_port() for _ in range(nodes)]  # not port + 10000, which may be taken
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return self.node_url(self.ports[0])

    def node_url(self, port: int) -> str:
        """The queue URL naming node ``port`` as the seed (any node will do: the client learns the slot map)."""
        return f"redis+cluster://127.0.0.1:{port}"

    def command(self, port: int, *args: object) -> object:
        """One command sent to one node directly (no cluster redirection)."""
        import redis

        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
        try:
            return client.execute_command(*args)
        finally:
            client.close()

    def slot_owner(self, key: str) -> int:
        """The port of the master serving ``key``'s slot."""
        slot = int(self.command(self.ports[0], "CLUSTER", "KEYSLOT", key))  # type: ignore[call-overload]
        for first, last, master, *_replicas in self.command(self.ports[0], "CLUSTER", "SLOTS"):  # type: ignore[attr-defined]
            if first <= slot <= last:
                return int(master[1])
        raise AssertionError(f"slot {slot} is not served")

    def flushall(self) -> None:
        for port in self.ports:
            self.command(port, "FLUSHALL")

    def start(self) -> None:
        try:
            for port, bus in zip(self.ports, self.bus_ports, strict=True):
                workdir = self.workdir / f"node-{port}"
                workdir.mkdir(parents=True, exist_ok=True)
                log = workdir / "redis.log"
                args = [*_redis_args(self.binary, workdir, port, log)]
                args += [
                    "--cluster-enabled", "yes", "--cluster-config-file", str(workdir / "nodes.conf"),
                    "--cluster-port", str(bus), "--cluster-node-timeout", "2000",
                ]  # fmt: skip
                proc = _spawn(args)
                self.procs.append(proc)
                _wait_until(f"cluster node on port {port}", lambda port=port: _ping(port), log, proc)
            nodes = [f"127.0.0.1:{p}" for p in self.ports]
            create = subprocess.run(
                [self.cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            if create.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed:\n{create.stdout}\n{create.stderr}")
            for port, proc in zip(self.ports, self.procs, strict=True):
                log = self.workdir / f"node-{port}" / "redis.log"
                _wait_until(f"cluster state ok on node {port}", lambda port=port: self._ok(port), log, proc)
        except BaseException:
            self.stop()
            raise

    def _ok(self, port: int) -> bool:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        try:
            info = client.execute_command("CLUSTER", "INFO")
        finally:
            client.close()
        text = info.decode() if isinstance(info, bytes) else str(info)
        return "cluster_state:ok" in text and f"cluster_known_nodes:{len(self.ports)}" in text

    def stop(self) -> None:
        for proc in self.procs:
            _terminate(proc)
        self.procs = []


def _ping(port: int) -> bool:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    finally:
        client.close()


def _replica_in_sync(port: int) -> bool:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        return client.info("replication").get("master_link_status") == "up"
    finally:
        client.close()


def _role(port: int) -> str:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        role = client.execute_command("ROLE")
    finally:
        client.close()
    return role[0].decode() if isinstance(role[0], bytes) else str(role[0])


def _pairs(reply: object) -> dict[str, str]:
    """A flat ``[k, v, k, v…]`` (or already a dict) reply as text."""
    if isinstance(reply, dict):
        items = list(reply.items())
    else:
        flat = list(reply)  # type: ignore[call-overload]
        items = list(zip(flat[::2], flat[1::2], strict=True))

    def text(v: object) -> str:
        return v.decode() if isinstance(v, bytes) else str(v)

    return {text(k): text(v) for k, v in items}
