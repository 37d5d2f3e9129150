#!/usr/bin/env python3
"""Summarise one kernel's Nsight Compute profile from the CSV pages that come
back from the GPU machine (a whole .ncu-rep is often too large to):

  ncu --import X.ncu-rep --page details --csv > details.csv
  ncu --import X.ncu-rep --page source --print-source sass --csv | gzip > sass.csv.gz

Usage: tools/ncu_summary.py [--details details.csv] [--sass sass.csv[.gz]] [--top N] [--region N]

From the details page: duration, occupancy and its limits, issue and memory
figures. From the SASS page: stall samples by reason, the hottest
instructions, and the samples per region of N instructions (to see which part
of a kernel holds the time before reading its SASS).
"""
import argparse
import collections
import csv
import gzip
import sys

DETAILS = [
    "Duration", "Registers Per Thread", "Block Limit Registers", "Block Limit Shared Mem",
    "Theoretical Occupancy", "Achieved Occupancy", "Active Warps Per Scheduler",
    "Eligible Warps Per Scheduler", "No Eligible", "Issue Slots Busy",
    "Warp Cycles Per Issued Instruction", "DRAM Throughput", "L2 Hit Rate", "L1/TEX Hit Rate",
    "Memory Throughput", "Compute (SM) Throughput",
]


def open_text(path):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path, newline="")


def details(path):
    rows = list(csv.reader(open_text(path)))
    if not rows:
        sys.exit(f"ncu_summary: {path} is empty")
    head = rows[0]
    try:
        name, unit, value = head.index("Metric Name"), head.index("Metric Unit"), head.index("Metric Value")
    except ValueError:
        sys.exit(f"ncu_summary: {path} is not an ncu --page details --csv file (no Metric Name column)")
    seen = set()
    for r in rows[1:]:
        if len(r) > value and r[name] in DETAILS and (r[name], r[unit]) not in seen:
            seen.add((r[name], r[unit]))
            print(f"{r[name]:<36} {r[value]:>12} {r[unit]}")


def sass(path, top, region):
    rows = list(csv.reader(open_text(path)))
    header = next((i for i, r in enumerate(rows) if "Source" in r and "Warp Stall Sampling (All Samples)" in r), None)
    if header is None:
        sys.exit(f"ncu_summary: {path} has no SASS source page with stall samples")
    head = rows[header]
    src, samples = head.index("Source"), head.index("Warp Stall Sampling (All Samples)")
    reasons = [(c, head.index(c)) for c in head if c.startswith("stall_") and "Not Issued" not in c]
    body = [r for r in rows[header + 1:] if len(r) > samples]
    count = [int(r[samples] or 0) for r in body]
    total = sum(count)
    if total == 0:
        sys.exit(f"ncu_summary: {path} holds no stall samples")
    print(f"\n{len(body)} instructions, {total} stall samples")
    by_reason = collections.Counter()
    for r in body:
        for c, i in reasons:
            if r[i]:
                by_reason[c] += int(r[i])
    all_reasons = sum(by_reason.values()) or 1
    print("\nby reason:")
    for c, v in by_reason.most_common(8):
        print(f"  {c:<26} {100 * v / all_reasons:5.1f}%")
    print(f"\nby region of {region} instructions:")
    for k in range(0, len(count), region):
        share = 100 * sum(count[k:k + region]) / total
        if share >= 1.0:
            print(f"  {k:5d}-{min(k + region, len(count)) - 1:<5d} {share:5.1f}%")
    print(f"\nthe {top} hottest instructions:")
    for i in sorted(sorted(range(len(count)), key=lambda i: -count[i])[:top]):
        print(f"  {i:5d} {100 * count[i] / total:5.1f}%  {body[i][src].strip()[:90]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--details")
    p.add_argument("--sass")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--region", type=int, default=100)
    a = p.parse_args()
    if not a.details and not a.sass:
        p.error("give --details, --sass or both")
    if a.details:
        details(a.details)
    if a.sass:
        sass(a.sass, a.top, a.region)


if __name__ == "__main__":
    main()
