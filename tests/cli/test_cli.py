#!/usr/bin/env python3
"""The hisparse command line against its contract (shared/design/cli.md):
results on real and random matrices, exit codes, error messages, atomic output.
Usage: test_cli.py HISPARSE_BINARY MATRICES_DIR"""
import json
import os
import re
import pty
import random
import subprocess
import sys
import tempfile
import threading
import time
import unittest

EXE = None
MATRICES = None


def run(*args, ok=True):
    p = subprocess.run([EXE, *map(str, args)], capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise AssertionError(f"hisparse {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr}")
    return p


def run_measured(*args, timeout=60):
    """Runs hisparse; returns (returncode, stderr, peak resident memory in MiB, seconds)."""
    start = time.monotonic()
    p = subprocess.Popen([EXE, *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    try:
        err = p.stderr.read()
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
        p.stderr.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, err.decode("utf-8", "replace"), usage.ru_maxrss / 1024, time.monotonic() - start


def run_env(*args, env=None, timeout=300):
    """Runs hisparse with extra environment variables, stdout and stderr piped."""
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def run_on_terminal(*args, env=None, timeout=300):
    """Runs hisparse with stderr on a pseudo-terminal; returns (returncode, what it wrote there)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([EXE, *map(str, args)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=slave, env=dict(os.environ, **(env or {})))
    finally:
        os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last writer has gone
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    try:
        p.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise
    return p.returncode, out.decode("utf-8", "replace")


def gpu_probe(tmp):
    """None where a GPU converts; else the result of `convert --device gpu` that refused."""
    p = run("convert", os.path.join(MATRICES, "jazz.mtx"), os.path.join(tmp, "probe.hsp"), "--device", "gpu", ok=False)
    if p.returncode == 0:
        return None
    if "no CUDA device" in p.stderr or "no GPU support" in p.stderr:
        return p
    raise AssertionError(f"convert --device gpu failed ({p.returncode}) otherwise:\n{p.stderr}")


def feed_fifo(path, data, deadline=30):
    """Writes data into the FIFO path once a reader has opened it (in a thread);
    gives up after deadline seconds, so a command that never reads cannot hang the test."""
    def writer():
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader yet
                time.sleep(0.01)
                continue
            os.set_blocking(fd, True)
            try:
                os.write(fd, data)
            except BrokenPipeError:
                pass
            finally:
                os.close(fd)
            return
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    return t


def read_mtx(path):
    """Minimal Matrix Market reader for checking (general coordinate or array)."""
    with open(path) as f:
        banner = f.readline().split()
        lines = [l for l in f if l.strip() and not l.startswith("%")]
    size = lines[0].split()
    if banner[2] == "array":
        return [float(l) for l in lines[1:]]
    entries = {}
    for l in lines[1:]:
        r, c, v = l.split()
        entries[(int(r) - 1, int(c) - 1)] = entries.get((int(r) - 1, int(c) - 1), 0.0) + float(v)
    return int(size[0]), int(size[1]), entries


def write_mtx(path, rows, cols, entries):
    with open(path, "w") as f:
        f.write("%%MatrixMarket matrix coordinate real general\n")
        f.write(f"{rows} {cols} {len(entries)}\n")
        for (r, c), v in entries:
            f.write(f"{r + 1} {c + 1} {v!r}\n")


def write_vec(path, values):
    with open(path, "w") as f:
        f.write("%%MatrixMarket matrix array real general\n")
        f.write(f"{len(values)} 1\n")
        for v in values:
            f.write(f"{v!r}\n")


class Cli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.seed = random.randrange(1 << 30)
        self.rng = random.Random(self.seed)

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def random_matrix(self, rows, cols, nnz):
        entries = [((self.rng.randrange(rows), self.rng.randrange(cols)), self.rng.uniform(-1, 1)) for _ in range(nnz)]
        summed = {}
        for rc, v in entries:
            summed[rc] = summed.get(rc, 0.0) + v
        return entries, summed

    def test_info_json_on_real_matrices(self):
        # young1c is complex; block_2000 counts from 0 and is rejected (see test_work_errors...).
        names = sorted(n for n in os.listdir(MATRICES) if n.endswith(".mtx") and n not in ("young1c.mtx", "block_2000.mtx"))
        self.assertGreater(len(names), 10)
        for name in names:
            j = json.loads(run("info", os.path.join(MATRICES, name), "--json").stdout)
            for key in ("rows", "cols", "nnz", "value_type", "node_size", "depth", "nodes", "bytes", "bytes_per_nnz"):
                self.assertIn(key, j, name)
            self.assertEqual(j["node_size"], 128)
            self.assertEqual(j["value_type"], "f64")
            self.assertEqual(j["bytes"]["coo"], j["nnz"] * 16, name)
            self.assertEqual(j["bytes"]["csr"], (j["rows"] + 1) * 4 + j["nnz"] * 12, name)
            self.assertEqual(set(j["nodes"]), {"inner", "leaf", "dense", "coo1", "coo2", "coo4", "coow"})
            # The default allows COOW nodes (bcspwr10's root in f64 is one); the
            # standard format has none and is never smaller.
            s = json.loads(run("info", os.path.join(MATRICES, name), "--json", "--no-wide-nodes").stdout)
            self.assertEqual(s["nodes"]["coow"], 0, name)
            self.assertLessEqual(j["bytes"]["hisparse"], s["bytes"]["hisparse"], name)
        j = json.loads(run("info", os.path.join(MATRICES, "jazz.mtx"), "--json", "--node-size", "16", "--precision", "f32").stdout)
        self.assertEqual((j["rows"], j["nnz"], j["node_size"], j["value_type"]), (198, 5484, 16, "f32"))
        self.assertIn("HiSparse", run("info", os.path.join(MATRICES, "jazz.mtx")).stdout)

    def info(self, *args):
        return json.loads(run("info", *args, "--json").stdout)

    def test_wide_nodes(self):
        """COOW nodes are the default; --no-wide-nodes builds the standard format."""
        entries, summed = self.random_matrix(60000, 50000, 20000)
        write_mtx(self.path("s.mtx"), 60000, 50000, entries)
        wide = self.info(self.path("s.mtx"), "--precision", "f32")
        plain = self.info(self.path("s.mtx"), "--precision", "f32", "--no-wide-nodes")
        self.assertGreater(wide["nodes"]["coow"], 0)
        self.assertEqual(plain["nodes"]["coow"], 0)
        self.assertLess(wide["bytes"]["hisparse"], plain["bytes"]["hisparse"])
        self.assertEqual(self.info(self.path("s.mtx"), "--precision", "f32", "--wide-nodes"), wide)
        self.assertEqual(run("info", self.path("s.mtx"), "--wide-nodes", "--no-wide-nodes", ok=False).returncode, 2)
        # An .hsp file keeps the format it carries unless told otherwise.
        run("convert", self.path("s.mtx"), self.path("std.hsp"), "--precision", "f32", "--no-wide-nodes")
        self.assertEqual(self.info(self.path("std.hsp")), plain)
        self.assertEqual(self.info(self.path("std.hsp"), "--wide-nodes"), wide)
        run("convert", self.path("std.hsp"), self.path("std2.hsp"))
        self.assertEqual(self.info(self.path("std2.hsp"))["nodes"]["coow"], 0)
        run("convert", self.path("s.mtx"), self.path("s.hsp"))
        self.assertGreater(self.info(self.path("s.hsp"))["nodes"]["coow"], 0)
        self.assertEqual(self.info(self.path("s.hsp"), "--no-wide-nodes")["nodes"]["coow"], 0)
        run("convert", self.path("s.hsp"), self.path("back.mtx"))
        rows, cols, back = read_mtx(self.path("back.mtx"))
        self.assertEqual(set(back), set(summed), f"seed {self.seed}")
        x = [1.0] * 50000
        write_vec(self.path("x.mtx"), x)
        run("spmv", self.path("s.hsp"), "--x", self.path("x.mtx"), "--out", self.path("y.mtx"), "--device", "host")
        y = read_mtx(self.path("y.mtx"))
        want = [0.0] * 60000
        for (r, c), v in summed.items():
            want[r] += v
        for got, w in zip(y, want):
            self.assertAlmostEqual(got, w, delta=1e-12 * (1 + abs(w)))
        run("add", self.path("s.hsp"), self.path("s.mtx"), self.path("c.hsp"), "--alpha", "2", "--beta", "-1",
            "--device", "host")
        c = self.info(self.path("c.hsp"))
        self.assertGreater(c["nodes"]["coow"], 0)
        run("add", self.path("s.hsp"), self.path("s.mtx"), self.path("c0.hsp"), "--device", "host", "--no-wide-nodes")
        self.assertEqual(self.info(self.path("c0.hsp"))["nodes"]["coow"], 0)
        run("convert", self.path("c.hsp"), self.path("c.mtx"))
        rows, cols, back = read_mtx(self.path("c.mtx"))
        self.assertEqual(set(back), set(summed))
        for rc, v in summed.items():
            self.assertAlmostEqual(back[rc], v, delta=1e-12 * (1 + abs(v)))

    def test_gen_wide_nodes(self):
        run("gen", "rmat", self.path("r.hsp"), "--scale", "16", "--edge-factor", "2", "--precision", "f32")
        j = self.info(self.path("r.hsp"))
        self.assertGreater(j["nodes"]["coow"], 0)
        run("gen", "rmat", self.path("s.hsp"), "--scale", "16", "--edge-factor", "2", "--precision", "f32",
            "--no-wide-nodes")
        s = self.info(self.path("s.hsp"))
        self.assertEqual(s["nodes"]["coow"], 0)
        self.assertLess(j["bytes"]["hisparse"], s["bytes"]["hisparse"])
        self.assertEqual(run("gen", "rmat", self.path("r.mtx"), "--no-wide-nodes", ok=False).returncode, 2)
        self.assertEqual(run("gen", "rmat", self.path("r.mtx"), "--wide-nodes", ok=False).returncode, 2)

    def test_complex_matrix(self):
        young = os.path.join(MATRICES, "young1c.mtx")
        j = json.loads(run("info", young, "--json").stdout)
        self.assertEqual((j["value_type"], j["rows"], j["nnz"]), ("c128", 841, 4089))
        self.assertEqual(j["bytes"]["coo"], 4089 * (8 + 16))
        run("convert", young, self.path("y.hsp"), "--node-size", "32")
        run("convert", self.path("y.hsp"), self.path("y.mtx"))
        with open(young) as f:
            lines = [l.split() for l in f if l.strip() and not l.startswith("%")][1:]
        want = {(int(r) - 1, int(c) - 1): (float(re), float(im)) for r, c, re, im in lines}
        with open(self.path("y.mtx")) as f:
            self.assertIn("complex", f.readline())
            lines = [l.split() for l in f if l.strip() and not l.startswith("%")][1:]
        got = {(int(r) - 1, int(c) - 1): (float(re), float(im)) for r, c, re, im in lines}
        self.assertEqual(got, want)
        p = run("convert", self.path("y.hsp"), self.path("y32.hsp"), "--precision", "f32", ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("imaginary parts would be lost", p.stderr)
        self.assertEqual(run("info", young, "--precision", "f16", ok=False).returncode, 2)

    def test_convert_round_trip(self):
        entries, summed = self.random_matrix(300, 200, 2000)
        write_mtx(self.path("a.mtx"), 300, 200, entries)
        for prec in ("f64", "f32"):
            run("convert", self.path("a.mtx"), self.path("a.hsp"), "--node-size", "16", "--precision", prec)
            run("convert", self.path("a.hsp"), self.path("b.mtx"))
            rows, cols, back = read_mtx(self.path("b.mtx"))
            self.assertEqual((rows, cols), (300, 200))
            self.assertEqual(set(back), set(summed), f"seed {self.seed}")
            tol = 1e-6 if prec == "f32" else 1e-15
            for rc, v in summed.items():
                self.assertAlmostEqual(back[rc], v, delta=tol * (1 + abs(v)), msg=f"seed {self.seed}")
        j = json.loads(run("info", self.path("a.hsp"), "--json").stdout)
        self.assertEqual((j["node_size"], j["value_type"]), (16, "f32"))

    def convert_bytes(self, src, name, *opts):
        out = self.path(name)
        run("convert", src, out, *opts)
        with open(out, "rb") as f:
            return f.read()

    # Real and complex shared matrices, general and symmetric, with duplicates-free
    # and wide-node-friendly patterns.
    CONVERT_MATRICES = ("jazz.mtx", "bcsstk13.mtx", "cage8.mtx", "bcspwr10.mtx", "rajat01.mtx", "lp_e226.mtx")

    def test_convert_device_host(self):
        """convert --device host is the host build of before: the same .hsp as a rebuild through another node
        size, the default (where there is no GPU), and the matrix the file holds."""
        no_gpu = gpu_probe(self.dir) is not None
        for name in self.CONVERT_MATRICES:
            src = os.path.join(MATRICES, name)
            host = self.convert_bytes(src, "host.hsp", "--device", "host")
            if no_gpu:
                self.assertEqual(self.convert_bytes(src, "default.hsp"), host, name)
            # The same logical matrix rebuilt from an .hsp of another node size: the same bytes.
            run("convert", src, self.path("d16.hsp"), "--device", "host", "--node-size", "16")
            self.assertEqual(self.convert_bytes(self.path("d16.hsp"), "again.hsp", "--device", "host",
                                                "--node-size", "128"), host, name)
            # What the .hsp holds is the file's matrix.
            run("convert", self.path("host.hsp"), self.path("back.mtx"), "--device", "host")
            rows, cols, back = read_mtx(self.path("back.mtx"))
            j = self.info(src)
            self.assertEqual((rows, cols, len(back)), (j["rows"], j["cols"], j["nnz"]), name)
        p = run("convert", os.path.join(MATRICES, "jazz.mtx"), self.path("x.hsp"), "--device", "cpu", ok=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--device must be host or gpu, not 'cpu'", p.stderr)

    def test_convert_device_gpu(self):
        """convert --device gpu writes the host build's .hsp byte for byte; without a GPU it fails with exit 1,
        a clear message, and no output."""
        refused = gpu_probe(self.dir)
        if refused is not None:
            self.assertEqual(refused.returncode, 1, refused.stderr)
            self.assertIn("--device gpu: no CUDA device is available to this build", refused.stderr)
            self.assertEqual(refused.stderr.count("\n"), 1, "one clear message")
            self.assertFalse(os.path.exists(self.path("probe.hsp")))
            p = run("convert", os.path.join(MATRICES, "young1c.mtx"), self.path("y.hsp"), "--device", "gpu", ok=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertFalse(os.path.exists(self.path("y.hsp")))
            return
        variants = ([], ["--precision", "f32"], ["--node-size", "16"], ["--node-size", "2", "--precision", "f32"],
                    ["--no-wide-nodes"], ["--node-size", "256", "--no-wide-nodes", "--precision", "f32"])
        for name in self.CONVERT_MATRICES:
            src = os.path.join(MATRICES, name)
            for opts in variants:
                host = self.convert_bytes(src, "host.hsp", "--device", "host", *opts)
                gpu = self.convert_bytes(src, "gpu.hsp", "--device", "gpu", *opts)
                self.assertEqual(gpu, host, f"{name} {opts}")
            # The default device is the GPU here: the same bytes.
            self.assertEqual(self.convert_bytes(src, "default.hsp"), self.convert_bytes(src, "host.hsp", "--device", "host"),
                             name)
        # An .hsp input that must be rebuilt (node size, precision, format) is rebuilt on the GPU the same way.
        jazz = os.path.join(MATRICES, "jazz.mtx")
        run("convert", jazz, self.path("j.hsp"), "--device", "host")
        for opts in (["--node-size", "8"], ["--precision", "f32"], ["--no-wide-nodes"]):
            self.assertEqual(self.convert_bytes(self.path("j.hsp"), "g.hsp", "--device", "gpu", *opts),
                             self.convert_bytes(self.path("j.hsp"), "h.hsp", "--device", "host", *opts), opts)
        # Random matrices with duplicates and explicit zeros, over several levels.
        entries, _ = self.random_matrix(70000, 50000, 30000)
        entries += entries[:500] + [((3, 4), 0.0), ((69999, 49999), 0.0)]
        write_mtx(self.path("r.mtx"), 70000, 50000, entries)
        for opts in ([], ["--precision", "f32", "--node-size", "8"], ["--no-wide-nodes", "--node-size", "32"]):
            self.assertEqual(self.convert_bytes(self.path("r.mtx"), "g.hsp", "--device", "gpu", *opts),
                             self.convert_bytes(self.path("r.mtx"), "h.hsp", "--device", "host", *opts),
                             f"seed {self.seed} {opts}")
        # Complex precisions have no GPU builder: built on the host, the same file.
        young = os.path.join(MATRICES, "young1c.mtx")
        self.assertEqual(self.convert_bytes(young, "yg.hsp", "--device", "gpu"),
                         self.convert_bytes(young, "yh.hsp", "--device", "host"))
        # spmv and add build .mtx operands on the GPU too: the same results as on the host.
        self.check_add("gpu")

    def test_progress_only_on_a_terminal(self):
        """The progress display writes to stderr only when it is a terminal."""
        entries, _ = self.random_matrix(5000, 5000, 200000)
        write_mtx(self.path("p.mtx"), 5000, 5000, entries)
        write_vec(self.path("x.mtx"), [1.0] * 5000)
        zero_delay = {"HISPARSE_PROGRESS_DELAY_MS": "0"}
        commands = (["convert", self.path("p.mtx"), self.path("p.hsp")],
                    ["convert", self.path("p.hsp"), self.path("p16.hsp"), "--node-size", "16", "--device", "host"],
                    ["spmv", self.path("p.mtx"), "--x", self.path("x.mtx"), "--out", self.path("y.mtx")],
                    ["add", self.path("p.mtx"), self.path("p.hsp"), self.path("c.hsp")])
        for cmd in commands:
            for env in (None, zero_delay):
                p = run_env(*cmd, env=env)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stderr, "", f"{cmd[0]}: nothing on stderr when it is a pipe")
        # On a terminal (shown from the start here), phases and a closing summary line.
        rc, out = run_on_terminal("convert", self.path("p.mtx"), self.path("t.hsp"), "--device", "host", env=zero_delay)
        self.assertEqual(rc, 0, out)
        self.assertIn("converted " + self.path("p.mtx") + " to " + self.path("t.hsp") + " in ", out)
        self.assertIn("building on the host", out)
        self.assertIn("writing " + self.path("t.hsp"), out)
        self.assertTrue(out.endswith("\n"), repr(out[-80:]))
        with open(self.path("t.hsp"), "rb") as t, open(self.path("p.hsp"), "rb") as q:
            self.assertEqual(t.read(), q.read(), "the display changes nothing in the result")
        # Work that ends before the delay shows nothing, even on a terminal.
        rc, out = run_on_terminal("convert", self.path("p.mtx"), self.path("j.hsp"),
                                  env={"HISPARSE_PROGRESS_DELAY_MS": "600000"})
        self.assertEqual((rc, out), (0, ""))
        # An error after the display erases the line: the message starts on a clean one.
        with open(self.path("trunc.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1.0\n")
        rc, out = run_on_terminal("convert", self.path("trunc.mtx"), self.path("never.hsp"), env=zero_delay)
        self.assertEqual(rc, 1, out)
        self.assertIn("hisparse: error: " + self.path("trunc.mtx"), out)
        self.assertFalse(os.path.exists(self.path("never.hsp")))

    def check_spmv(self, transpose, alpha, beta, device="host", wide=False, standard=False):
        # Wide: scattered entries over a matrix of three levels (node size 128), so
        # that its level-1 blocks become COOW nodes (the default) unless standard
        # (--no-wide-nodes) asks for the format without them.
        rows, cols = (40000, 30000) if wide else (120, 70)
        entries, summed = self.random_matrix(rows, cols, 900)
        write_mtx(self.path("a.mtx"), rows, cols, entries)
        orows, ocols = (cols, rows) if transpose else (rows, cols)
        x = [self.rng.uniform(-1, 1) for _ in range(ocols)]
        y0 = [self.rng.uniform(-1, 1) for _ in range(orows)]
        write_vec(self.path("x.mtx"), x)
        write_vec(self.path("y0.mtx"), y0)
        args = ["spmv", self.path("a.mtx"), "--x", self.path("x.mtx"), "--out", self.path("y.mtx"),
                "--alpha", alpha, "--device", device]
        if transpose:
            args.append("--transpose")
        if standard:
            args.append("--no-wide-nodes")
        if beta != 0:
            args += ["--beta", beta, "--y", self.path("y0.mtx")]
        run(*args)
        y = read_mtx(self.path("y.mtx"))
        want = [beta * v if beta != 0 else 0.0 for v in y0]
        for (r, c), v in summed.items():
            if transpose:
                r, c = c, r
            want[r] += alpha * v * x[c]
        self.assertEqual(len(y), orows)
        tol = 1e-12 if device == "host" else 1e-10  # GPU: atomics reorder the sums
        for got, w in zip(y, want):
            self.assertAlmostEqual(got, w, delta=tol * (1 + abs(w)), msg=f"seed {self.seed}")

    def test_spmv_gpu_matches_contract(self):
        """With a GPU, --device gpu gives the reference's result; without one it fails cleanly."""
        probe = run("spmv", os.path.join(MATRICES, "jazz.mtx"), "--x", os.path.join(MATRICES, "jazz.mtx"),
                    "--out", self.path("never.mtx"), "--device", "gpu", ok=False)
        if "no CUDA device" in probe.stderr or "no GPU support" in probe.stderr:
            self.assertEqual(probe.returncode, 1)
            return
        self.check_spmv(False, 1.0, 0.0, "gpu")
        self.check_spmv(True, 2.5, 0.0, "gpu")
        self.check_spmv(False, 1.5, 0.0, "gpu", wide=True)
        self.check_spmv(True, -0.5, 2.0, "gpu", wide=True)
        self.check_spmv(False, -1.0, 0.5, "gpu")
        self.check_spmv(True, 1.0, 0.0, "gpu", wide=True, standard=True)

    def test_spmv_host(self):
        self.check_spmv(False, 1.0, 0.0)
        self.check_spmv(True, 2.5, 0.0)
        self.check_spmv(False, -1.0, 0.5)
        self.check_spmv(True, 0.5, -2.0)
        self.check_spmv(False, 1.5, 0.0, wide=True)
        self.check_spmv(True, -0.5, 2.0, wide=True)
        self.check_spmv(False, 2.0, 0.5, wide=True, standard=True)
        self.check_spmv(True, 1.0, 0.0, wide=True, standard=True)

    def check_add(self, device):
        ea, sa = self.random_matrix(50, 80, 400)
        eb, sb = self.random_matrix(80, 50, 300)
        write_mtx(self.path("a.mtx"), 50, 80, ea)
        write_mtx(self.path("b.mtx"), 80, 50, eb)
        run("convert", self.path("b.mtx"), self.path("b.hsp"), "--node-size", "8")
        run("add", self.path("a.mtx"), self.path("b.hsp"), self.path("c.mtx"), "--transpose-b",
            "--alpha", 2, "--beta", -1, "--device", device)
        rows, cols, c = read_mtx(self.path("c.mtx"))
        self.assertEqual((rows, cols), (50, 80))
        want = {rc: 2 * v for rc, v in sa.items()}
        for (r, cc), v in sb.items():
            want[(cc, r)] = want.get((cc, r), 0.0) - v
        self.assertEqual(set(c), set(want), f"seed {self.seed}")
        for rc, v in want.items():
            self.assertAlmostEqual(c[rc], v, delta=1e-12, msg=f"seed {self.seed}")

    def test_add_host(self):
        self.check_add("host")

    def test_add_gpu_matches_contract(self):
        """With a GPU, add --device gpu gives the host's result; without one it fails cleanly."""
        jazz = os.path.join(MATRICES, "jazz.mtx")
        probe = run("add", jazz, jazz, self.path("never.mtx"), "--device", "gpu", ok=False)
        if "no CUDA device" in probe.stderr or "no GPU support" in probe.stderr:
            self.assertEqual(probe.returncode, 1)
            self.assertFalse(os.path.exists(self.path("never.mtx")))
            return
        self.check_add("gpu")

    def test_edit(self):
        """edit --mode set|add|remove against a dict model, the result byte for byte the model converted;
        pattern updates mean 1; bad updates exit 1 (2 for usage) and write nothing."""
        rows, cols = 60, 90
        ea, sa = self.random_matrix(rows, cols, 700)
        write_mtx(self.path("a.mtx"), rows, cols, ea)
        run("convert", self.path("a.mtx"), self.path("a.hsp"), "--node-size", "4")
        model = dict(sa)
        src = self.path("a.hsp")
        for step, mode in enumerate(["set", "add", "remove", "add", "set", "remove"]):
            present = list(model)
            ups = []
            for _ in range(80):
                if present and self.rng.random() < 0.5:
                    rc = self.rng.choice(present)
                else:
                    rc = (self.rng.randrange(rows), self.rng.randrange(cols))
                ups.append((rc, self.rng.uniform(-1, 1)))
            ups.append((ups[0][0], 0.25))  # a duplicate position: set keeps the last, add sums
            write_mtx(self.path("u.mtx"), rows, cols, ups)
            out = self.path(f"e{step}.hsp")
            before = len(model)
            # Every other step as a persistent edit (--stats): the same OUT, and a report.
            p = run("edit", src, self.path("u.mtx"), out, "--mode", mode, *(["--stats"] if step % 2 else []))
            for rc, v in ups:
                if mode == "set":
                    model[rc] = v
                elif mode == "add":
                    model[rc] = model.get(rc, 0.0) + v
                else:
                    model.pop(rc, None)
            if step % 2:
                m = re.search(r"entries: (\d+) inserted, (\d+) updated, (\d+) removed \((\d+) -> (\d+)\)", p.stdout)
                self.assertIsNotNone(m, p.stdout)
                ins, _, rem, n0, n1 = map(int, m.groups())
                self.assertEqual((n0, n1, n1 - n0), (before, len(model), ins - rem), p.stdout)
                m = re.search(r"as a version of A: (\d+) new bytes .*, (\d+) bytes shared with A \(.* of the "
                              r"version's (\d+)\)", p.stdout)
                self.assertIsNotNone(m, p.stdout)
                written, shared, total = map(int, m.groups())
                self.assertEqual(written + shared, total, p.stdout)
            else:
                self.assertEqual(p.stdout, "")
            run("convert", out, self.path("e.mtx"))
            _, _, got = read_mtx(self.path("e.mtx"))
            self.assertEqual(set(got), set(model), f"{mode}, seed {self.seed}")
            for rc, v in model.items():
                self.assertEqual(got[rc], v, f"{mode} at {rc}, seed {self.seed}")
            write_mtx(self.path("m.mtx"), rows, cols, list(model.items()))
            run("convert", self.path("m.mtx"), self.path("m.hsp"), "--node-size", "4")
            with open(out, "rb") as f, open(self.path("m.hsp"), "rb") as g:
                self.assertEqual(f.read(), g.read(), f"{mode}: not the pool of a fresh build, seed {self.seed}")
            src = out
        # Pattern updates: value 1; OUT may be A itself.
        with open(self.path("p.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate pattern general\n60 90 1\n5 7\n")
        run("convert", self.path("a.mtx"), self.path("x.mtx"))
        run("edit", self.path("x.mtx"), self.path("p.mtx"), self.path("x.mtx"))
        _, _, got = read_mtx(self.path("x.mtx"))
        self.assertEqual(got[(4, 6)], 1.0)
        # Errors: nothing written.
        with open(self.path("small.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n10 10 1\n1 1 2.0\n")
        p = run("edit", self.path("a.hsp"), self.path("small.mtx"), self.path("bad.hsp"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("the updates are 10 x 10", p.stderr)
        with open(self.path("far.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n60 90 1\n61 1 2.0\n")
        p = run("edit", self.path("a.hsp"), self.path("far.mtx"), self.path("bad.hsp"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("far.mtx:3", p.stderr)
        self.assertEqual(run("edit", self.path("a.hsp"), self.path("u.mtx"), self.path("bad.hsp"), "--mode", "replace",
                             ok=False).returncode, 2)
        self.assertEqual(run("edit", self.path("a.hsp"), self.path("a.hsp"), self.path("bad.hsp"), ok=False).returncode, 2)
        self.assertFalse(os.path.exists(self.path("bad.hsp")))

    def test_edit_gpu(self):
        """edit --device gpu writes the host edit's bytes in every mode (and --stats reports the GPU version);
        without a GPU it fails cleanly (exit 1, nothing written)."""
        rows, cols = 300, 200
        ea, sa = self.random_matrix(rows, cols, 3000)
        write_mtx(self.path("a.mtx"), rows, cols, ea)
        run("convert", self.path("a.mtx"), self.path("a.hsp"), "--node-size", "8", "--device", "host")
        ups = [((self.rng.randrange(rows), self.rng.randrange(cols)), self.rng.uniform(-1, 1)) for _ in range(200)]
        ups += [(rc, 0.5) for rc, _ in ups[:20]]  # duplicates: set keeps the last, add sums in order
        ups += [(rc, 1.0) for rc in list(sa)[:100]]
        write_mtx(self.path("u.mtx"), rows, cols, ups)
        probe = run("edit", self.path("a.hsp"), self.path("u.mtx"), self.path("never.hsp"), "--device", "gpu", ok=False)
        if "no CUDA device" in probe.stderr or "no GPU support" in probe.stderr:
            self.assertEqual(probe.returncode, 1)
            self.assertFalse(os.path.exists(self.path("never.hsp")))
            return
        self.assertEqual(probe.returncode, 0, probe.stderr)
        for mode in ["set", "add", "remove"]:
            run("edit", self.path("a.hsp"), self.path("u.mtx"), self.path("h.hsp"), "--mode", mode, "--device", "host")
            p = run("edit", self.path("a.hsp"), self.path("u.mtx"), self.path("g.hsp"), "--mode", mode,
                    "--device", "gpu", "--stats")
            with open(self.path("h.hsp"), "rb") as f, open(self.path("g.hsp"), "rb") as g:
                self.assertEqual(f.read(), g.read(), f"{mode}: the GPU edit differs from the host's, seed {self.seed}")
            m = re.search(r"entries: (\d+) inserted, (\d+) updated, (\d+) removed \((\d+) -> (\d+)\)", p.stdout)
            self.assertIsNotNone(m, p.stdout)
            ins, _, rem, n0, n1 = map(int, m.groups())
            self.assertEqual(n1 - n0, ins - rem, p.stdout)
            self.assertRegex(p.stdout, r"as a version of A on the GPU: \d+ new bytes")

    def test_usage_errors_exit_2(self):
        self.assertEqual(run(ok=False).returncode, 2)
        self.assertEqual(run("frobnicate", ok=False).returncode, 2)
        self.assertEqual(run("info", ok=False).returncode, 2)
        self.assertEqual(run("info", "x.mtx", "--bogus", ok=False).returncode, 2)
        self.assertEqual(run("info", os.path.join(MATRICES, "jazz.mtx"), "--node-size", "3", ok=False).returncode, 2)
        self.assertEqual(run("convert", os.path.join(MATRICES, "jazz.mtx"), self.path("out.txt"), ok=False).returncode, 2)
        write_vec(self.path("x.mtx"), [1.0] * 198)
        p = run("spmv", os.path.join(MATRICES, "jazz.mtx"), "--x", self.path("x.mtx"), "--out", self.path("y.mtx"),
                "--beta", "2", ok=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(run("spmv", os.path.join(MATRICES, "jazz.mtx"), "--x", self.path("x.mtx"), "--out",
                             self.path("y.mtx"), "--device", "tpu", ok=False).returncode, 2)
        # An empty number is a usage error, not 0 (which wrote all-zero output).
        for opt in ("--alpha", "--beta"):
            p = run("spmv", os.path.join(MATRICES, "jazz.mtx"), "--x", self.path("x.mtx"), "--out", self.path("y.mtx"),
                    opt, "", "--device", "host", ok=False)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(opt, p.stderr)
            p = run("add", os.path.join(MATRICES, "jazz.mtx"), os.path.join(MATRICES, "jazz.mtx"), self.path("c.mtx"),
                    opt, "", "--device", "host", ok=False)
            self.assertEqual(p.returncode, 2, p.stderr)
        self.assertFalse(os.path.exists(self.path("y.mtx")))
        self.assertFalse(os.path.exists(self.path("c.mtx")))
        # y is Matrix Market text: an output named .hsp (or anything else) is refused.
        for out in ("y.hsp", "y.txt"):
            p = run("spmv", os.path.join(MATRICES, "jazz.mtx"), "--x", self.path("x.mtx"), "--out", self.path(out),
                    "--device", "host", ok=False)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(".mtx", p.stderr)
            self.assertFalse(os.path.exists(self.path(out)))
        self.assertEqual(run("--help").returncode, 0)

    def test_work_errors_exit_1_with_file_and_line(self):
        p = run("info", self.path("missing.mtx"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("missing.mtx", p.stderr)
        with open(self.path("bad.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n% c\n3 3 2\n1 1 1.0\n4 1 2.0\n")
        p = run("info", self.path("bad.mtx"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("bad.mtx:5", p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, "one clear message")
        # bench passes over bad files of its suite, but not one it was given.
        p = run("bench", "--host-only", "--no-suite", os.path.join(MATRICES, "block_2000.mtx"), ok=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("block_2000.mtx", p.stderr)
        p = run("info", os.path.join(MATRICES, "block_2000.mtx"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("block_2000.mtx:54: column index 0 out of range", p.stderr)
        p = run("info", os.path.join(MATRICES, "young1c.mtx"), "--precision", "f64", ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("young1c.mtx:1: complex values are not supported for f64", p.stderr)
        with open(self.path("bad.hsp"), "wb") as f:
            f.write(b"HISPARSE" + b"\0" * 20)
        p = run("info", self.path("bad.hsp"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("bad.hsp", p.stderr)
        write_vec(self.path("x.mtx"), [1.0] * 5)
        p = run("spmv", os.path.join(MATRICES, "jazz.mtx"), "--x", self.path("x.mtx"), "--out", self.path("y.mtx"),
                "--device", "host", ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("x.mtx", p.stderr)
        self.assertFalse(os.path.exists(self.path("y.mtx")))

    def test_vector_length_checked_before_allocating(self):
        """A 61-byte vector file declaring 2^30 entries is refused from its size line
        (op(A)'s dimension is passed to the reader), for --x and --y alike: no 8 GB, no 23 s."""
        jazz = os.path.join(MATRICES, "jazz.mtx")
        with open(self.path("huge.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n1073741824 1 0\n")
        self.assertEqual(os.path.getsize(self.path("huge.mtx")), 61)
        write_vec(self.path("x.mtx"), [1.0] * 198)
        for args in (["--x", self.path("huge.mtx")],
                     ["--x", self.path("x.mtx"), "--beta", "2", "--y", self.path("huge.mtx")]):
            rc, err, rss_mib, seconds = run_measured("spmv", jazz, *args, "--out", self.path("y.mtx"),
                                                     "--device", "host")
            self.assertEqual(rc, 1, err)
            self.assertIn("huge.mtx:2: vector of 1073741824 elements, expected 198", err)
            self.assertLess(rss_mib, 300, err)
            self.assertLess(seconds, 20)
            self.assertFalse(os.path.exists(self.path("y.mtx")))
        # The transpose's dimensions: lp_e226 is 223 x 472.
        write_vec(self.path("x223.mtx"), [1.0] * 223)
        p = run("spmv", os.path.join(MATRICES, "lp_e226.mtx"), "--x", self.path("x223.mtx"), "--out",
                self.path("y.mtx"), "--device", "host", ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("x223.mtx:2: vector of 223 elements, expected 472", p.stderr)
        run("spmv", os.path.join(MATRICES, "lp_e226.mtx"), "--x", self.path("x223.mtx"), "--out",
            self.path("y.mtx"), "--device", "host", "--transpose")

    def test_matrix_header_claiming_more_than_the_file_holds(self):
        """About 100 bytes that promise 10^9 entries: a quick, small failure with file and line."""
        with open(self.path("claim.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real symmetric\n1000000 1000000 1000000000\n1 1 1\n")
        rc, err, rss_mib, seconds = run_measured("info", self.path("claim.mtx"))
        self.assertEqual(rc, 1, err)
        self.assertIn("claim.mtx:4: unexpected end of file: expected 1000000000 entries, found 1", err)
        self.assertLess(rss_mib, 300)
        self.assertLess(seconds, 20)

    def test_peak_memory_per_entry(self):
        """info and convert stay within the peak host memory per entry that
        docs/reliability.md states ("Peak host memory"), measured as the
        child's VmHWM (ru_maxrss) above a one-entry run's."""
        # gcc links the sanitizer runtimes dynamically, clang statically.
        libs = subprocess.run(["ldd", EXE], capture_output=True, text=True).stdout
        try:
            symbols = subprocess.run(["nm", EXE], capture_output=True, text=True).stdout
        except OSError:
            symbols = ""
        if any(s in libs for s in ("libasan", "libtsan", "libmsan")) or any(
                s in symbols for s in ("__asan_init", "__tsan_init", "__msan_init")):
            self.skipTest("a sanitizer's shadow memory and quarantine inflate the peak")
        with open(self.path("one.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 1\n")
        rc, err, base, _ = run_measured("info", self.path("one.mtx"))
        self.assertEqual(rc, 0, err)
        big = self.path("lap.mtx")
        run("gen", "laplace2d", big, "--n", 450)  # 1 010 700 entries
        entries = 1010700
        mib_per_entry = 1 / (1024 * 1024)
        # Built on the host (a GPU build, the default where there is one, adds
        # the CUDA runtime's own memory, which does not grow with the matrix);
        # writing an .hsp out as .mtx never starts CUDA, whatever the machine.
        cases = [  # (command, bytes per entry)
            (("info", big), 112),
            (("convert", big, self.path("lap.hsp"), "--device", "host"), 112),
            (("info", big, "--precision", "c128"), 144),
            (("convert", big, self.path("lap_c.hsp"), "--precision", "c128", "--device", "host"), 144),
            (("convert", self.path("lap.hsp"), self.path("back.mtx")), 64),
        ]
        for args, per_entry in cases:
            rc, err, rss, _ = run_measured(*args, timeout=120)
            self.assertEqual(rc, 0, err)
            self.assertLess(rss - base, per_entry * entries * mib_per_entry,
                            f"hisparse {' '.join(map(str, args))}: {rss - base:.1f} MiB above the base "
                            f"for {entries} entries (> {per_entry} bytes per entry)")
        hsp_bytes = os.path.getsize(self.path("lap.hsp"))
        rc, err, rss, _ = run_measured("info", self.path("lap.hsp"))
        self.assertEqual(rc, 0, err)
        self.assertLess(rss - base, (2 * hsp_bytes + 16 * entries) * mib_per_entry)

    def test_line_length_is_bounded(self):
        """/dev/zero named .mtx has no line end: refused at the 1 MiB line limit, with file and line."""
        if os.path.exists("/dev/zero"):
            os.symlink("/dev/zero", self.path("zero.mtx"))
            rc, err, rss_mib, seconds = run_measured("info", self.path("zero.mtx"))
            self.assertEqual(rc, 1, err)
            self.assertIn("zero.mtx:1: line longer than the limit of 1048576 bytes", err)
            self.assertLess(rss_mib, 300)
            self.assertLess(seconds, 20)
        with open(self.path("long.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n% fine\n%" + "x" * (1 << 20) + "\n1 1 0\n")
        p = run("info", self.path("long.mtx"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("long.mtx:3: line longer than the limit of 1048576 bytes", p.stderr)

    def test_fifo_inputs_are_read_once(self):
        """A FIFO named .mtx (matrix or vector) is read in one pass: the command finishes."""
        matrix = b"%%MatrixMarket matrix coordinate real general\n% via a FIFO\n3 2 3\n1 1 1.5\n3 2 -2\n2 1 4\n"
        os.mkfifo(self.path("a.mtx"))
        writer = feed_fifo(self.path("a.mtx"), matrix)
        p = subprocess.run([EXE, "info", self.path("a.mtx"), "--json"], capture_output=True, text=True, timeout=60)
        writer.join()
        self.assertEqual(p.returncode, 0, p.stderr)
        j = json.loads(p.stdout)
        self.assertEqual((j["rows"], j["cols"], j["nnz"]), (3, 2, 3))
        # Matrix and vectors all through FIFOs.
        with open(self.path("a.txt"), "wb") as f:
            f.write(matrix)
        os.mkfifo(self.path("x.mtx"))
        os.mkfifo(self.path("y0.mtx"))
        writers = [feed_fifo(self.path("a.mtx"), matrix),
                   feed_fifo(self.path("x.mtx"), b"%%MatrixMarket matrix array real general\n2 1\n1\n10\n"),
                   feed_fifo(self.path("y0.mtx"), b"%%MatrixMarket matrix coordinate real general\n3 1 1\n2 1 1\n")]
        p = subprocess.run([EXE, "spmv", self.path("a.mtx"), "--x", self.path("x.mtx"), "--beta", "0.5", "--y",
                            self.path("y0.mtx"), "--out", self.path("y.mtx"), "--device", "host"],
                           capture_output=True, text=True, timeout=60)
        for w in writers:
            w.join()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(read_mtx(self.path("y.mtx")), [1.5, 4.5, -20.0])

    def test_symmetric_entries_above_the_diagonal_are_refused(self):
        """Matrix Market stores the lower triangle: listing (1, 2) and (2, 1) would double the value."""
        with open(self.path("both.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real symmetric\n2 2 3\n1 1 4\n2 1 1\n1 2 1\n")
        p = run("info", self.path("both.mtx"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("both.mtx:5: entry (1, 2) above the diagonal in a symmetric file", p.stderr)
        with open(self.path("skew.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 2\n2 1 1\n1 1 0\n")
        p = run("convert", self.path("skew.mtx"), self.path("skew.hsp"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("skew.mtx:4: diagonal entry (1, 1) in a skew-symmetric file", p.stderr)
        self.assertFalse(os.path.exists(self.path("skew.hsp")))

    def test_alpha_beta_range_follows_the_precision(self):
        """--alpha/--beta beyond the value type's range are usage errors, not inf: 1e400
        for any precision, 1e39 for f32 and c64, whether asked for or an .hsp file's own."""
        jazz = os.path.join(MATRICES, "jazz.mtx")
        write_vec(self.path("x.mtx"), [1.0] * 198)
        run("convert", jazz, self.path("j32.hsp"), "--precision", "f32")
        spmv = ["spmv", jazz, "--x", self.path("x.mtx"), "--out", self.path("y.mtx"), "--device", "host"]
        add = ["add", jazz, jazz, self.path("c.mtx"), "--device", "host"]
        cases = [
            (spmv, ["--alpha", "1e400"], "--alpha"),
            (spmv, ["--beta", "-1e400", "--y", self.path("x.mtx")], "--beta"),
            (spmv, ["--alpha", "1e39", "--precision", "f32"], "--alpha"),
            (spmv, ["--alpha", "-1e39", "--precision", "c64"], "--alpha"),
            (spmv, ["--beta", "1e39", "--y", self.path("x.mtx"), "--precision", "f32"], "--beta"),
            (add, ["--alpha", "1e400"], "--alpha"),
            (add, ["--beta", "1e39", "--precision", "f32"], "--beta"),
            (["spmv", self.path("j32.hsp"), *spmv[2:]], ["--alpha", "1e39"], "--alpha"),
            (["add", self.path("j32.hsp"), jazz, self.path("c.mtx"), "--device", "host"], ["--beta", "1e39"], "--beta"),
        ]
        for cmd, opts, name in cases:
            p = run(*cmd, *opts, ok=False)
            self.assertEqual(p.returncode, 2, f"{cmd[0]} {opts}: {p.stderr}")
            self.assertIn(name, p.stderr)
            self.assertIn("out of the range of", p.stderr)
            self.assertFalse(os.path.exists(self.path("y.mtx")))
            self.assertFalse(os.path.exists(self.path("c.mtx")))
        # In range for the precision used: accepted (1e39 is an ordinary f64).
        run(*spmv, "--alpha", "1e39")
        y = read_mtx(self.path("y.mtx"))
        self.assertTrue(all(abs(v) < float("inf") for v in y) and max(y) >= 1e39, y[:5])
        run(*spmv, "--alpha", "3e38", "--precision", "f32")
        run(*add, "--beta", "1e-400", "--precision", "f32")

    def test_messages_escape_control_bytes(self):
        """Input text quoted in a message (tokens, banner words, file names) shows
        control bytes escaped, so an escape sequence never reaches the terminal."""
        with open(self.path("esc.mtx"), "wb") as f:
            f.write(b"%%MatrixMarket matrix coordinate real \x1b[2Jgeneral\n1 1 0\n")
        p = run("info", self.path("esc.mtx"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("esc.mtx:1: unknown symmetry '\\x1b[2Jgeneral'", p.stderr)
        self.assertNotIn("\x1b", p.stderr)
        name = self.path("bad\x1b]0;pwned\x07.mtx")
        with open(name, "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 \x1b[31m\n")
        p = run("info", name, ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("bad\\x1b]0;pwned\\x07.mtx:3: invalid value '\\x1b[31m'", p.stderr)
        self.assertNotIn("\x1b", p.stderr)
        self.assertNotIn("\x07", p.stderr)
        p = run("info", self.path("bad\x1b[2J.txt"), ok=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("bad\\x1b[2J.txt", p.stderr)
        self.assertNotIn("\x1b", p.stderr)
        p = run("info", os.path.join(MATRICES, "jazz.mtx"), "--precision", "\x1b[5m", ok=False)
        self.assertEqual(p.returncode, 2)
        self.assertNotIn("\x1b", p.stderr)
        write_vec(self.path("x.mtx"), [1.0] * 198)
        p = run("spmv", os.path.join(MATRICES, "jazz.mtx"), "--x", self.path("x.mtx"), "--out", self.path("y.mtx"),
                "--alpha", "\x1b[5m", ok=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("'\\x1b[5m' is not a number", p.stderr)
        self.assertNotIn("\x1b", p.stderr)
        # info's text output names the file, escaped too.
        with open(self.path("ok\x1b[1m.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 2\n")
        p = run("info", self.path("ok\x1b[1m.mtx"))
        self.assertIn("ok\\x1b[1m.mtx: 1 x 1", p.stdout)
        self.assertNotIn("\x1b", p.stdout)
        # Option values that our own checks quote: --device, bench --ops, gen's kind.
        jazz = os.path.join(MATRICES, "jazz.mtx")
        for args, text in ((["spmv", jazz, "--x", self.path("x.mtx"), "--out", self.path("y.mtx"),
                             "--device", "\x1b[5m"], "--device must be host or gpu, not '\\x1b[5m'"),
                           (["bench", "--ops", "spmv,\x1b[5m", "--host-only"], "unknown operation '\\x1b[5m'"),
                           (["gen", "\x1b[5m", self.path("g.mtx")], "unknown matrix kind '\\x1b[5m'")):
            p = run(*args, ok=False)
            self.assertEqual(p.returncode, 2, f"{args}: {p.stderr}")
            self.assertIn(text, p.stderr)
            self.assertNotIn("\x1b", p.stderr)

    def test_parse_errors_escape_arguments(self):
        """CLI11's own messages repeat the raw argument: shown escaped, with its trailer."""
        jazz = os.path.join(MATRICES, "jazz.mtx")
        for args, text in ((["info", jazz, "--\x1b[2Jx"], "--\\x1b[2Jx"),
                           (["info", jazz, "extra\x1b]0;t\x07"], "extra\\x1b]0;t\\x07"),
                           (["info", jazz, "--node-size", "3\x1b[5m"], "3\\x1b[5m")):
            p = run(*args, ok=False)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(text, p.stderr)
            self.assertNotIn("\x1b", p.stderr)
            self.assertNotIn("\x07", p.stderr)
            self.assertIn("Run with --help", p.stderr)
        p = run("info", jazz, "--bogus", ok=False)
        self.assertIn("--bogus", p.stderr)
        self.assertTrue(p.stderr.endswith("\n"))
        # A validator's message is escaped once, not twice.
        p = run("info", jazz, "--node-size", "a\\b", ok=False)
        self.assertIn("not 'a\\\\b'", p.stderr)
        self.assertNotIn("\\\\\\\\", p.stderr)

    def test_hsp_narrowing_follows_the_matrix_market_rules(self):
        """--precision f32 on an f64 .hsp converts like the Matrix Market reader:
        16777217 (inexact) and 1e39 (overflow) are errors naming the file, the
        value and its place, not 16777216 and inf (issue 19, class 6)."""
        write_vec(self.path("x.mtx"), [1.0] * 4)
        for value, message in ((16777217.0, "integer value 16777217 is not exactly representable in f32"),
                               (1e39, "value 1e+39 overflows f32")):
            write_mtx(self.path("a.mtx"), 3, 4, [((0, 0), 1.5), ((2, 1), value)])
            run("convert", self.path("a.mtx"), self.path("a.hsp"))
            self.assertEqual(self.info(self.path("a.hsp"))["value_type"], "f64")
            for args in (["convert", self.path("a.hsp"), self.path("b.hsp"), "--precision", "f32"],
                         ["convert", self.path("a.hsp"), self.path("b.mtx"), "--precision", "c64",
                          "--node-size", "4"],
                         ["info", self.path("a.hsp"), "--precision", "f32"],
                         ["spmv", self.path("a.hsp"), "--x", self.path("x.mtx"), "--out", self.path("y.mtx"),
                          "--precision", "f32", "--device", "host"]):
                p = run(*args, ok=False)
                self.assertEqual(p.returncode, 1, f"{args}: {p.stderr}")
                self.assertIn(self.path("a.hsp") + ": ", p.stderr)
                self.assertIn(message.replace("f32", "c64") if "c64" in args else message, p.stderr)
                self.assertIn("at (row 2, column 1), 0-based", p.stderr)
                self.assertEqual(p.stderr.count("\n"), 1, "one clear message")
                for out in ("b.hsp", "b.mtx", "y.mtx"):
                    self.assertFalse(os.path.exists(self.path(out)))
            # add: B follows A's precision (f32 here), by the same rules.
            run("convert", os.path.join(MATRICES, "jazz.mtx"), self.path("j32.hsp"), "--precision", "f32")
            write_mtx(self.path("a.mtx"), 198, 198, [((0, 0), 1.5), ((2, 1), value)])
            run("convert", self.path("a.mtx"), self.path("a198.hsp"))
            p = run("add", self.path("j32.hsp"), self.path("a198.hsp"), self.path("c.mtx"), "--device", "host",
                    ok=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(self.path("a198.hsp") + ": " + message, p.stderr)
            self.assertFalse(os.path.exists(self.path("c.mtx")))
        # Exact and in-range values convert, with or without a node-size change.
        write_mtx(self.path("a.mtx"), 3, 4, [((0, 0), 1.5), ((2, 1), 16777216.0), ((1, 3), 3e38)])
        run("convert", self.path("a.mtx"), self.path("a.hsp"))
        for extra in ([], ["--node-size", "4"], ["--no-wide-nodes"]):
            run("convert", self.path("a.hsp"), self.path("b.hsp"), "--precision", "f32", *extra)
            self.assertEqual(self.info(self.path("b.hsp"))["value_type"], "f32")
            run("convert", self.path("b.hsp"), self.path("b.mtx"))
            rows, cols, got = read_mtx(self.path("b.mtx"))
            self.assertEqual((rows, cols), (3, 4))
            self.assertEqual(got[(0, 0)], 1.5)
            self.assertEqual(got[(2, 1)], 16777216.0)
            self.assertAlmostEqual(got[(1, 3)] / 3e38, 1.0, places=6)
        run("spmv", self.path("a.hsp"), "--x", self.path("x.mtx"), "--out", self.path("y.mtx"), "--precision", "f32",
            "--device", "host")
        y = read_mtx(self.path("y.mtx"))
        self.assertEqual((y[0], y[2]), (1.5, 16777216.0))

    def test_output_is_atomic(self):
        target = self.path("keep.hsp")
        run("convert", os.path.join(MATRICES, "jazz.mtx"), target)
        before = open(target, "rb").read()
        with open(self.path("trunc.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1.0\n")
        self.assertEqual(run("convert", self.path("trunc.mtx"), target, ok=False).returncode, 1)
        self.assertEqual(open(target, "rb").read(), before, "a failed convert must leave OUT untouched")
        p = run("convert", os.path.join(MATRICES, "jazz.mtx"), os.path.join(self.dir, "no", "such", "dir.hsp"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertEqual([n for n in os.listdir(self.dir) if ".tmp" in n], [], "no temporary files left behind")

    def test_bench_conversion_flags_exclude_each_other(self):
        p = run("bench", "--host-only", "--gpu-conversion-only", "--no-suite", "--family", "laplace2d:n=40", ok=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("excludes", p.stderr)

    def test_bench_host_conversion(self):
        out = self.path("conv.json")
        p = run("bench", "--host-only", "--no-suite", "--family", "laplace2d:n=40", "--family", "rmat:scale=10",
                "--precision", "f32", "--json", out, "--csv", self.path("conv.csv"))
        self.assertIn("to HiSparse ms", p.stdout)
        recs = json.load(open(out))
        self.assertEqual(len(recs), 4)
        for r in recs:
            self.assertEqual((r["op"], r["precision"], r["l2"]), ("convert", "f32", "host"))
            self.assertIn(r["impl"], ("hisparse-build", "csr-build"))
            self.assertTrue(r["ok"])
            self.assertGreater(r["median_ms"], 0)
        lap = [r for r in recs if r["matrix"] == "laplace2d:n=40"]
        self.assertEqual({r["nnz"] for r in lap}, {5 * 40 * 40 - 4 * 40})
        self.assertEqual(open(self.path("conv.csv")).read().count("\n"), 5)
        # Scattered entries: the default (COOW nodes) beats CSR, the standard format does not.
        scattered = "uniform:n=40000,cols=30000,per-row=1"
        sizes = {}
        for opt in ([], ["--no-wide-nodes"]):
            run("bench", "--host-only", "--no-suite", "--family", scattered, "--precision", "f32", "--json", out, *opt)
            sizes[tuple(opt)] = {r["impl"]: r["bytes"] for r in json.load(open(out))}
        self.assertLess(sizes[()]["hisparse-build"], sizes[()]["csr-build"])
        self.assertGreater(sizes[("--no-wide-nodes",)]["hisparse-build"], sizes[()]["csr-build"])
        self.assertEqual(run("bench", "--l2", "lukewarm", ok=False).returncode, 2)
        # --ops none: the conversion records alone (an A/B of conversions skips the SpMV benches).
        run("bench", "--host-only", "--ops", "none", "--no-suite", "--family", "laplace2d:n=40", "--precision", "f32",
            "--json", out)
        self.assertEqual({r["op"] for r in json.load(open(out))}, {"convert"})
        p = run("bench", "--ops", "spmv,frobnicate", ok=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("frobnicate", p.stderr)
        p = run("bench", "--preset", "huge", ok=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("huge", p.stderr)

    def test_bench_gpu_conversion(self):
        """bench --conversion adds GPU conversion records where there is a GPU; without one, bench refuses."""
        out = self.path("conv.json")
        args = ["bench", "--conversion", "--no-suite", "--family", "laplace2d:n=40", "--family", "rmat:scale=10",
                "--precision", "f32,f64", "--ops", "spmv", "--runs", "3", "--warmup", "1", "--warmup-ms", "0",
                "--json", out, "--csv", self.path("conv.csv")]
        if gpu_probe(self.dir) is not None:
            p = run(*args, ok=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("bench needs a CUDA device", p.stderr)
            return
        p = run(*args)
        self.assertIn("Conversion on the GPU", p.stdout)
        recs = json.load(open(out))
        conv = [r for r in recs if r["op"] == "convert"]
        impls = {"hisparse-build": "coo->hisparse", "csr-build": "coo->csr", "hisparse-gpu": "csr->hisparse",
                 "hisparse-gpu-stream": "csr->hisparse", "hisparse-gpu-to-csr": "hisparse->csr",
                 "hisparse-gpu-to-csr-stream": "hisparse->csr", "cusparse-csr2csc": "csr->csc"}
        self.assertEqual(len(conv), 2 * 2 * len(impls))
        for r in conv:
            self.assertTrue(r["ok"], r)
            self.assertEqual(r["conversion"], impls[r["impl"]])
            if r["impl"] in ("hisparse-build", "csr-build"):
                self.assertEqual(r["l2"], "host")
                self.assertNotIn("spmv_equivalents", r)
                continue
            for key in ("spmv_ms", "spmv_equivalents", "mentries_per_s", "peak_work_bytes", "median_ms"):
                self.assertIn(key, r)
            self.assertGreater(r["spmv_ms"], 0)
            self.assertAlmostEqual(r["spmv_equivalents"], r["median_ms"] / r["spmv_ms"], delta=1e-9 * r["spmv_equivalents"] + 1e-12)
            self.assertAlmostEqual(r["mentries_per_s"], r["nnz"] / (r["median_ms"] * 1e3), delta=1e-6 * r["mentries_per_s"])
        # The SpMV records are there as before, with their old keys only.
        spmv = [r for r in recs if r["op"] == "spmv" and r["impl"] == "hisparse"]
        self.assertEqual(len(spmv), 4)
        for r in spmv:
            self.assertNotIn("conversion", r)
            self.assertNotIn("spmv_equivalents", r)
        header = open(self.path("conv.csv")).readline().strip().split(",")
        self.assertEqual(header[:14], "matrix,op,impl,precision,l2,rows,cols,nnz,ok,rel_error,bytes,median_ms,mean_ms,std_ms".split(","))

    def test_demo(self):
        p = run("demo", "--grid", "64", "--device", "host")
        self.assertIn("HiSparse / CSR", p.stdout)
        self.assertEqual(p.stdout.count(" ok"), 2, p.stdout)
        self.assertIn("on the host in", p.stdout)
        if gpu_probe(self.dir) is not None:
            return
        # With the GPU: SpMV beside cuSPARSE, and the build on the host beside the GPU's, checked.
        p = run("demo", "--grid", "64")
        for prec in ("f32", "f64"):
            line = next((l for l in p.stdout.splitlines() if l.strip().startswith(prec + " build")), None)
            self.assertIsNotNone(line, p.stdout)
            self.assertIn("(upload excluded)", line)
            self.assertIn("HiSparse SpMVs", line)
            self.assertIn("same bytes", line)


if __name__ == "__main__":
    EXE, MATRICES = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])
