"""A real three-node ferryd cluster over TLS with tokens, for the tests.

The binaries come from $FERRY_BIN_DIR (ferryd in it); without it they are
built with ``go build`` from the checkout into the cluster's temp dir.
"""

import base64
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def free_ports(n):
    """n distinct loopback ports free for TCP and UDP (gossip uses both)."""
    held, ports = [], []
    while len(ports) < n:
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        port = tcp.getsockname()[1]
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            udp.bind(("127.0.0.1", port))
        except OSError:
            tcp.close()
            udp.close()
            continue
        held += [tcp, udp]
        ports.append(port)
    for s in held:
        s.close()
    return ports


def wait_until(what, check, timeout=30.0, interval=0.05):
    """Poll check() until it returns a true value; fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            got = check()
            if got:
                return got
        except Exception as exc:  # remembered for the failure message
            last = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last!r})")


class Cluster:
    """Three ferryd processes on free loopback ports in a temp dir."""

    def __init__(self, nodes=3):
        self.dir = tempfile.mkdtemp(prefix="ferry-py-")
        self.bin = self._ferryd()
        pki = os.path.join(self.dir, "pki")
        self.ids = [f"node{i + 1}" for i in range(nodes)]
        self._run(self.bin, "dev-pki", "-dir", pki, "-nodes", ",".join(self.ids))
        self.ca = os.path.join(pki, "ca.pem")
        self.tokens = os.path.join(pki, "tokens.json")
        secret = os.path.join(pki, "admin.token")
        self._run(self.bin, "token", "-name", "admin", "-cluster", "admin",
                  "-file", self.tokens, "-secret-file", secret)
        with open(secret) as f:
            self.token = f.read().strip()
        self.gossip_key = base64.b64encode(os.urandom(32)).decode()
        ports = free_ports(4 * nodes)
        self.raft, self.client, self.http, self.gossip = (
            [f"127.0.0.1:{p}" for p in ports[k * nodes:(k + 1) * nodes]] for k in range(4))
        self.procs = [None] * nodes
        self._ssl = ssl.create_default_context(cafile=self.ca)

    def _ferryd(self):
        bin_dir = os.environ.get("FERRY_BIN_DIR")
        if not bin_dir:
            bin_dir = os.path.join(self.dir, "bin")
            self._run("go", "build", "-o", bin_dir + os.sep, "./cmd/ferryd", cwd=ROOT)
        path = os.path.join(bin_dir, "ferryd")
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"no ferryd executable at {path}")
        return path

    @staticmethod
    def _run(*args, cwd=None):
        res = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {res.stdout}{res.stderr}")

    def start(self, i):
        """Start node i (0-based) with its data dir as it is."""
        data = os.path.join(self.dir, self.ids[i])
        pki = os.path.join(self.dir, "pki")
        args = [self.bin, "-id", self.ids[i], "-data-dir", data, "-ip", "127.0.0.1",
                "-raft-addr", self.raft[i], "-client-addr", self.client[i],
                "-http-addr", self.http[i], "-gossip-addr", self.gossip[i],
                "-join", ",".join(self.gossip), "-bootstrap-expect", str(len(self.ids)),
                "-fast-gossip", "-gossip-key", self.gossip_key, "-tokens", self.tokens,
                "-tls-cert", os.path.join(pki, f"{self.ids[i]}.pem"),
                "-tls-key", os.path.join(pki, f"{self.ids[i]}-key.pem"), "-tls-ca", self.ca]
        # Raft's timeouts stay at their defaults (500 ms), short already, as in
        # scripts/run-cluster.sh: shorter ones make leaders flap on a busy machine.
        log = open(os.path.join(self.dir, f"{self.ids[i]}.log"), "ab")
        self.procs[i] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def start_all(self, timeout=60.0):
        """Start every node and wait until each answers /readyz."""
        for i in range(len(self.ids)):
            self.start(i)
        self.wait_ready(timeout)

    def ready(self, i):
        """Whether node i runs and its /readyz answers 200."""
        if self.procs[i] is None or self.procs[i].poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"https://{self.http[i]}/readyz", context=self._ssl,
                                        timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    def wait_ready(self, timeout=60.0):
        """Wait until every running node is ready; show the logs if not."""
        try:
            wait_until("the cluster ready", lambda: all(
                self.ready(i) for i in range(len(self.ids)) if self.procs[i]), timeout)
        except AssertionError:
            raise AssertionError(f"cluster not ready; crashed: {self.crashed()}\n{self.log_tails()}")

    def kill(self, i):
        """SIGKILL node i and reap it."""
        proc, self.procs[i] = self.procs[i], None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def index_of(self, node_id):
        """The index of a node id."""
        return self.ids.index(node_id)

    def crashed(self):
        """Ids of nodes whose process exited by itself."""
        return [self.ids[i] for i, p in enumerate(self.procs) if p and p.poll() is not None]

    def log_tails(self, lines=25):
        """The last lines of every node's log."""
        out = []
        for node in self.ids:
            path = os.path.join(self.dir, f"{node}.log")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    out.append(f"--- {node}\n" + "".join(f.readlines()[-lines:]))
        return "\n".join(out)

    def close(self):
        """Stop every node (SIGTERM, then SIGKILL) and remove the temp dir."""
        for p in self.procs:
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for i, p in enumerate(self.procs):
            if p is None:
                continue
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            self.procs[i] = None
        if not os.environ.get("FERRY_PY_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
