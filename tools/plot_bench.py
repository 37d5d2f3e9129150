#!/usr/bin/env python3
"""Plots of `hisparse bench --json` output (matplotlib from Debian's python3-matplotlib):
  speedup_<op>_<precision>_<l2>.png  HiSparse speedup over the best cuSPARSE algorithm (copy: over
                                     copying the CSR arrays; add_t: over csr2csc + csrgeam2), per matrix
  bytes_per_nnz_<precision>.png      bytes per nonzero of HiSparse and CSR, per matrix
Usage: plot_bench.py BENCH.json OUT_DIR"""
import json
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(path, out):
    records = json.load(open(path))
    os.makedirs(out, exist_ok=True)
    groups = defaultdict(dict)
    for r in records:
        groups[(r["op"], r["precision"], r["l2"], r["matrix"])][r["impl"]] = r
    keys = sorted({k[:3] for k in groups})
    for op, prec, l2 in keys:
        names, speed = [], []
        for (o, p, l, m), impls in sorted(groups.items(), key=lambda kv: kv[0][3]):
            if (o, p, l) != (op, prec, l2) or "hisparse" not in impls or not impls["hisparse"]["ok"]:
                continue
            # Baseline: the best cuSPARSE algorithm; for copies, copying the CSR arrays; for
            # A^T + B^T, csrgeam2 after converting both operands (the pre-transposed timing
            # leaves out work HiSparse does, as the summary table's baseline does too).
            best = min((v["median_ms"] for k, v in impls.items()
                        if (k.startswith("cusparse") or k == "csr-copy") and not k.endswith("pretransposed")
                        and v["ok"]), default=None)
            if best is None:
                continue
            names.append(m)
            speed.append(best / impls["hisparse"]["median_ms"])
        if not names:
            continue
        fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(names)), 4))
        ax.bar(range(len(names)), speed, color=["tab:green" if s >= 1 else "tab:red" for s in speed])
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=70, ha="right", fontsize=7)
        ax.set_ylabel("speedup over CSR copy" if op == "copy" else "speedup over best cuSPARSE")
        title = {"spmv": "SpMV", "spmv_t": "SpMV^T", "copy": "copy", "add": "add A + B",
                 "add_t": "add A^T + B^T"}.get(op, op)
        ax.set_title(f"{title} {prec}, L2 {l2} (H100)")
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"speedup_{op}_{prec}_{l2}.png"), dpi=120)
        plt.close(fig)
    for prec in sorted({k[1] for k in groups}):
        rows = {}
        for (o, p, l, m), impls in groups.items():
            if p == prec and o == "spmv" and "hisparse" in impls and "cusparse-alg1" in impls:
                rows[m] = (impls["hisparse"]["bytes_per_nnz"], impls["cusparse-alg1"]["bytes_per_nnz"])
        if not rows:
            continue
        names = sorted(rows)
        fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(names)), 4))
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], [rows[n][0] for n in names], width=0.4, label="HiSparse")
        ax.bar([x + 0.2 for x in xs], [rows[n][1] for n in names], width=0.4, label="CSR")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(names, rotation=70, ha="right", fontsize=7)
        ax.set_ylabel("bytes per nonzero")
        ax.set_title(f"Matrix bytes per nonzero, {prec}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"bytes_per_nnz_{prec}.png"), dpi=120)
        plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
