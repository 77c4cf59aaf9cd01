#!/usr/bin/env python3
"""Regenerate reports/implementations.md and reports/implementations.json: for every implementation qtc has
outputs from, which profile reproduces its vectors bit for bit, on how many, and, where none does, the rule of
the nearest profile whose change explains the mismatch (`qtc identify`, rule level).

    scripts/implementations_matrix.py [--qtc build/conformance/qtc] [--out reports]

Vectors read (only small samples are committed; the dump scripts in conformance/peers/ make more):
  * TransformerEngine's PyTorch references, its C++ test reference, microxcaling: the shared vectors
    (conformance/vectors/te, a copy of shared/vectors/te), told apart by their `source` metadata;
  * torchao 0.18.0: conformance/vectors/torchao (conformance/peers/torchao_dump.py);
  * the model toolkits and inference engines: conformance/vectors/{modelopt,jax,vllm,compressed_tensors,deepgemm}
    (their dump scripts in conformance/peers/); the Triton group quantizers of vLLM and SGLang, dumped on sm_90:
    conformance/vectors/{vllm_triton,sglang_triton_colmajor}; compressed-tensors on CUDA tensors (its Triton
    kernels, dumped on sm_90): conformance/vectors/compressed_tensors_triton;
  * PyTorch's and ml_dtypes' casts (MXFP8, NVFP4, FP8 per tensor): conformance/vectors/{torch_cast,ml_dtypes_cast}
    (conformance/peers/cast_mx_dump.py, cast_dump.py);
  * TransformerEngine's CUDA kernels: conformance/vectors/peers/te_cuda when its dumps are there.
Standard library only.
"""
import argparse
import collections
import datetime
import json
import os
import re
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILES = ["te", "te_pyref", "ocp", "torchao", "modelopt", "jax", "vllm", "compressed_tensors", "deepgemm", "vllm_triton",
            "sglang_triton", "sglang_triton_colmajor", "torch_cast", "ml_dtypes_cast", "triton_kernels", "vllm_cutlass", "fbgemm",
            "quark", "compressed_tensors_triton"]

IMPLEMENTATIONS = [
    ("TransformerEngine PyTorch references", "conformance/vectors/te", r"^TransformerEngine (tests/pytorch|transformer_engine/pytorch)",
     "TE's pure-PyTorch references (NVFP4 reference_nvfp4.py, FP8 block and per-tensor test references)"),
    ("TransformerEngine C++ test reference", "conformance/vectors/te", r"^TransformerEngine tests/cpp",
     "TE's C++ test reference (MXFP8 compute_ref) with CUDA's host FP8 conversions"),
    ("microxcaling", "conformance/vectors/te", r"^microsoft/microxcaling",
     "microsoft/microxcaling mx_ops._quantize_mx (not on PyPI: vectors from the shared set only)"),
    ("torchao 0.18.0", "conformance/vectors/torchao", r"^torchao",
     "to_mx (FLOOR, RCEIL, CEIL, EVEN) and nvfp4_quantize (with and without per-tensor scale)"),
    ("TransformerEngine CUDA kernels", "conformance/vectors/peers/te_cuda", r"^TransformerEngine",
     "TE's own CUDA quantize kernels (dumped on a GPU machine)"),
    ("nvidia-modelopt 0.47.0", "conformance/vectors/modelopt", r"^nvidia-modelopt",
     "NVFP4QTensor.quantize with get_weights_scaling_factor_2, MXFP8QTensor.quantize (conformance/peers/modelopt_dump.py)"),
    ("JAX (XLA CPU)", "conformance/vectors/jax", r"^jax ",
     "scaled_matmul_stablehlo.quantize, MXFP8 (E4M3, E5M2) and NVFP4 configs (conformance/peers/jax_dump.py)"),
    ("vLLM 0.33.0", "conformance/vectors/vllm", r"^vLLM",
     "ref_nvfp4_quant, run from the wheel's text (conformance/peers/vllm_dump.py)"),
    ("compressed-tensors 0.20.0", "conformance/vectors/compressed_tensors", r"^compressed-tensors \S+ (?!on )",
     "presets NVFP4, MXFP8, MXFP4 (conformance/peers/compressed_tensors_dump.py) and FP8, FP8_BLOCK "
     "(compressed_tensors_fp8_dump.py) on the CPU"),
    ("compressed-tensors 0.20.0 on CUDA (Triton)", "conformance/vectors/compressed_tensors_triton",
     r"^compressed-tensors \S+ on CUDA",
     "the same presets on CUDA tensors: PyTorch's CUDA ops for the scales, its Triton _quantize_kernel and "
     "pack_fp4_to_uint8 (compressed_tensors_dump.py --device cuda on an H100, reports/h200/run_r25_triton: 51 of the "
     "432 NVFP4 / MX dumps, one per recipe x dtype x family that differs from the CPU path and 10 others; "
     "compressed_tensors_fp8_dump.py --device cuda: 44 of the 288 FP8 / FP8_BLOCK dumps, one per dtype x family, the "
     "specials in every mode; all 432 and 288 reproduced by compressed_tensors_triton)"),
    ("DeepGEMM", "conformance/vectors/deepgemm", r"^DeepGEMM",
     "per_token_cast_to_fp8 (1x128, 1x32 UE8M0), per_block_cast_to_fp8, fp32 and UE8M0 scales (deepgemm_fp8_dump.py)"),
    ("vLLM 0.33.0 Triton (sm_90)", "conformance/vectors/vllm_triton", r"^vLLM",
     "_per_token_group_quant_fp8 (fp32 and UE8M0 scales) dumped on the GPU machine (triton_group_fp8_dump.py; "
     "reports/h200/run_r25_triton)"),
    ("SGLang 0.5.23 Triton (sm_90)", "conformance/vectors/sglang_triton_colmajor", r"^SGLang",
     "_per_token_group_quant_8bit and its column-major variant (fp32 and UE8M0 scales) dumped on the GPU machine "
     "(triton_group_fp8_dump.py)"),
    ("PyTorch 2.11 casts (MXFP8, FP8 per tensor)", "conformance/vectors/torch_cast", r"^torch ",
     "MXFP8 written with .to(torch.float8_e8m0fnu) scales and .to(torch.float8_*) data (conformance/peers/cast_mx_dump.py); "
     "FP8 current scaling with Tensor.to(torch.float8_e4m3fn / float8_e5m2), a non-saturating cast (cast_dump.py)"),
    ("ml_dtypes 0.7 casts (MXFP8, NVFP4, FP8 per tensor)", "conformance/vectors/ml_dtypes_cast", r"^ml_dtypes ",
     "MXFP8 with float8_e8m0fnu scales, NVFP4 with float8_e4m3fn scales and float4_e2m1fn data (cast_mx_dump.py); "
     "FP8 current scaling with astype(ml_dtypes.float8_e4m3fn / float8_e5m2) (cast_dump.py)"),
    ("triton_kernels MXFP4 (reading)", "conformance/vectors/triton_kernels", r"^triton_kernels",
     "_downcast_to_mxfp, ROUND_UP and ROUND_DOWN (vLLM's gpt-oss MoE path): not run (Triton on a GPU only), a NumPy "
     "reading of the kernel written apart from qtc (conformance/peers/engines_mxfp4_dump.py)"),
    ("vLLM MXFP4 UE8M0 quantizer (reading)", "conformance/vectors/vllm_cutlass", r"^vllm_cutlass",
     "cvt_warp_fp16_to_fp4 with UE8M0 scales (vLLM PR 43557): not run (CUDA only), a NumPy reading of the code "
     "(engines_mxfp4_dump.py)"),
    ("FBGEMM MX4 reference (reading)", "conformance/vectors/fbgemm", r"^fbgemm",
     "py_quantize_mx4 in qtc's planes (not FBGEMM's packed rows): a NumPy reading with torch's float32 log2 taken as "
     "correctly rounded (engines_mxfp4_dump.py)"),
    ("TransformerEngine PyTorch reference MXFP4", "conformance/vectors/te_pyref", r"^TransformerEngine v",
     "NVFP4QuantizerRef._quantize_blockwise_reference with pow_2_scales, tile 1x32 (TE's only MXFP4 rule; its _quantize "
     "fails in that mode), TE v2.18's file run on the CPU (conformance/peers/te_pyref_mxfp4_dump.py)"),
    ("amd-quark qdq_mxfp4 (reading)", "conformance/vectors/quark", r"^amd-quark",
     "qdq_mxfp4_kernel, scale_calculation_mode even (vLLM's Quark OCP MX scheme): not run (CUDA / HIP only), a NumPy "
     "reading of the kernel on the 16-bit patterns (conformance/peers/quark_mxfp4_dump.py)"),
]


def metadata(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)).get("__metadata__", {})


def vectors(folder, source_re):
    out = []
    d = os.path.join(ROOT, folder)
    if not os.path.isdir(d):
        return out
    for root, _, files in os.walk(d):
        for f in sorted(files):
            if f.endswith(".safetensors"):
                p = os.path.join(root, f)
                if re.search(source_re, metadata(p).get("source", "")):
                    out.append(p)
    return sorted(out)


LINE = re.compile(r"^(OK|OTHER|NONE|ERROR)\s+(\S+)(?: \(claims ([^)]*)\))?: (.*)$")
IMPL = re.compile(r"^IMPL  (.*)$")


def identify(qtc, files):
    res = subprocess.run([qtc, "identify", *files], capture_output=True, text=True)
    rows = []
    verdicts = []
    for line in res.stdout.splitlines():
        im = IMPL.match(line)
        if im:
            verdicts.append(im.group(1))
            continue
        m = LINE.match(line)
        if not m:
            continue
        tag, path, claims, rest = m.groups()
        row = {"file": os.path.relpath(path, ROOT), "verdict": tag, "claims": claims or "", "matches": [], "closest": "",
               "rule": "", "detail": ""}
        if tag in ("OK", "OTHER"):
            mm = re.match(r"matches ([^;]*)", rest)
            row["matches"] = [s.strip() for s in mm.group(1).split(",")] if mm else []
        elif tag == "NONE":
            c = re.search(r"closest (\S+) \((\d+) elements differ\)", rest)
            if c:
                row["closest"] = c.group(1)
                row["closest_count"] = int(c.group(2))
            r = re.search(r"rule (\S+) of (\S+) explains it", rest)
            t = re.search(r"elements differ\): (\w+):", rest)
            row["rule"] = (f"{r.group(1)} of {r.group(2)}" if r else
                           f"no single rule (closest {row['closest']}, first in {t.group(1) if t else '?'})")
            row["detail"] = rest
        else:
            row["detail"] = rest
        rows.append(row)
    return rows, verdicts


def summarize(rows):
    per_profile = collections.Counter()
    for r in rows:
        for p in {m.split("+")[0] for m in r["matches"]}:
            per_profile[p] += 1
    none = [r for r in rows if r["verdict"] == "NONE"]
    rules = collections.Counter(r["rule"] for r in none)
    return {
        "vectors": len(rows),
        "reproduced": sum(1 for r in rows if r["matches"]),
        "per_profile": {p: per_profile.get(p, 0) for p in PROFILES},
        "labels": dict(collections.Counter(m for r in rows for m in r["matches"])),
        "unreproduced": len(none),
        "errors": sum(1 for r in rows if r["verdict"] == "ERROR"),
        "first_rule_where_none_does": dict(rules),
        "closest": dict(collections.Counter(r["closest"] for r in none)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qtc", default=os.path.join(ROOT, "build", "conformance", "qtc"))
    ap.add_argument("--out", default=os.path.join(ROOT, "reports"))
    args = ap.parse_args()
    if not os.path.exists(args.qtc):
        sys.exit(f"implementations_matrix: no qtc binary at {args.qtc} (build it, or pass --qtc)")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "commit": commit,
              "implementations": []}
    for name, folder, source_re, what in IMPLEMENTATIONS:
        files = vectors(folder, source_re)
        rows, verdicts = identify(args.qtc, files) if files else ([], [])
        entry = {"implementation": name, "what": what, "folder": folder, **summarize(rows), "verdicts": verdicts,
                 "files": rows}
        result["implementations"].append(entry)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "implementations.json"), "w") as f:
        json.dump(result, f, indent=1, sort_keys=False)
        f.write("\n")
    md = ["# Implementations matrix", "",
          f"Generated by `scripts/implementations_matrix.py` ({result['generated']}, commit {commit}) from `qtc identify` "
          "over the sample vectors of each implementation. A profile column counts the vectors that profile "
          "reproduces bit for bit (several profiles can reproduce one vector; MXFP8 under any scale rule the "
          "profile defines). Where no profile does, the last column names the rule of the nearest profile whose "
          "change reproduces the vector (`qtc identify`), with the number of vectors. Below the table, `qtc identify`'s "
          "verdict per implementation: the profile that reproduces most of its files, and for the rest the one rule "
          "whose change reproduces every one of them (never a rule that explains only some).", "",
          "| implementation | vectors | reproduced | " + " | ".join(f"`{p}`" for p in PROFILES) + " | first rule where none does |",
          "|---|---|---|" + "---|" * len(PROFILES) + "---|"]
    for e in result["implementations"]:
        if e["vectors"] == 0:
            md.append(f"| {e['implementation']} | 0 | — | " + " | ".join("—" for _ in PROFILES) +
                      f" | no vectors in `{e['folder']}` yet |")
            continue
        rules = "; ".join(f"{k} ({v})" for k, v in sorted(e["first_rule_where_none_does"].items())) or "—"
        md.append(f"| {e['implementation']} | {e['vectors']} | {e['reproduced']} | " +
                  " | ".join(str(e["per_profile"][p]) for p in PROFILES) + f" | {rules} |")
    md += ["", "## What each row is", ""]
    for e in result["implementations"]:
        md.append(f"* **{e['implementation']}** (`{e['folder']}`): {e['what']}.")
        for v in e["verdicts"]:
            md.append(f"  Verdict (`qtc identify`, per implementation named by `source`): {v}.")
        if e["labels"]:
            md.append("  Reproduced as: " + ", ".join(f"`{k}` {v}" for k, v in sorted(e["labels"].items())) + ".")
        for r in e["files"]:
            if r["verdict"] == "NONE":
                md.append(f"  * `{os.path.basename(r['file'])}`: closest `{r['closest']}`; {r['rule']}.")
    md.append("")
    with open(os.path.join(args.out, "implementations.md"), "w") as f:
        f.write("\n".join(md))
    for e in result["implementations"]:
        print(f"{e['implementation']}: {e['reproduced']}/{e['vectors']} reproduced; {e['per_profile']}; "
              f"none: {e['first_rule_where_none_does']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
