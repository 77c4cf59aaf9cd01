"""Writes the model-checkpoint fixtures of `qtc verify` / `qtc identify` on checkpoints (issue 26).

Each fixture is a tiny model (an attention block q/k/v/o and an MLP gate/up/down, bias-free Linear layers, seeded
weights) quantized and laid out by the convention's own export code, run from this script:

* modelopt_nvfp4/, modelopt_fp8/: nvidia-modelopt 0.47.0: mtq.quantize (NVFP4_DEFAULT_CFG / FP8_DEFAULT_CFG), then
  preprocess_linear_fusion on q/k/v and gate/up (what unified_export_hf does before it writes fused projections),
  _export_quantized_weight per Linear, postprocess_state_dict, get_quant_config (hf_quant_config.json and the
  config.json quantization_config that export_hf_checkpoint writes).
* ct_nvfp4/, ct_fp8_block/, ct_fp8_channel/, ct_mxfp4/: compressed-tensors 0.20.0: the preset schemes NVFP4,
  FP8_BLOCK, FP8_DYNAMIC (its FP8 preset whose weights are per channel: strategy channel, weight_scale [N, 1]), MXFP4,
  scales from its calculate_qparams / generate_gparam, weights compressed by its registered compressor
  (nvfp4-pack-quantized, float-quantized, mxfp4-pack-quantized). Global scales of q/k/v and gate/up are shared the way
  llm-compressor's update_fused_layer_weight_global_scales shares them (the smallest global scale of the group).
* deepseek_v3_fp8/: DeepSeek-V3's layout (inference/fp8_cast_bf16.py reads it): F8_E4M3 `weight` with F32
  `weight_scale_inv` per 128x128 block (scale = block amax / 448, the act_quant / weight-quant rule of its
  kernel.py), two shards with model.safetensors.index.json, config.json quantization_config
  {quant_method: fp8, fmt: e4m3, weight_block_size: [128, 128], activation_scheme: dynamic}.
* deepseek_v4/: DeepSeek-V4's layout as its published inference code (convert.py, kernel.py) reads it: FP8 attention
  weights with E8M0 `.scale` per 128x128, MXFP4 routed experts (see deepseek_v4()).
* reference_bf16/, deepseek_v3_reference_bf16/, deepseek_v4_reference_bf16/: the high-precision weights (BF16), the
  `--reference` of a verify.

Run: scripts/checkpoint_fixtures_venv.sh (the pinned PyPI packages), then
~/.cache/qtc/fixtures-venv/bin/python make_fixtures.py [OUT_DIR]; scripts/check_checkpoint_fixtures.sh regenerates
into a scratch folder and compares bytes with the committed fixtures.
"""
import json
import os
import sys

import torch
import torch.nn as nn
from safetensors.torch import save_file

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
FUSED = [["q_proj", "k_proj", "v_proj"], ["gate_proj", "up_proj"]]


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(64, 32, bias=False)
        self.k_proj = nn.Linear(64, 16, bias=False)
        self.v_proj = nn.Linear(64, 16, bias=False)
        self.o_proj = nn.Linear(32, 64, bias=False)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(64, 48, bias=False)
        self.up_proj = nn.Linear(64, 48, bias=False)
        self.down_proj = nn.Linear(48, 64, bias=False)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = Attn()
        self.mlp = Mlp()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer()])


def make_model():
    torch.manual_seed(26)
    m = Model()
    with torch.no_grad():
        for _, mod in m.named_modules():
            if isinstance(mod, nn.Linear):
                # heavy-ish tails so that blocks use different scales; round to bf16 (the reference is BF16)
                w = torch.randn_like(mod.weight) * torch.exp(torch.randn_like(mod.weight) * 0.5) * 0.05
                mod.weight.copy_(w.to(torch.bfloat16).float())
    return m


def linears(m):
    return [(f"model.{n}", mod) for n, mod in m.named_modules() if isinstance(mod, nn.Linear)]


def groups(m):
    out = []
    for layer_name, layer in [("layers.0", m.layers[0])]:
        out.append([getattr(layer.self_attn, n) for n in FUSED[0]])
        out.append([getattr(layer.mlp, n) for n in FUSED[1]])
    return out


def write_dir(name, tensors, config_extra, extra_files=None, shards=1):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    tensors = {k: v.detach().clone().contiguous() for k, v in tensors.items()}
    config = {"architectures": ["TinyForCausalLM"], "model_type": "tiny", "hidden_size": 64,
              "num_hidden_layers": 1, "torch_dtype": "bfloat16"}
    config.update(config_extra)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    for fname, obj in (extra_files or {}).items():
        with open(os.path.join(d, fname), "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
    if shards == 1:
        save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        return
    names = sorted(tensors)
    per = (len(names) + shards - 1) // shards
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: tensors[k] for k in names[s * per:(s + 1) * per]}
        save_file(part, os.path.join(d, fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in part})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)


def reference():
    m = make_model()
    write_dir("reference_bf16", {f"{n}.weight": mod.weight.detach().to(torch.bfloat16) for n, mod in linears(m)}, {})


def modelopt(fmt):
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export.quant_utils import get_quant_config, postprocess_state_dict, preprocess_linear_fusion
    from modelopt.torch.export.unified_export_hf import _export_quantized_weight

    m = make_model()
    cfg = mtq.NVFP4_DEFAULT_CFG if fmt == "nvfp4" else mtq.FP8_DEFAULT_CFG
    torch.manual_seed(1)
    calib = [torch.randn(8, 64) for _ in range(4)]

    def forward_loop(model):
        for x in calib:
            l = model.layers[0]
            l.self_attn.o_proj(l.self_attn.q_proj(x))
            l.self_attn.k_proj(x), l.self_attn.v_proj(x)
            l.mlp.down_proj(l.mlp.gate_proj(x) * l.mlp.up_proj(x))

    mtq.quantize(m, cfg, forward_loop)
    for g in groups(m):
        preprocess_linear_fusion(g)
    for _, mod in linears(m):
        _export_quantized_weight(mod, torch.bfloat16)
    qc = get_quant_config(m)
    sd = postprocess_state_dict({f"model.{k}": v for k, v in m.state_dict().items()}, 1.0, qc.get("quantization", {}).get("quant_algo"))
    hf_qc = dict(qc["quantization"])
    hf_qc["quant_method"] = "modelopt"
    write_dir(f"modelopt_{fmt}", sd, {"quantization_config": hf_qc}, {"hf_quant_config.json": qc})


def compressed_tensors(preset):
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import preset_name_to_scheme
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam

    m = make_model()
    scheme = preset_name_to_scheme(preset, ["Linear"])
    args = scheme.weights
    fmt = {"NVFP4": "nvfp4-pack-quantized", "FP8_BLOCK": "float-quantized", "FP8_DYNAMIC": "float-quantized",
           "MXFP4": "mxfp4-pack-quantized"}[preset]
    compressor = BaseCompressor.get_value_from_registry(fmt)
    gscale = {}
    if preset == "NVFP4":
        for g in groups(m):
            amax = torch.stack([mod.weight.abs().max() for mod in g]).max()
            gs = generate_gparam(-amax.reshape(1), amax.reshape(1))
            for mod in g:
                gscale[id(mod)] = gs
    out = {}
    ignore = []
    for name, mod in linears(m):
        w = mod.weight.detach().float()
        n, k = w.shape
        if args.group_size is not None and k % args.group_size != 0:
            # compressed-tensors' group strategy needs whole groups along K: the layer stays unquantized
            out[f"{name}.weight"] = mod.weight.detach().to(torch.bfloat16)
            ignore.append(name)
            continue
        if preset in ("NVFP4", "MXFP4"):
            gsz = args.group_size
            blocks = w.reshape(n, k // gsz, gsz)
            mn, mx = blocks.amin(dim=-1), blocks.amax(dim=-1)
            gs = None
            if preset == "NVFP4":
                gs = gscale.get(id(mod))
                if gs is None:
                    a = w.abs().max()
                    gs = generate_gparam(-a.reshape(1), a.reshape(1))
            scale, _ = calculate_qparams(mn, mx, args, global_scale=gs)
            sd = {"weight": w, "weight_scale": scale}
            if gs is not None:
                sd["weight_global_scale"] = gs
        elif preset == "FP8_DYNAMIC":  # weights per output channel (strategy channel): min / max over K, shape [N, 1]
            scale, _ = calculate_qparams(w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True), args)
            sd = {"weight": w, "weight_scale": scale}
        else:  # FP8 block 128x128, padded blocks reduce over their valid elements
            bn, bk = args.block_structure
            nb, kb = (n + bn - 1) // bn, (k + bk - 1) // bk
            mn = torch.empty(nb, kb)
            mx = torch.empty(nb, kb)
            for i in range(nb):
                for j in range(kb):
                    blk = w[i * bn:(i + 1) * bn, j * bk:(j + 1) * bk]
                    mn[i, j], mx[i, j] = blk.min(), blk.max()
            scale, _ = calculate_qparams(mn, mx, args)
            sd = {"weight": w, "weight_scale": scale}
        sd = compressor.compress(sd, scheme)
        for key, v in sd.items():
            out[f"{name}.{key}"] = v
    qcfg = {"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
            "config_groups": {"group_0": {**scheme.model_dump(mode="json"), "format": fmt}}, "ignore": ignore}
    folder = {"FP8_DYNAMIC": "ct_fp8_channel"}.get(preset, f"ct_{preset.lower()}")
    write_dir(folder, out, {"quantization_config": qcfg})


def deepseek_v3():
    m = make_model()
    # wider layers so that 128x128 blocks are ragged: 200 x 136 and 136 x 200 (neither a multiple of 128)
    torch.manual_seed(3)
    ws = {"model.layers.0.mlp.gate_proj.weight": torch.randn(200, 136) * 0.02,
          "model.layers.0.mlp.down_proj.weight": torch.randn(136, 200) * 0.02}
    for n, mod in linears(m):
        if not n.endswith(("gate_proj", "down_proj", "up_proj")):
            ws[f"{n}.weight"] = mod.weight.detach().float()
    out = {}
    ref = {}
    for name, w in ws.items():
        w = w.to(torch.bfloat16).float()
        ref[name] = w.to(torch.bfloat16)
        n, k = w.shape
        nb, kb = (n + 127) // 128, (k + 127) // 128
        s = torch.empty(nb, kb)
        q = torch.empty(n, k, dtype=torch.float8_e4m3fn)
        for i in range(nb):
            for j in range(kb):
                blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
                s[i, j] = blk.abs().max() / 448.0
                q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = (blk / s[i, j]).to(torch.float8_e4m3fn)
        out[name] = q
        out[name + "_scale_inv"] = s
    qc = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
    write_dir("deepseek_v3_fp8", out, {"quantization_config": qc}, shards=2)
    write_dir("deepseek_v3_reference_bf16", ref, {})


def _f32_bits(x):
    import numpy as np
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def _ue8m0_exponent(amax, floor, max_inv):
    """kernel.py's fast_round_scale(amax, max_inv) as an exponent: amax = max(amax, floor) and p = amax * max_inv in F32,
    then fast_log2_ceil(p) = the exponent field - 127, plus 1 when the mantissa bits are not all zero (scale 2^that)."""
    import numpy as np
    a = np.maximum(np.asarray(amax, dtype=np.float32), np.float32(floor))
    p = (a * np.float32(max_inv)).astype(np.float32)
    bits = _f32_bits(p)
    return ((bits >> 23) & 0xFF).astype(np.int32) - 127 + ((bits & 0x7FFFFF) != 0).astype(np.int32)


def _check_v4_convertible(out):
    """What DeepSeek-V4's convert.py needs of these tensors, checked here so that the fixture stays loadable by it:
    wo_a's tiles whole (it dequantizes wo_a to BF16 tile by tile), and for its --expert-dtype fp8 path each expert's
    FP4 codes re-expressed exactly as FP8 E4M3 with one E8M0 scale per 128x128 tile (the tile's largest 1x32 scale
    / 2^6, so that 6 * 2^6 = 384 stays below 448) and N, K multiples of 128."""
    import ml_dtypes
    import numpy as np

    fp4 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)
    for name, t in out.items():
        if name.endswith("wo_a.weight"):
            assert t.shape[0] % 128 == 0 and t.shape[1] % 128 == 0, name
        if ".experts." not in name or not name.endswith(".weight"):
            continue
        b = t.view(torch.uint8).numpy()
        n, k = b.shape[0], b.shape[1] * 2
        e = out[name[:-len("weight")] + "scale"].view(torch.uint8).numpy().astype(np.int32) - 127
        assert n % 128 == 0 and k % 128 == 0 and e.shape == (n, k // 32), name
        v = np.stack([fp4[b & 15], fp4[b >> 4]], axis=-1).reshape(n, k)
        exact = v * np.exp2(np.repeat(e, 32, axis=1)).astype(np.float32)
        tile = e.reshape(n // 128, 128, k // 128, 4).max(axis=(1, 3)) - 6
        unit = np.exp2(np.repeat(np.repeat(tile, 128, axis=0), 128, axis=1)).astype(np.float32)
        codes = (exact / unit).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
        assert np.array_equal(codes * unit, exact), f"{name}: not exactly FP8 per 128x128 tile"


def deepseek_v4():
    """DeepSeek-V4's layout, as its published inference code (inference/ of the deepseek-ai/DeepSeek-V4-Flash model
    repository: convert.py, kernel.py, model.py) reads and writes it:
    * attention Linear weights F8_E4M3 with a `.scale` sibling F8_E8M0 per 128x128 tile, shape
      [ceil(N/128), ceil(K/128)] (model.py's Linear; config quantization_config scale_fmt ue8m0); K a multiple of 128
      (kernel.py's act_quant asserts it of the activation), N ragged allowed (fp8_gemm takes ceildiv(N, 128) scales);
      `wo_a` with N and K multiples of 128 (convert.py dequantizes it to BF16 through unflatten(0, (-1, 128)));
    * routed experts `ffn.experts.E.w{1,2,3}.weight` packed E2M1 in I8 [N, K/2] (convert.py: low = x & 0x0F is element
      2j, high = x >> 4 element 2j+1), `.scale` F8_E8M0 [N, K/32]; N and K multiples of 128 (convert.py's
      cast_e2m1fn_to_e4m3fn asserts both for its --expert-dtype fp8 path);
    * config.json: quantization_config {quant_method fp8, fmt e4m3, scale_fmt ue8m0, weight_block_size [128, 128],
      activation_scheme dynamic} and expert_dtype fp4; shards with model.safetensors.index.json (convert.py checks the
      names it read against the index).
    The weights' quantizer is not published: the scales and codes follow kernel.py's own quantizers, act_quant with
    round_scale (amax = max(amax, 1e-4), scale 2^ceil(log2(amax * (1/448))) by fast_round_scale, codes
    cast(clamp(x / scale, -448, 448))) per 128x128 tile, and fp4_quant_kernel (amax = max(amax, 6 * 2^-126), scale
    2^ceil(log2(amax * (1/6))), codes cast(clamp(x / scale, -6, 6)), round to nearest even) per 32 along K."""
    import ml_dtypes
    import numpy as np

    torch.manual_seed(4)
    out, ref = {}, {}

    def e8m0(e):
        return torch.from_numpy(np.asarray(e, dtype=np.uint8)).view(torch.float8_e8m0fnu)

    # wq_a: N = 200 ragged (two tiles, the second 72 rows); wo_a: N and K multiples of 128 as convert.py needs.
    for name, (n, k) in {"layers.0.attn.wq_a.weight": (200, 256), "layers.0.attn.wo_a.weight": (128, 256)}.items():
        assert k % 128 == 0, "kernel.py's act_quant: K % 128 == 0"
        w = (torch.randn(n, k) * 0.02).to(torch.bfloat16).float()
        ref[name] = w.to(torch.bfloat16)
        nb, kb = (n + 127) // 128, k // 128
        e = np.zeros((nb, kb), dtype=np.int32)
        q = torch.empty(n, k, dtype=torch.float8_e4m3fn)
        for i in range(nb):
            for j in range(kb):
                blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
                e[i, j] = _ue8m0_exponent(blk.abs().max().item(), 1e-4, 1.0 / 448.0)
                q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = \
                    (blk / 2.0 ** e[i, j]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        out[name] = q
        out[name[:-len("weight")] + "scale"] = e8m0(e + 127)
    for ex in range(2):
        for wn, (n, k) in {"w1": (128, 128), "w2": (128, 128), "w3": (128, 128)}.items():
            assert n % 128 == 0 and k % 128 == 0, "convert.py's cast_e2m1fn_to_e4m3fn: N, K multiples of 128"
            name = f"layers.0.ffn.experts.{ex}.{wn}.weight"
            w = (torch.randn(n, k) * 0.05).to(torch.bfloat16).float()
            ref[name] = w.to(torch.bfloat16)
            blocks = w.reshape(n, k // 32, 32).numpy()
            e = _ue8m0_exponent(np.abs(blocks).max(axis=-1), 6.0 * 2.0 ** -126, 1.0 / 6.0)
            scaled = np.clip(blocks / np.exp2(e.astype(np.float32))[..., None], -6.0, 6.0).reshape(n, k)
            codes = scaled.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0x0F
            packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
            out[name] = torch.from_numpy(packed.view(np.int8).copy())
            out[name[:-len("weight")] + "scale"] = e8m0((e + 127).astype(np.uint8))
    _check_v4_convertible(out)
    qc = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "scale_fmt": "ue8m0",
          "weight_block_size": [128, 128]}
    write_dir("deepseek_v4", out, {"quantization_config": qc, "expert_dtype": "fp4"}, shards=2)
    write_dir("deepseek_v4_reference_bf16", ref, {})


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "v4":
        deepseek_v4()
        sys.exit(0)
    reference()
    modelopt("nvfp4")
    modelopt("fp8")
    compressed_tensors("NVFP4")
    compressed_tensors("FP8_BLOCK")
    compressed_tensors("FP8_DYNAMIC")
    compressed_tensors("MXFP4")
    deepseek_v3()
    deepseek_v4()
