#!/usr/bin/env python3
"""gpu_results.py OUT_DIR DEST_DIR: files the results of one `scripts/gpu_run.sh` call (fetched from the GPU
machine) under reports/: DEST/quantize.json (bench_quantize_cuda's Google Benchmark JSON, plus the torch.compile
peer under "torch_peer" and the GPU test/sanitizer summary under "conformance"), DEST/gemm.json (bench_gemm_cuda),
and prints the Markdown tables of quantize.md / gemm.md (medians over the repetitions) for the write-up.
With --baseline KIND it also copies both JSON files to reports/baselines/KIND/ (the comparison baseline)."""
import argparse
import json
import pathlib
import shutil
import sys


def medians(bench):
    rows = bench.get("benchmarks", [])
    if any(b.get("run_type") == "aggregate" for b in rows):  # repetitions: their medians only
        rows = [b for b in rows if b.get("aggregate_name") == "median"]
    for b in rows:
        b["name"] = b["name"].removesuffix("_median").replace("/min_time:0.500", "").replace("/min_time:0.200", "").replace("/manual_time", "")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out_dir")
    ap.add_argument("dest_dir")
    ap.add_argument("--baseline", metavar="KIND")
    a = ap.parse_args()
    src, dest = pathlib.Path(a.out_dir), pathlib.Path(a.dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    summary = (src / "summary.txt").read_text().splitlines() if (src / "summary.txt").exists() else []
    q = json.loads((src / "bench_quantize_cuda.json").read_text())
    if (src / "torch_peer.json").exists():
        q["torch_peer"] = json.loads((src / "torch_peer.json").read_text())
    q["conformance"] = {"summary_lines": [l for l in summary if l.startswith(("test ", "sanitizer ", "overall", "date", "gpu"))]}
    (dest / "quantize.json").write_text(json.dumps(q, indent=1) + "\n")
    g = None
    if (src / "bench_gemm_cuda.json").exists():
        g = json.loads((src / "bench_gemm_cuda.json").read_text())
        (dest / "gemm.json").write_text(json.dumps(g, indent=1) + "\n")
    if a.baseline:
        kind = a.baseline
        base = pathlib.Path(__file__).resolve().parent.parent / "reports" / "baselines" / kind
        base.mkdir(parents=True, exist_ok=True)
        shutil.copy(dest / "quantize.json", base / "quantize.json")
        if g is not None:
            shutil.copy(dest / "gemm.json", base / "gemm.json")
    print("| quantizer | ms | GB/s | frac_of_copy | frac_of_copy_moved |\n|---|---:|---:|---:|---:|")
    for b in medians(q):
        if "frac_of_copy" not in b:
            continue
        moved = f"{b['frac_of_copy_moved']:.3f}" if "frac_of_copy_moved" in b else ""
        print(f"| {b['name']} | {b['real_time']:.3f} | {b.get('GBps', 0):.0f} | {b['frac_of_copy']:.3f} | {moved} |")
    peer = q.get("torch_peer", {}).get("benchmarks", [])
    if peer:
        ours = {b["name"]: b for b in medians(q)}
        print("\n| algorithm | torch.compile ms | qtc ms | speed-up |\n|---|---:|---:|---:|")
        for p in peer:
            name = p["name"].removesuffix("_torch_compile")
            if name in ours:
                print(f"| {name} | {p['median_ms']:.3f} | {ours[name]['real_time']:.3f} | {p['median_ms'] / ours[name]['real_time']:.2f}x |")
    if g is not None:
        print("\n| GEMM | time | TFLOP/s | ratio |\n|---|---:|---:|---:|")
        for b in medians(g):
            ratio = next((f"{k} {b[k]:.3f}" for k in ("frac_of_cublaslt", "frac_of_bf16", "frac_of_dense") if k in b), "")
            print(f"| {b['name']} | {b['real_time']:.1f} {b.get('time_unit', '')} | {b.get('TFLOPs', 0):.0f} | {ratio} |")
    for l in summary:
        print(l)


if __name__ == "__main__":
    main()
