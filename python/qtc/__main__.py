"""The ``qtc`` console script of the Python package (and ``python -m qtc``): ``--version``, ``verify`` and
``identify`` on vector files, as the C++ ``qtc`` command prints them (one line per file that did not pass, then
``N passed, N failed``; exit code 0, 1 on a failure, 2 on an error). The C++ command has more subcommands
(conform, gating, report, ...): install the C++ package for those."""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional


def _files(paths: List[str]) -> List[str]:
    out: List[str] = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in sorted(os.walk(p)):
                out += sorted(os.path.join(root, n) for n in names if n.endswith(".safetensors"))
        else:
            out.append(p)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    import qtc

    ap = argparse.ArgumentParser(prog="qtc", description="qtc: conformance checks for NVFP4, MXFP8, FP8 block and FP8 "
                                 "tensor quantization (Python package)")
    ap.add_argument("--version", action="version", version=f"qtc {qtc.__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="check vectors (VECTORS.md) against the CPU reference")
    v.add_argument("paths", nargs="+")
    v.add_argument("--strict-padding", action="store_true", help="layout=te files: padding must be zeros")
    v.add_argument("-v", "--verbose", action="store_true", help="also print the files that passed")
    i = sub.add_parser("identify", help="which profile (and MXFP8 scale rule) reproduces each vector")
    i.add_argument("paths", nargs="+")
    a = ap.parse_args(argv)
    files = _files(a.paths)
    if not files:
        print("ERROR: no vector files in " + " ".join(a.paths))
        return 2
    if a.cmd == "verify":
        counts = {"pass": 0, "fail": 0, "error": 0, "skipped": 0}
        for f in files:
            r = qtc.verify(f, strict_padding=a.strict_padding)
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
            if not r.passed:
                print(r.line)
                for d in r.details[1:]:
                    print("  " + d)
            elif a.verbose:
                print(f"PASS {f}")
        line = f"{counts['pass']} passed, {counts['fail']} failed"
        if counts["skipped"]:
            line += f", {counts['skipped']} skipped"
        if counts["error"]:
            line += f", {counts['error']} errors"
        print(line)
        return 2 if counts["error"] else 1 if counts["fail"] else 0
    worst = 0
    for f in files:
        ident = qtc.identify(f)
        if ident.verdict == "ERROR":
            print(f"ERROR {f}: {ident.error}")
            worst = 2
            continue
        text = f"{ident.verdict} {f}: claimed {ident.claimed}; reproduced by {', '.join(ident.matches) or 'none'}"
        if ident.verdict == "NONE":
            text += f"; closest {ident.closest}: {ident.closest_mismatch}"
            if ident.explaining_rule:
                text += f"; explained by {ident.explaining_rule} ({ident.explaining_change} in {ident.explaining_profile})"
        print(text)
    return worst


if __name__ == "__main__":
    sys.exit(main())
