# \file tests.cmake
# \brief Tests of the conformance layer: verify's logic (cpu), every bundled vector (vectors), the qtc binary (cpu).
qtc_add_test(test_verify SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_verify.cpp ${CMAKE_CURRENT_LIST_DIR}/test_verify_hybrid.cpp LIBS qtc_conformance LABELS cpu)
qtc_add_test(test_bundled_vectors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_vectors.cpp LIBS qtc_conformance LABELS vectors cpu)
qtc_add_test(test_te_layout SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_te_layout.cpp LIBS qtc_conformance LABELS vectors cpu)
qtc_add_test(test_qtc_cli SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli.cpp LIBS qtc_conformance LABELS cpu)
target_compile_definitions(test_qtc_cli PRIVATE QTC_BINARY="$<TARGET_FILE:qtc>")
add_dependencies(test_qtc_cli qtc)

# The closing line and exit code straight from CTest, without a test harness in between.
add_test(NAME qtc_verify_bundled COMMAND qtc verify ${QTC_BUNDLED_VECTORS_DIR})
set_tests_properties(qtc_verify_bundled PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^135 passed, 0 failed\n$")
add_test(NAME qtc_verify_missing_file COMMAND qtc verify ${CMAKE_CURRENT_BINARY_DIR}/no_such_vector.safetensors)
set_tests_properties(qtc_verify_missing_file PROPERTIES LABELS cpu WILL_FAIL TRUE)
# qtc identify attributes every bundled TE vector to the profile it claims (and lists the others that agree).
add_test(NAME qtc_identify_bundled COMMAND qtc identify ${QTC_BUNDLED_VECTORS_DIR})
set_tests_properties(qtc_identify_bundled PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "\n135 identified, 0 unmatched\n$"
                     FAIL_REGULAR_EXPRESSION "(^|\n)(NONE|OTHER|ERROR) ")
# The shared vectors rewritten into TransformerEngine's layout (a copy of shared/vectors/te_layout): every one passes
# verify and identify, and `qtc conform --foreign` takes them as dumps of another implementation.
set(QTC_TE_LAYOUT_VECTORS_DIR ${CMAKE_CURRENT_SOURCE_DIR}/vectors/te_layout)
add_test(NAME qtc_verify_te_layout COMMAND qtc verify ${QTC_TE_LAYOUT_VECTORS_DIR})
set_tests_properties(qtc_verify_te_layout PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^184 passed, 0 failed\n$")
add_test(NAME qtc_identify_te_layout COMMAND qtc identify ${QTC_TE_LAYOUT_VECTORS_DIR})
set_tests_properties(qtc_identify_te_layout PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "\n184 identified, 0 unmatched\n$"
                     FAIL_REGULAR_EXPRESSION "(^|\n)(NONE|OTHER|ERROR) ")
add_test(NAME qtc_conform_foreign_te_layout
         COMMAND qtc conform --backend cpu --no-generated --no-bundled --foreign ${QTC_TE_LAYOUT_VECTORS_DIR}
                 --out ${CMAKE_CURRENT_BINARY_DIR}/conform_te_layout)
set_tests_properties(qtc_conform_foreign_te_layout PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "\n184 passed, 0 failed\n")
# Hostile inputs (issue 14): huge empty shapes, overflowing dimensions, directory scans, messages. The timeout
# catches the old behaviour of looping over 2^35 empty row strips.
qtc_add_test(test_verify_hostile SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_verify_hostile.cpp LIBS qtc_conformance LABELS cpu TIMEOUT 120)
# The vectorized CPU reference against the scalar one, byte for byte, on every instruction set this machine runs.
qtc_add_test(test_simd_exact SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_simd_exact.cpp LIBS qtc_conformance LABELS cpu vectors
             ARGS --gtest_filter=-SimdEnv.*)
# QTC_SCALAR=1 forces the scalar path; unset, the vectorized one is taken.
add_test(NAME test_simd_env_scalar COMMAND test_simd_exact --gtest_filter=SimdEnv.*)
set_tests_properties(test_simd_env_scalar PROPERTIES LABELS cpu ENVIRONMENT QTC_SCALAR=1)
add_test(NAME test_simd_env_default COMMAND test_simd_exact --gtest_filter=SimdEnv.*)
set_tests_properties(test_simd_env_default PROPERTIES LABELS cpu ENVIRONMENT QTC_SCALAR=)

# Vectors dumped from torchao 0.18.0 (conformance/peers/torchao_dump.py): every MXFP8 scale rule (floor, rceil,
# ceil, even) x E4M3/E5M2 x F32/BF16/F16, NVFP4 with and without the per-tensor scale; all bit-exact on the CPU,
# and every one attributed to profile torchao.
# 78 of them, plus 44 MXFP4 vectors under torchao/mxfp4 (conformance/peers/torchao_mxfp4_dump.py --sample: to_mx with
# float4_e2m1fn_x2, every ScaleCalculationMode x F32/BF16/F16, the corner families).
add_test(NAME qtc_verify_torchao COMMAND qtc verify ${CMAKE_CURRENT_LIST_DIR}/../vectors/torchao)
set_tests_properties(qtc_verify_torchao PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^122 passed, 0 failed\n$")
add_test(NAME qtc_identify_torchao COMMAND qtc identify ${CMAKE_CURRENT_LIST_DIR}/../vectors/torchao)
set_tests_properties(qtc_identify_torchao PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "\n122 identified, 0 unmatched\n$"
                     FAIL_REGULAR_EXPRESSION "(^|\n)(NONE|OTHER|ERROR) ")
# The 8x4 small-M scale layout of FlashInfer / TensorRT-LLM (metadata layout=swizzled_8x4): TE and torchao vectors with
# their scales rewritten by FlashInfer's index rule (conformance/peers/flashinfer_8x4_dump.py), NVFP4 / MXFP8 (both
# planes, MXFP8 columnwise tiled transposed) / MXFP4, ragged M and k-block counts; each one passes as it is.
add_test(NAME qtc_verify_flashinfer_8x4 COMMAND qtc verify --strict-padding ${CMAKE_CURRENT_LIST_DIR}/../vectors/flashinfer_8x4)
set_tests_properties(qtc_verify_flashinfer_8x4 PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^8 passed, 0 failed\n$")
# FBGEMM's MX4 rows (metadata layout=fbgemm_mx4: per group of 32 the 16 code bytes then the exponent byte, in the data
# tensor): profile fbgemm vectors packed by a NumPy reading of FBGEMM's packing (conformance/peers/fbgemm_mx4_dump.py),
# both planes, ragged and odd rows; each passes as it is, padding zero.
add_test(NAME qtc_verify_fbgemm_mx4 COMMAND qtc verify --strict-padding ${CMAKE_CURRENT_LIST_DIR}/../vectors/fbgemm_mx4)
set_tests_properties(qtc_verify_fbgemm_mx4 PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^16 passed, 0 failed\n$")
add_test(NAME qtc_identify_fbgemm_mx4 COMMAND qtc identify ${CMAKE_CURRENT_LIST_DIR}/../vectors/fbgemm_mx4)
set_tests_properties(qtc_identify_fbgemm_mx4 PROPERTIES LABELS "vectors;cpu"
                     PASS_REGULAR_EXPRESSION "\nIMPL  [^\n]*: 16 files; fbgemm reproduces 16 of 16[^\n]*\n16 identified, 0 unmatched\n$"
                     FAIL_REGULAR_EXPRESSION "(^|\n)(NONE|OTHER|ERROR) ")
# FP8 block / tensor vectors dumped from the model toolkits and inference engines (conformance/peers/<impl>_fp8_dump.py:
# nvidia-modelopt 0.47.0, compressed-tensors 0.20.0, vLLM 0.33.0's native lines, DeepGEMM's utils/math.py), each
# reproduced bit for bit by the profile of the same name on the CPU.
# (Checked with the NVFP4 / MXFP8 dumps of the same implementations below: one folder and one profile each.)
qtc_add_test(test_identify SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_identify.cpp LIBS qtc_conformance LABELS cpu)

# Model checkpoints (issue 26): the fixtures exported by ModelOpt / compressed-tensors and in DeepSeek-V3's layout
# (conformance/checkpoints/make_fixtures.py), checked per tensor; hostile copies planted by the tests. The cases
# run inside test_identify (no new executable).
set(QTC_CHECKPOINT_FIXTURES ${CMAKE_CURRENT_SOURCE_DIR}/checkpoints)
target_sources(test_identify PRIVATE ${CMAKE_CURRENT_LIST_DIR}/test_checkpoint_conventions.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/test_value_equivalence.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/test_stochastic_rounding.cpp)
target_compile_definitions(test_identify PRIVATE QTC_CHECKPOINT_FIXTURES="${QTC_CHECKPOINT_FIXTURES}")
foreach(ckpt modelopt_nvfp4 modelopt_fp8 ct_nvfp4 ct_fp8_block ct_fp8_channel ct_mxfp4)
  add_test(NAME qtc_verify_checkpoint_${ckpt}
           COMMAND qtc verify --reference ${QTC_CHECKPOINT_FIXTURES}/reference_bf16 ${QTC_CHECKPOINT_FIXTURES}/${ckpt})
  set_tests_properties(qtc_verify_checkpoint_${ckpt} PROPERTIES LABELS cpu PASS_REGULAR_EXPRESSION ", 0 with problems\n$")
endforeach()
add_test(NAME qtc_verify_checkpoint_deepseek_v3_fp8
         COMMAND qtc verify --reference ${QTC_CHECKPOINT_FIXTURES}/deepseek_v3_reference_bf16 ${QTC_CHECKPOINT_FIXTURES}/deepseek_v3_fp8)
set_tests_properties(qtc_verify_checkpoint_deepseek_v3_fp8 PROPERTIES LABELS cpu PASS_REGULAR_EXPRESSION ": 6 quantized tensors, 0 with problems\n$")
add_test(NAME qtc_verify_checkpoint_deepseek_v4
         COMMAND qtc verify --profile te --reference ${QTC_CHECKPOINT_FIXTURES}/deepseek_v4_reference_bf16 ${QTC_CHECKPOINT_FIXTURES}/deepseek_v4)
set_tests_properties(qtc_verify_checkpoint_deepseek_v4 PROPERTIES LABELS cpu PASS_REGULAR_EXPRESSION ": 8 quantized tensors, 0 with problems\n$")
# The fixtures regenerated by make_fixtures.py in the venv of scripts/checkpoint_fixtures_venv.sh (made when missing:
# about 2.8 GB of PyPI wheels, 2 to 3 minutes) and compared byte for byte: label `fixtures`, CI's own stage in
# scripts/ci_test.sh (after the default tests, alone: it is the one test that needs the venv); `ctest -L fixtures`.
add_test(NAME fixtures_regenerate COMMAND ${PROJECT_SOURCE_DIR}/scripts/check_checkpoint_fixtures.sh)
set_tests_properties(fixtures_regenerate PROPERTIES LABELS fixtures TIMEOUT 1200
                     PASS_REGULAR_EXPRESSION "fixtures: [0-9]+ passed, 0 failed\n$")
add_test(NAME qtc_identify_checkpoint COMMAND qtc identify ${QTC_CHECKPOINT_FIXTURES}/ct_nvfp4/model.safetensors)
set_tests_properties(qtc_identify_checkpoint PROPERTIES LABELS cpu
                     PASS_REGULAR_EXPRESSION "OK   model.layers.0.self_attn.v_proj: compressed-tensors nvfp4")
# The profile required: DeepSeek's amax / 448 scales are one ulp from TE's 1 / (448 / amax) on some blocks: exit 1.
add_test(NAME qtc_verify_checkpoint_profile_required
         COMMAND qtc verify --profile te --reference ${QTC_CHECKPOINT_FIXTURES}/deepseek_v3_reference_bf16 ${QTC_CHECKPOINT_FIXTURES}/deepseek_v3_fp8)
set_tests_properties(qtc_verify_checkpoint_profile_required PROPERTIES LABELS cpu WILL_FAIL TRUE)
# compressed-tensors' MXFP4 export is torchao's EVEN rule bit for bit (issue 26): required profile torchao passes.
add_test(NAME qtc_verify_checkpoint_ct_mxfp4_torchao
         COMMAND qtc verify -v --profile torchao --reference ${QTC_CHECKPOINT_FIXTURES}/reference_bf16 ${QTC_CHECKPOINT_FIXTURES}/ct_mxfp4)
set_tests_properties(qtc_verify_checkpoint_ct_mxfp4_torchao PROPERTIES LABELS cpu
                     PASS_REGULAR_EXPRESSION "bit for bit those of qtc mxfp4_even_torchao_rowonly profile torchao\n(.*\n)*taken for a model checkpoint: config.json has a quantization_config \\(quant_method compressed-tensors\\)\n[^\n]*: 6 quantized tensors, 0 with problems\n$")
# Admissible stochastic rounding from the CLI: qtc's own SR vector passes `verify --sr` (issue 26).
add_test(NAME qtc_verify_sr_admissible
         COMMAND sh -c "$<TARGET_FILE:qtc> quantize --recipe nvfp4 --param stochastic_rounding=1 --param seed=7 --shape 128x256 -o ${CMAKE_CURRENT_BINARY_DIR}/sr_seed7.safetensors >/dev/null && $<TARGET_FILE:qtc> verify --sr -v ${CMAKE_CURRENT_BINARY_DIR}/sr_seed7.safetensors")
set_tests_properties(qtc_verify_sr_admissible PROPERTIES LABELS cpu PASS_REGULAR_EXPRESSION "PASS [^\n]* \\[sr\\]: admissible stochastic rounding: 65536 elements[^\n]*\n(.*\n)*1 passed, 0 failed\n$")
# MXFP4 under the OCP MX v1.0 rule, computed independently in NumPy (torchao_mxfp4_dump.py --ocp): bit-exact under
# profile ocp, and identified as ocp+ocp_floor (te and torchao agree on these inputs).
add_test(NAME qtc_verify_ocp_mxfp4 COMMAND qtc verify ${CMAKE_CURRENT_LIST_DIR}/../vectors/ocp)
set_tests_properties(qtc_verify_ocp_mxfp4 PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^8 passed, 0 failed\n$")
add_test(NAME qtc_identify_ocp_mxfp4 COMMAND qtc identify ${CMAKE_CURRENT_LIST_DIR}/../vectors/ocp)
set_tests_properties(qtc_identify_ocp_mxfp4 PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "\n8 identified, 0 unmatched\n$"
                     FAIL_REGULAR_EXPRESSION "(^|\n)(NONE|OTHER|ERROR) ")
# Vectors dumped from nvidia-modelopt 0.47.0, JAX (XLA CPU) and vLLM 0.33.0 (conformance/peers/{modelopt,jax,vllm}_dump.py):
# each implementation's sample is reproduced bit for bit by its profile, and identify's per-implementation verdict
# (the IMPL line) names that profile for all of its files.
set(QTC_N_MODELOPT 66)  # 30 NVFP4/MXFP8 + 36 FP8 (modelopt_fp8_dump.py)
set(QTC_N_JAX 38)  # 32 + 6 NVFP4 BF16 / F16 of 4096 elements with NaN, Inf, zeros (jax_dump.py --lanes)
set(QTC_N_VLLM 51)  # 15 NVFP4 + 36 FP8 (vllm_fp8_dump.py)
set(QTC_N_COMPRESSED_TENSORS 99)  # 36 FP8 (compressed_tensors_fp8_dump.py) + 63 NVFP4/MXFP8/MXFP4 (compressed_tensors_dump.py)
set(QTC_N_DEEPGEMM 36)  # FP8 (deepgemm_fp8_dump.py)
# MXFP8 / NVFP4 written with the libraries' own casts (conformance/peers/cast_mx_dump.py; profiles torch_cast and
# ml_dtypes_cast), and FP8 per tensor (conformance/peers/cast_dump.py: 14 each, fp8.form cast).
set(QTC_N_TORCH_CAST 35)
set(QTC_N_ML_DTYPES_CAST 49)
# The Triton FP8 group quantizers of vLLM 0.33.0 and SGLang 0.5.23, dumped on sm_90 (conformance/peers/
# triton_group_fp8_dump.py; reports/h200/run_r25_triton): samples of the 540 dumps, the six whose codes need
# rcp.approx's table among them.
set(QTC_N_VLLM_TRITON 27)
set(QTC_N_SGLANG_TRITON_COLMAJOR 39)
# MXFP4 of two GPU-only engine quantizers, from NumPy readings of their code (conformance/peers/engines_mxfp4_dump.py):
# triton_kernels' _downcast_to_mxfp (ROUND_UP / ROUND_DOWN x F32/BF16/F16 x 7 input families) and vLLM's UE8M0 FP4
# quantizer (the threshold rule, BF16/F16 x 7 families).
set(QTC_N_TRITON_KERNELS 42)
set(QTC_N_VLLM_CUTLASS 14)
set(QTC_N_FBGEMM 8)  # FBGEMM's MX4 reference py_quantize_mx4 (NumPy reading; float32, no NaN blocks)
set(QTC_N_QUARK 16)  # amd-quark's qdq_mxfp4 kernel (quark_mxfp4_dump.py, NumPy reading; BF16/F16 x 8 families)
# TransformerEngine's own MXFP4 rule, its PyTorch reference NVFP4QuantizerRef with pow_2_scales (te_pyref_mxfp4_dump.py:
# TE v2.18's file run on the CPU; F32/BF16/F16 x 9 families; v2.12 and main give the same tensors).
set(QTC_N_TE_PYREF 27)
# compressed-tensors 0.20.0's NVFP4 / MXFP8 / MXFP4 presets on CUDA tensors (its Triton kernels; compressed_tensors_dump.py
# --device cuda on an H100, reports/h200/run_r25_triton): one file of each recipe x dtype x family whose bytes differ
# from the CPU path's (41), 8 that do not, 2 with ragged shapes; their implementation "compressed-tensors 0.20.0 on CUDA".
# Its FP8 / FP8_BLOCK presets (compressed_tensors_fp8_dump.py --device cuda on an H100, 288 dumps): 44 files ctgpu_{tensor,
# 1x128,128x128}_*, one per dtype x family (the smallest that differs from the CPU path's where one does, the three
# modes in turn), the specials in every mode and dtype, three ragged shapes.
set(QTC_N_COMPRESSED_TENSORS_TRITON 95)
foreach(impl_count IN ITEMS "modelopt;QTC_N_MODELOPT" "jax;QTC_N_JAX" "vllm;QTC_N_VLLM"
                           "compressed_tensors;QTC_N_COMPRESSED_TENSORS" "deepgemm;QTC_N_DEEPGEMM"
                           "torch_cast;QTC_N_TORCH_CAST" "ml_dtypes_cast;QTC_N_ML_DTYPES_CAST"
                           "vllm_triton;QTC_N_VLLM_TRITON" "sglang_triton_colmajor;QTC_N_SGLANG_TRITON_COLMAJOR"
                           "triton_kernels;QTC_N_TRITON_KERNELS" "vllm_cutlass;QTC_N_VLLM_CUTLASS" "fbgemm;QTC_N_FBGEMM"
                           "quark;QTC_N_QUARK" "te_pyref;QTC_N_TE_PYREF"
                           "compressed_tensors_triton;QTC_N_COMPRESSED_TENSORS_TRITON")
  list(GET impl_count 0 impl)
  list(GET impl_count 1 nvar)
  add_test(NAME qtc_verify_${impl} COMMAND qtc verify ${CMAKE_CURRENT_LIST_DIR}/../vectors/${impl})
  set_tests_properties(qtc_verify_${impl} PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^${${nvar}} passed, 0 failed\n$")
  add_test(NAME qtc_identify_${impl} COMMAND qtc identify ${CMAKE_CURRENT_LIST_DIR}/../vectors/${impl})
  set_tests_properties(qtc_identify_${impl} PROPERTIES LABELS "vectors;cpu"
                       PASS_REGULAR_EXPRESSION "\nIMPL  [^\n]*: ${${nvar}} files; ${impl} reproduces ${${nvar}} of ${${nvar}}[^\n]*\n${${nvar}} identified, 0 unmatched\n$"
                       FAIL_REGULAR_EXPRESSION "(^|\n)(NONE|OTHER|ERROR) ")
endforeach()
# Hybrid planes (conformance/README.md, "Hybrid planes"): TE's HybridQuantizer compositions and its fused grouped MXFP8
# requantization, written by conformance/peers/te_hybrid_vectors.sh (qtc's CPU reference following TE's code).
add_test(NAME qtc_verify_te_hybrid COMMAND qtc verify ${CMAKE_CURRENT_LIST_DIR}/../vectors/te_hybrid)
set_tests_properties(qtc_verify_te_hybrid PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^15 passed, 0 failed\n$")
