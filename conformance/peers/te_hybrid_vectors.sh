#!/usr/bin/env bash
# \file te_hybrid_vectors.sh
# \brief Writes conformance/vectors/te_hybrid: hybrid-plane vectors (conformance/README.md, "Hybrid planes") for the
#        compositions of TransformerEngine 2.20's HybridQuantizer (custom_recipes/quantizer_factory_zoo.py) and its
#        fused grouped MXFP8 requantization (nvte_group_requantize). The outputs are qtc's CPU reference following
#        the reading of TE's code in conformance/README.md (TE's PyTorch extension does not build without a GPU
#        here, so no output of TE itself is among them); each file's `source` says so.
# Usage: conformance/peers/te_hybrid_vectors.sh [QTC_BINARY] [OUT_DIR]
#   defaults: build/conformance/qtc, conformance/vectors/te_hybrid. Needs python3 (standard library only).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
qtc=${1:-$here/../../build/conformance/qtc}
out=${2:-$here/../vectors/te_hybrid}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src="qtc CPU reference composing TE 2.20 HybridQuantizer as read from hybrid_tensor.py (not TE output; te_hybrid_vectors.sh)"
fused="qtc CPU reference composing TE 2.20 nvte_group_requantize as read from fused_group_requantize.cu and its test (not TE output; te_hybrid_vectors.sh)"

# The input of TE's test_fused_group_requantize_mxfp8.cu, ((131 r + 17 c + (r c) % 29) % 257 - 128) / 32, as F32.
for rows in 128 256; do
python3 - "$tmp/te_requant_input_$rows.safetensors" "$rows" <<'PY'
import json, struct, sys
m, k = int(sys.argv[2]), 128
vals = [((131 * r + 17 * c + (r * c) % 29) % 257 - 128) / 32.0 for r in range(m) for c in range(k)]
data = struct.pack("<%df" % len(vals), *vals)  # exact: multiples of 1/32 below 4
hdr = json.dumps({"x": {"dtype": "F32", "shape": [m, k], "data_offsets": [0, len(data)]}}).encode()
hdr += b" " * ((8 - len(hdr) % 8) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(hdr)) + hdr + data)
PY
done

q() {  # q NAME SOURCE_TEXT ARGS...   (DROP="name ..." leaves those tensors out)
  local name=$1 text=$2
  shift 2
  "$qtc" quantize --recipe hybrid "$@" -o "$tmp/$name.safetensors" > /dev/null
  # Stamp the source line (qtc quantize writes its own) and drop $DROP: rewrite the header, keep the data.
  python3 - "$tmp/$name.safetensors" "$out/$name.safetensors" "$text" "${DROP:-}" <<'PY'
import json, struct, sys
src, dst, text, drop = sys.argv[1:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
body = b[8 + n:]
h["__metadata__"]["source"] = text
out, data = {"__metadata__": h.pop("__metadata__")}, b""
for name, t in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    if name in drop.split():
        continue
    a, e = t["data_offsets"]
    t["data_offsets"] = [len(data), len(data) + e - a]
    data += body[a:e]
    out[name] = t
hdr = json.dumps(out, sort_keys=True).encode()
hdr += b" " * ((8 - len(hdr) % 8) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hdr)) + hdr + data)
PY
}
R='--param rowwise.recipe'
C='--param columnwise.recipe'
RDQ='--param columnwise_source=rowwise_dequantized'
N=--no-dequantized  # the dequantized planes only where they add a check (two files); they are large
# quantizer_factory_zoo.py compositions.
q mxfp8_nvfp4_original_f32_64x96 "$src" $R=mxfp8 $C=nvfp4 --shape 64x96
q mxfp8_nvfp4_rdq_bf16_96x160 "$src" $R=mxfp8 $C=nvfp4 $RDQ --shape 96x160 --dtype bf16 $N
q mxfp8_nvfp4_rdq_special_bf16_64x96 "$src" $R=mxfp8 $C=nvfp4 $RDQ --shape 64x96 --dtype bf16 --input-kind special $N
q nvfp4_nvfp4_rdq_bf16_64x96 "$src" $R=nvfp4 $C=nvfp4 $RDQ --shape 64x96 --dtype bf16
q nvfp4rs_mxfp8_rdq_bf16_64x96 "$src" $R=nvfp4 --param rowwise.row_scaled=1 $C=mxfp8 $RDQ --shape 64x96 --dtype bf16 $N
q nvfp4_mxfp8_rdq_f16_64x96 "$src" $R=nvfp4 $C=mxfp8 $RDQ --shape 64x96 --dtype f16 $N
# Other kinds per plane; ragged shapes.
q mxfp8_fp8block_rdq_f32_130x72 "$src" $R=mxfp8 $C=fp8_block $RDQ --shape 130x72 $N
q mxfp8e5m2_fp8tensor_original_f32_64x64 "$src" $R=mxfp8 --param rowwise.fp8_dtype=e5m2 $C=fp8_tensor --shape 64x64 $N
q mxfp4_mxfp8_rdq_heavy_f32_96x80 "$src" $R=mxfp4 $C=mxfp8 $RDQ --shape 96x80 --input-kind heavy $N
q mxfp8_nvfp4_rdq_te_layout_bf16_128x64 "$src" $R=mxfp8 $C=nvfp4 $RDQ --shape 128x64 --dtype bf16 --layout te --swizzled $N
# The fused grouped MXFP8 requantization on TE's test input, groups 32, 0, 96 (a zero-token group); the float path's
# source (the F32 dequantized plane) is left out, the fast-math one keeps it (TE's BF16 `dequantized_out`).
for in in e4m3 e5m2; do
  DROP=columnwise_source q te_group_requantize_${in}_f32_128x128 "$fused" $R=mxfp8 --param rowwise.fp8_dtype=$in $C=mxfp8 \
    $RDQ --param columnwise_source_dtype=f32 --param group_rows=32,0,96 --input "$tmp/te_requant_input_128.safetensors" $N
  q te_group_requantize_${in}_fastmath_128x128 "$fused" $R=mxfp8 --param rowwise.fp8_dtype=$in $C=mxfp8 $RDQ \
    --param columnwise_source_dtype=bf16 --param group_rows=32,0,96 --input "$tmp/te_requant_input_128.safetensors" $N
done
# The fused kernel's own output layout (TE's contract: groups and K multiples of 128): GEMM-swizzled scales, each
# group's columnwise scales swizzled on their own.
DROP=columnwise_source q te_group_requantize_e4m3_swizzled_256x128 "$fused" $R=mxfp8 $C=mxfp8 $RDQ \
  --param columnwise_source_dtype=f32 --param group_rows=128,0,128 --input "$tmp/te_requant_input_256.safetensors" \
  --layout te --swizzled $N
ls "$out" | wc -l
