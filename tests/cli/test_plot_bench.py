#!/usr/bin/env python3
"""tools/plot_bench.py on a small synthetic bench.json: the plots are written
and are PNG files. Usage: test_plot_bench.py PLOT_SCRIPT"""
import json
import os
import subprocess
import sys
import tempfile


def record(matrix, op, impl, prec, ms, nbytes, ok=True):
    return {"matrix": matrix, "op": op, "impl": impl, "precision": prec, "l2": "warm", "rows": 10, "cols": 10,
            "nnz": 100, "ok": ok, "rel_error": 0.0, "bytes": nbytes, "bytes_per_nnz": nbytes / 100,
            "median_ms": ms, "mean_ms": ms, "std_ms": 0.0}


def main(script):
    with tempfile.TemporaryDirectory() as d:
        recs = []
        for m, h in (("a", 0.1), ("b", 0.3)):
            for op in ("spmv", "spmv_t"):
                recs += [record(m, op, "hisparse", "f32", h, 600), record(m, op, "cusparse-alg1", "f32", 0.2, 880),
                         record(m, op, "cusparse-alg2", "f32", 0.25, 880)]
        path = os.path.join(d, "bench.json")
        json.dump(recs, open(path, "w"))
        subprocess.run([sys.executable, script, path, os.path.join(d, "plots")], check=True)
        made = sorted(os.listdir(os.path.join(d, "plots")))
        want = ["bytes_per_nnz_f32.png", "speedup_spmv_f32_warm.png", "speedup_spmv_t_f32_warm.png"]
        assert made == want, made
        for name in made:
            with open(os.path.join(d, "plots", name), "rb") as f:
                assert f.read(8) == b"\x89PNG\r\n\x1a\n", name
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main(sys.argv[1])
