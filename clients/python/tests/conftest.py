"""pytest fixtures: a real dpopt-server on 127.0.0.1 (free port, temp DB).

Environment (set by the ctest entry python_client_test):
  DPOPT_SERVER_BIN  the dpopt-server binary (default: build/server/dpopt-server)
  DPOPT_SOURCE_DIR  the repository (default: three levels up)
  PYTHONPATH        the built package (build/python/site), so that the
                    tests exercise the wheel, not the source tree.
"""
import os
import socket
import subprocess
import time

import pytest

REPO = os.environ.get("DPOPT_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SERVER_BIN = os.environ.get("DPOPT_SERVER_BIN") or os.path.join(
    REPO, "build", "server", "dpopt-server")
ADULT = os.path.join(REPO, "data", "adult")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A dpopt-server process; `token` is the bootstrap curator's."""

    def __init__(self, workdir, extra_args=()):
        self.dir = workdir
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.db = os.path.join(workdir, "dpopt.db")
        self.log = open(os.path.join(workdir, "server.log"), "w")
        self.proc = subprocess.Popen(
            [SERVER_BIN, f"--db={self.db}", f"--listen={self.address}", "--workers=2",
             *extra_args], stdout=self.log, stderr=subprocess.STDOUT)
        token_file = self.db + ".curator-token"
        for _ in range(300):
            if self.proc.poll() is not None:
                raise RuntimeError(f"dpopt-server exited: {self.tail()}")
            if os.path.exists(token_file) and os.path.getsize(token_file) > 0:
                break
            time.sleep(0.1)
        with open(token_file) as f:
            self.token = f.read().strip()
        self.token_file = token_file
        # The token file is written before the port listens (and a sanitizer
        # build starts slowly): wait until the port accepts connections.
        for _ in range(300):
            if self.proc.poll() is not None:
                raise RuntimeError(f"dpopt-server exited: {self.tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                break
            except OSError:
                time.sleep(0.1)

    def tail(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-3000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    if not os.access(SERVER_BIN, os.X_OK):
        pytest.fail(f"no dpopt-server at {SERVER_BIN} (build it, or set DPOPT_SERVER_BIN)")
    s = Server(str(tmp_path_factory.mktemp("server")))
    import dpopt
    with dpopt.Client(s.address, token=s.token) as c:
        c.wait_ready(60)
        # A generous budget: the tests and the example spend some of it.
        c.import_dataset("adult", os.path.join(ADULT, "a9a"), format="libsvm", dimension=123,
                         epsilon_budget=30, delta_budget=1e-6)
        c.import_dataset("adult-test", os.path.join(ADULT, "a9a.t"), format="libsvm",
                         dimension=123, public=True)
    yield s
    s.stop()


@pytest.fixture
def curator(server):
    import dpopt
    with dpopt.Client(server.address, token=server.token) as c:
        yield c


@pytest.fixture(autouse=True)
def _no_ambient_token(monkeypatch, tmp_path):
    # Token discovery must not pick up the developer's own token.
    monkeypatch.delenv("DPOPT_TOKEN", raising=False)
    monkeypatch.delenv("DPOPT_SERVER", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
