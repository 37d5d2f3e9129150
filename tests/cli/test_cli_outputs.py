#!/usr/bin/env python3
"""How the hisparse command line writes its outputs (issue 19, classes 9-11;
docs/reliability.md, "Outputs"): what a symlink, a device, a FIFO or an existing
file as OUT gets, outputs that name an input, temporary files removed on
signals, and write errors that stop the work at once.
Usage: test_cli_outputs.py HISPARSE_BINARY MATRICES_DIR"""
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

EXE = None
MATRICES = None

CLEANUP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run(*args, ok=True, timeout=300):
    p = subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if ok and p.returncode != 0:
        raise AssertionError(f"hisparse {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr}")
    return p


def default_signals():
    # The tool leaves ignored signals ignored (nohup, background jobs); the
    # signal tests need them at their default action whatever runs this.
    for s in CLEANUP_SIGNALS:
        signal.signal(s, signal.SIG_DFL)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_mtx(path, rows, cols, entries):
    with open(path, "w") as f:
        f.write("%%MatrixMarket matrix coordinate real general\n")
        f.write(f"{rows} {cols} {len(entries)}\n")
        for (r, c), v in entries:
            f.write(f"{r + 1} {c + 1} {v!r}\n")


def current_umask():
    m = os.umask(0o022)
    os.umask(m)
    return m


class Outputs(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.jazz = os.path.join(MATRICES, "jazz.mtx")

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def temps(self, d=None):
        return [n for n in os.listdir(d or self.dir) if ".tmp" in n]

    # Class 9: what OUT names decides how it is written.

    def test_existing_output_keeps_mode_and_owner(self):
        out = self.path("out.hsp")
        run("convert", self.jazz, out)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o666 & ~current_umask(), "a new file: umask mode")
        os.chmod(out, 0o600)
        run("convert", self.jazz, out)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o600, "a replaced file keeps its mode")
        if os.geteuid() == 0:
            os.chown(out, 12345, 23456)
            run("convert", self.jazz, out, "--node-size", "64")
            st = os.stat(out)
            self.assertEqual((st.st_uid, st.st_gid), (12345, 23456), "a replaced file keeps its owner (root)")
            self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
            self.assertIn('"node_size": 64', run("info", out, "--json").stdout)
        self.assertEqual(self.temps(), [])

    def test_symlink_output_stays_a_link(self):
        os.mkdir(self.path("real"))
        run("convert", self.jazz, self.path("real", "out.hsp"))
        os.chmod(self.path("real", "out.hsp"), 0o640)
        os.symlink(os.path.join("real", "out.hsp"), self.path("link.hsp"))
        run("convert", self.jazz, self.path("link.hsp"), "--node-size", "32")
        self.assertTrue(os.path.islink(self.path("link.hsp")))
        self.assertEqual(os.readlink(self.path("link.hsp")), os.path.join("real", "out.hsp"))
        self.assertIn('"node_size": 32', run("info", self.path("real", "out.hsp"), "--json").stdout)
        self.assertEqual(stat.S_IMODE(os.stat(self.path("real", "out.hsp")).st_mode), 0o640)
        # A dangling link: its target is created, the link stays.
        os.symlink("new.mtx", self.path("dangling.mtx"))
        run("convert", self.jazz, self.path("dangling.mtx"))
        self.assertTrue(os.path.islink(self.path("dangling.mtx")))
        self.assertEqual(run("info", self.path("new.mtx"), "--json").returncode, 0)
        self.assertEqual(self.temps() + self.temps(self.path("real")), [])

    def test_device_output_is_written_through(self):
        before = os.stat("/dev/null")
        os.symlink("/dev/null", self.path("null.mtx"))
        with open(self.path("x.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix array real general\n198 1\n" + "1\n" * 198)
        run("spmv", self.jazz, "--x", self.path("x.mtx"), "--out", self.path("null.mtx"), "--device", "host")
        run("convert", self.jazz, self.path("null.mtx"))
        after = os.stat("/dev/null")
        self.assertTrue(stat.S_ISCHR(after.st_mode), "/dev/null must stay a device")
        self.assertEqual((after.st_rdev, after.st_mode), (before.st_rdev, before.st_mode))
        self.assertTrue(os.path.islink(self.path("null.mtx")))
        # A device node named directly (root only: mknod).
        try:
            os.mknod(self.path("dev.mtx"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except (PermissionError, OSError):
            return
        run("convert", self.jazz, self.path("dev.mtx"))
        self.assertTrue(stat.S_ISCHR(os.lstat(self.path("dev.mtx")).st_mode), "a device node stays a device node")
        self.assertEqual(self.temps(), [])

    def test_fifo_output_is_written_through(self):
        run("convert", self.jazz, self.path("plain.mtx"))
        os.mkfifo(self.path("pipe.mtx"))
        got = []
        reader = threading.Thread(target=lambda: got.append(read_bytes(self.path("pipe.mtx"))))
        reader.start()
        run("convert", self.jazz, self.path("pipe.mtx"), timeout=60)
        reader.join(60)
        self.assertEqual(got, [read_bytes(self.path("plain.mtx"))])
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.path("pipe.mtx")).st_mode))

    def test_directory_output_is_refused(self):
        os.mkdir(self.path("d.hsp"))
        p = run("convert", self.jazz, self.path("d.hsp"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("d.hsp: ", p.stderr)
        self.assertIn("Is a directory", p.stderr)
        self.assertTrue(os.path.isdir(self.path("d.hsp")))

    def test_output_naming_an_input_is_safe(self):
        # Every input is read completely before OUT is renamed over, so OUT may
        # be an input (the same file, or a link to it): the result is as if it
        # had been a new file.
        with open(self.jazz, "rb") as src, open(self.path("a.mtx"), "wb") as dst:
            dst.write(src.read())
        run("convert", self.path("a.mtx"), self.path("expected.mtx"))
        run("convert", self.path("a.mtx"), self.path("a.mtx"))
        self.assertEqual(read_bytes(self.path("a.mtx")), read_bytes(self.path("expected.mtx")))
        run("convert", self.path("a.mtx"), self.path("a.hsp"))
        run("convert", self.path("a.hsp"), self.path("expected.hsp"), "--node-size", "16")
        run("convert", self.path("a.hsp"), self.path("a.hsp"), "--node-size", "16")
        self.assertEqual(read_bytes(self.path("a.hsp")), read_bytes(self.path("expected.hsp")))
        os.symlink("a.hsp", self.path("link.hsp"))
        run("convert", self.path("link.hsp"), self.path("link.hsp"), "--node-size", "16")
        self.assertEqual(read_bytes(self.path("a.hsp")), read_bytes(self.path("expected.hsp")))
        self.assertTrue(os.path.islink(self.path("link.hsp")))
        # add A B OUT with OUT == A, and with OUT == B.
        run("convert", self.jazz, self.path("b.mtx"))
        run("add", self.path("a.mtx"), self.path("b.mtx"), self.path("c.mtx"), "--beta", "2", "--device", "host")
        run("add", self.path("a.mtx"), self.path("b.mtx"), self.path("a.mtx"), "--beta", "2", "--device", "host")
        self.assertEqual(read_bytes(self.path("a.mtx")), read_bytes(self.path("c.mtx")))
        run("convert", self.jazz, self.path("a.mtx"))
        run("add", self.path("a.mtx"), self.path("b.mtx"), self.path("b.mtx"), "--beta", "2", "--device", "host")
        self.assertEqual(read_bytes(self.path("b.mtx")), read_bytes(self.path("c.mtx")))
        # spmv --out X.mtx with X.mtx its --x.
        with open(self.path("x.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix array real general\n198 1\n" + "".join(f"{k % 7 - 3}\n" for k in range(198)))
        run("spmv", self.jazz, "--x", self.path("x.mtx"), "--out", self.path("y.mtx"), "--device", "host")
        run("spmv", self.jazz, "--x", self.path("x.mtx"), "--out", self.path("x.mtx"), "--device", "host")
        self.assertEqual(read_bytes(self.path("x.mtx")), read_bytes(self.path("y.mtx")))
        # gen kron --input K with OUT == K.
        write_mtx(self.path("k.mtx"), 3, 3, [((0, 0), 2.0), ((1, 2), -1.0), ((2, 1), 0.5)])
        run("gen", "kron", self.path("kk.mtx"), "--input", self.path("k.mtx"))
        run("gen", "kron", self.path("k.mtx"), "--input", self.path("k.mtx"))
        self.assertEqual(read_bytes(self.path("k.mtx")), read_bytes(self.path("kk.mtx")))
        self.assertEqual(self.temps(), [])

    # Class 10: temporary files removed on SIGINT, SIGTERM, SIGHUP.

    def start_big_gen(self, out, preexec=default_signals):
        """`gen` of a matrix that takes many seconds (about 125 M entries), killed
        by the test as soon as its temporary file has data."""
        p = subprocess.Popen([EXE, "gen", "laplace2d", out, "--n", "5000"], preexec_fn=preexec,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                self.assertIsNone(p.poll(), "gen ended before the test could signal it")
                for name in self.temps():
                    try:
                        if os.path.getsize(self.path(name)) > 0:
                            return p
                    except FileNotFoundError:
                        pass  # the output check's probe, made and removed at once
                time.sleep(0.005)
            self.fail("no temporary file appeared")
        except BaseException:
            p.kill()
            p.wait()
            raise

    def test_signal_removes_temporary_file(self):
        for sig in CLEANUP_SIGNALS:
            with self.subTest(signal=sig.name):
                p = self.start_big_gen(self.path("big.mtx"))
                p.send_signal(sig)
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    self.fail(f"gen survived {sig.name}")
                p.stderr.close()
                self.assertEqual(p.returncode, -sig, f"gen must die of {sig.name}")
                self.assertEqual(os.listdir(self.dir), [], "no temporary file and no target")

    def test_ignored_signal_stays_ignored(self):
        def ignore_hup():
            default_signals()
            signal.signal(signal.SIGHUP, signal.SIG_IGN)

        p = self.start_big_gen(self.path("big.mtx"), preexec=ignore_hup)
        try:
            p.send_signal(signal.SIGHUP)
            time.sleep(0.3)
            self.assertIsNone(p.poll(), "an ignored SIGHUP (nohup) must not stop gen")
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stderr.close()
        self.assertEqual(p.returncode, -signal.SIGTERM)
        self.assertEqual(os.listdir(self.dir), [])

    # Class 11: a failed write stops the work at once, with a clear message.

    def test_dev_full_stops_at_the_first_failed_write(self):
        # /dev/full fails every write with ENOSPC. A device is written through
        # (no temporary file); 2e9 entries would take minutes if gen went on.
        os.symlink("/dev/full", self.path("full.mtx"))
        start = time.monotonic()
        p = run("gen", "laplace2d", self.path("full.mtx"), "--n", "20000", ok=False, timeout=120)
        self.assertEqual(p.returncode, 1)
        self.assertLess(time.monotonic() - start, 60)
        self.assertIn(self.path("full.mtx") + ": write failed (No space left on device)", p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, "one message")
        p = run("convert", self.jazz, self.path("full.mtx"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("No space left on device", p.stderr)
        self.assertTrue(os.path.islink(self.path("full.mtx")))

    def test_unwritable_output_fails_before_the_work(self):
        # .hsp output is built in memory before a byte is written (6 s here
        # for n=2000); an output that cannot be created is found first.
        start = time.monotonic()
        p = run("gen", "laplace2d", self.path("no", "such", "dir", "out.hsp"), "--n", "2000", ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("out.hsp: cannot create a temporary file in", p.stderr)
        self.assertIn("(No such file or directory)", p.stderr)
        self.assertLess(time.monotonic() - start, 3.0, "the output is checked before generating")
        p = run("convert", self.jazz, self.path("no", "out.hsp"), ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("(No such file or directory)", p.stderr)
        self.assertEqual(os.listdir(self.dir), [])

    def test_full_disk(self):
        # A 1 MB tmpfs: needs mount (root, outside most containers); skipped where not allowed.
        mnt = self.path("mnt")
        os.mkdir(mnt)
        try:
            m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt], capture_output=True, text=True)
        except FileNotFoundError:
            self.skipTest("no mount command")
        if m.returncode != 0:
            self.skipTest(f"cannot mount a tmpfs: {m.stderr.strip()}")
        try:
            out = os.path.join(mnt, "out.mtx")
            with open(out, "w") as f:
                f.write("old\n")
            start = time.monotonic()
            p = run("gen", "laplace2d", out, "--n", "20000", ok=False, timeout=120)
            self.assertEqual(p.returncode, 1)
            self.assertLess(time.monotonic() - start, 60, "gen must stop at the first failed write")
            self.assertIn(out + ": write failed (No space left on device)", p.stderr)
            self.assertEqual(read_bytes(out), b"old\n", "the target is untouched")
            self.assertEqual(os.listdir(mnt), ["out.mtx"], "no temporary file left")
            # .hsp: the same through the builder's single write.
            p = run("gen", "laplace2d", os.path.join(mnt, "out.hsp"), "--n", "300", ok=False)
            self.assertEqual(p.returncode, 1)
            self.assertIn("out.hsp: write failed (No space left on device)", p.stderr)
            self.assertEqual(os.listdir(mnt), ["out.mtx"])
        finally:
            subprocess.run(["umount", mnt], check=False)


if __name__ == "__main__":
    EXE, MATRICES = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])
