/// \file recipe.hpp
/// \brief A quantization recipe is a value: kind, parameters, profile, requested planes.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "qtc/tensor.hpp"

namespace qtc {

enum class RecipeKind : uint8_t { kNVFP4, kMXFP8, kFP8Block, kFP8Tensor, kMXFP4 };

/// A profile names every bit-level choice that implementations make differently (VECTORS.md, Profiles).
enum class Profile : uint8_t {
  kTE,       ///< TransformerEngine's CUDA kernels (default)
  kTEPyRef,  ///< TE's pure-PyTorch / Python test references: -0.0 -> code 0, NaN propagates into amax,
             ///< FP8 scale 0 for amax = +inf (TE_FORMATS.md §1.6, §3.2)
  kOCP,      ///< OCP MX v1.0 (MXFP8 only): floor scale rule, NaN/Inf block -> NaN scale
  kTorchAO,  ///< torchao 0.18.0 `nvfp4_quantize` (1x16, with or without per-tensor scale) and `to_mx`
             ///< (rceil, ocp_floor = FLOOR, ceil, even); every rule in profile.hpp
  kModelOpt,           ///< nvidia-modelopt 0.47.0: NVFP4QTensor / MXFP8QTensor.quantize, and `FP8QTensor.quantize`
                       ///< (FP8 tensor and block: s = amax / 448 and x / s in the input dtype, non-saturating cast)
  kCompressedTensors,  ///< compressed-tensors 0.20.0 FP8 / FP8_BLOCK presets: as ModelOpt, s = 0 -> finfo(dtype).eps,
                       ///< data clamped to +-448 before the cast
  kVllm,               ///< vLLM 0.33.0: ref_nvfp4_quant (NVFP4 emulation) and the `QuantFP8` native paths (float32,
                       ///< s >= 1/(448*512); per tensor x * (1/s), group x / s; UE8M0 exp2(ceil(log2 s)))
  kDeepGemm,           ///< DeepGEMM deep_gemm/utils/math.py casts: float32, amax >= 1e-4 (eps), x * (1/s),
                       ///< non-saturating cast, UE8M0 `ceil_to_ue8m0`
  kVllmTriton,         ///< vLLM 0.33.0 Triton `_per_token_group_quant_fp8` as read (GPU only; unverified on a GPU)
  kSglangTriton,       ///< SGLang 0.5.23 Triton `_per_token_group_quant_8bit` (row-major scales) as read (GPU only)
  kSglangTritonColMajor,  ///< SGLang 0.5.23 Triton `_per_token_group_quant_8bit_colmajor` (fp32 / UE8M0) as read (GPU only)
  kJax,  ///< JAX scaled_matmul_stablehlo.quantize (jax.nn.scaled_dot_general) on XLA CPU (profile.hpp)
  kTorchCast,     ///< MXFP8 written with PyTorch 2.11's casts: .to(torch.float8_e8m0fnu) scale, .to(float8_*) data
  kMlDtypesCast,  ///< MXFP8 / NVFP4 written with ml_dtypes 0.7's casts (float8_e8m0fnu / float8_e4m3fn scales,
                  ///< float8_* / float4_e2m1fn data)
  kTritonKernels,  ///< triton_kernels' `downcast_to_mxfp` Triton kernel (vLLM's gpt-oss MoE path), MXFP4 only, as read
  kVllmCutlass,    ///< vLLM's CUDA FP4 quantizer with UE8M0 scales (MXFP4 W4A4 MoE CUTLASS path), MXFP4 only, as read
  kFbgemm,         ///< FBGEMM's MX4 reference `py_quantize_mx4` (scale and element rules; float32), MXFP4 only, as read
  kQuark,          ///< amd-quark's `qdq_mxfp4` kernel (what vLLM's Quark OCP MX scheme calls), MXFP4 only, as read
  kCompressedTensorsTriton,  ///< compressed-tensors 0.20.0 NVFP4 / MXFP8 / MXFP4 / FP8 / FP8_BLOCK presets on CUDA
                             ///< tensors (its Triton _quantize_kernel and pack_fp4_to_uint8; GPU only, reproduced
                             ///< from H100 dumps)
};

enum class Fp8Type : uint8_t { kE4M3, kE5M2 };
/// MXFP8 E8M0 scale rule: rceil (cuBLAS/TE; torchao RCEIL), ocp_floor (OCP MX v1.0; torchao FLOOR),
/// ceil and even (torchao ScaleCalculationMode CEIL and EVEN, as its `to_mx` computes them).
enum class MxScaleRule : uint8_t { kRceil, kOcpFloor, kCeil, kEven, kPow2Round };
enum class ErrMode : uint8_t { kMAE, kMSE };

// The options of each recipe kind, and only those: a recipe is one of these alternatives plus its profile and
// the planes it produces (Recipe::options, Recipe::of). The defaults are the metadata defaults (VECTORS.md).
struct Nvfp4Options {
  bool tile_2d = false;  ///< 16x16 blocks (else 1x16)
  bool row_scaled = false;
  bool rht = false;
  bool fourover6 = false;
  ErrMode fourover6_err = ErrMode::kMAE;
  int e4m3_max = 448;
  bool stochastic = false;
  uint64_t seed = 0;
  uint16_t rht_sign_mask = 0xD7E8;
  bool per_tensor_scale = true;
  bool operator==(const Nvfp4Options&) const;  // defaulted in the .cpp (C++20), declared alike in C++17
};
struct Mxfp8Options {
  Fp8Type fp8 = Fp8Type::kE4M3;
  MxScaleRule scale_rule = MxScaleRule::kRceil;
  bool tile_2d = false;  ///< 32x32 blocks (else 1x32 / 32x1)
  bool operator==(const Mxfp8Options&) const;  // defaulted in the .cpp (C++20), declared alike in C++17
};
struct Fp8BlockOptions {
  Fp8Type fp8 = Fp8Type::kE4M3;
  bool tile_2d = false;  ///< 128x128 blocks (else 1x128 / 128x1)
  bool pow2_scales = false;
  float eps = 0.0f;
  bool ue8m0_scales = false;  ///< scale_dtype=ue8m0: scales stored as UE8M0 bytes (needs pow2_scales; else f32)
  int block_1d = 128;         ///< 1D block length: 128 (tile 1x128), or 32 (tile 1x32: DeepGEMM's per_token_cast_to_fp8
                              ///< with gran_k=32; rule fp8-block-1x32)
  bool operator==(const Fp8BlockOptions&) const;  // defaulted in the .cpp (C++20), declared alike in C++17
};
struct Fp8TensorOptions {
  Fp8Type fp8 = Fp8Type::kE4M3;
  bool pow2_scales = false;
  float eps = 0.0f;
  bool operator==(const Fp8TensorOptions&) const;  // defaulted in the .cpp (C++20), declared alike in C++17
};
/// MXFP4 (OCP MX v1.0 FP4): E2M1 elements, one E8M0 scale per 32 elements along the block axis, no per-tensor
/// scale. The scale rules keep their MXFP8 names (VECTORS.md): ocp_floor 2^(floor(log2 amax) - 2), rceil (E8M0
/// rounded up from amax / 6), torchao's ceil and even; rounding of the elements is RN-even.
struct Mxfp4Options {
  MxScaleRule scale_rule = MxScaleRule::kOcpFloor;
  bool operator==(const Mxfp4Options&) const;  // defaulted in the .cpp (C++20), declared alike in C++17
};
/// One alternative per recipe kind, in RecipeKind order.
using RecipeOptions = std::variant<Nvfp4Options, Mxfp8Options, Fp8BlockOptions, Fp8TensorOptions, Mxfp4Options>;

/// One rule of the recipe policy that Recipe::validate checks: a stable id (quoted in the error) and what it says.
struct RecipeRule {
  std::string_view id;
  std::string_view text;
};
/// Every rule Recipe::validate checks, in the order it checks them. (Rule 'kind-options', "a recipe holds only
/// its kind's options", is kept by the type: Recipe holds one RecipeOptions alternative, and its accessors of
/// another kind's options throw, naming that rule.)
#if __cplusplus >= 202002L
std::span<const RecipeRule> recipe_rules();
#endif

/// A recipe value: its profile, the planes it produces and one alternative of RecipeOptions, which holds the
/// options of its kind and only those (the kind follows from the alternative). Setting an option of another kind
/// cannot be written; asking for another kind's options (nvfp4() of an MXFP8 recipe, ...) throws qtc::Error
/// naming rule 'kind-options'. validate() checks the rules that the type cannot express.
struct Recipe {
  Profile profile = Profile::kTE;
  bool rowwise = true;     ///< produce the rowwise plane
  bool columnwise = true;  ///< produce the columnwise plane

  /// NVFP4 1x16 (the default options of the default kind) for profile te, both planes.
  Recipe() = default;
  /// The recipe of one alternative (its kind follows from it).
  static Recipe of(const RecipeOptions& options, Profile profile = Profile::kTE, bool rowwise = true, bool columnwise = true);

  RecipeKind kind() const { return static_cast<RecipeKind>(options_.index()); }  // alternatives in RecipeKind order
  bool is(RecipeKind k) const { return kind() == k; }
  /// The alternative of this recipe's kind.
  const RecipeOptions& options() const { return options_; }
  /// The default options of kind `k` (the metadata defaults).
  static RecipeOptions default_options(RecipeKind k);
  /// Replaces the alternative (and with it the kind); profile and planes stay.
  void set_options(const RecipeOptions& options) { options_ = options; }

  /// The options of one kind; throw qtc::Error (rule 'kind-options') when the recipe is of another kind.
  const Nvfp4Options& nvfp4() const { return get_or_throw<Nvfp4Options>(); }
  Nvfp4Options& nvfp4() { return get_or_throw<Nvfp4Options>(); }
  const Mxfp8Options& mxfp8() const { return get_or_throw<Mxfp8Options>(); }
  Mxfp8Options& mxfp8() { return get_or_throw<Mxfp8Options>(); }
  const Fp8BlockOptions& fp8_block() const { return get_or_throw<Fp8BlockOptions>(); }
  Fp8BlockOptions& fp8_block() { return get_or_throw<Fp8BlockOptions>(); }
  const Fp8TensorOptions& fp8_tensor() const { return get_or_throw<Fp8TensorOptions>(); }
  Fp8TensorOptions& fp8_tensor() { return get_or_throw<Fp8TensorOptions>(); }
  const Mxfp4Options& mxfp4() const { return get_or_throw<Mxfp4Options>(); }
  Mxfp4Options& mxfp4() { return get_or_throw<Mxfp4Options>(); }
  /// The options of one kind, or nullptr when the recipe is of another kind.
  const Nvfp4Options* nvfp4_or_null() const { return std::get_if<Nvfp4Options>(&options_); }
  const Mxfp8Options* mxfp8_or_null() const { return std::get_if<Mxfp8Options>(&options_); }
  const Fp8BlockOptions* fp8_block_or_null() const { return std::get_if<Fp8BlockOptions>(&options_); }
  const Fp8TensorOptions* fp8_tensor_or_null() const { return std::get_if<Fp8TensorOptions>(&options_); }
  const Mxfp4Options* mxfp4_or_null() const { return std::get_if<Mxfp4Options>(&options_); }

  /// Options shared by several kinds; each getter and setter throws qtc::Error (rule 'kind-options') for a
  /// kind without the option. The FP8 element type: MXFP8, FP8 block, FP8 tensor (NVFP4 data is E2M1).
  Fp8Type fp8_type() const;
  void set_fp8_type(Fp8Type t);
  /// Scales rounded down to a power of two, and the amax floor eps: FP8 block, FP8 tensor.
  bool pow2_scales() const;
  void set_pow2_scales(bool on);
  float eps() const;
  void set_eps(float v);
  /// Whether the blocks are 2D tiles (NVFP4 16x16, MXFP8 32x32, FP8 block 128x128); false for FP8 tensor.
  bool is_2d() const;
  /// NVFP4 with one global amax per row (per column for the columnwise plane); false for other kinds.
  bool nvfp4_row_scaled() const { return nvfp4_or_null() != nullptr && nvfp4_or_null()->row_scaled; }
  /// NVFP4 with RHT on the columnwise plane; false for other kinds.
  bool nvfp4_rht() const { return nvfp4_or_null() != nullptr && nvfp4_or_null()->rht; }

  /// The one validation of the recipe policy: throws qtc::Error "recipe <name>: rule '<id>': <text>" for the
  /// first rule of recipe_rules() that this recipe breaks (independent of the input).
  void validate() const;
  /// The id of the first rule this recipe breaks, or an empty view when it is valid.
  std::string_view broken_rule() const;
  /// Throws qtc::Error naming the rule when the input cannot be quantized with this recipe.
  void validate_input(DType input, int64_t rows, int64_t cols) const;
  /// Short stable name, e.g. "nvfp4_1x16", "nvfp4_16x16_4over6mse256", "mxfp8_e4m3_rceil", "fp8block_128x128_e5m2_pow2".
  std::string name() const;
  /// The VECTORS.md metadata of this recipe (recipe, profile and parameter keys).
  std::map<std::string, std::string> to_metadata() const;
  /// Parses VECTORS.md metadata. Unknown recipe or parameter values throw, naming the key.
  static Recipe from_metadata(const std::map<std::string, std::string>& md);

  /// Element block along the row (16, 32 or 128) and block height (1 or the tile).
  int block_cols() const;
  int block_rows() const;

  /// Same kind, options, profile and planes (eps compared by value).
  bool operator==(const Recipe&) const;  // defaulted in the .cpp (C++20), declared alike in C++17

 private:
  RecipeOptions options_;

  /// Throws qtc::Error "recipe <name>: rule 'kind-options': ..." for options of kind `wanted`.
  [[noreturn]] void wrong_kind(RecipeKind wanted) const;
  template <typename T>
  static constexpr RecipeKind kind_of() {
    return static_cast<RecipeKind>(RecipeOptions(std::in_place_type<T>).index());
  }
  template <typename T>
  const T& get_or_throw() const {
    if (const T* p = std::get_if<T>(&options_)) return *p;
    wrong_kind(kind_of<T>());
  }
  template <typename T>
  T& get_or_throw() {
    if (T* p = std::get_if<T>(&options_)) return *p;
    wrong_kind(kind_of<T>());
  }
};

std::string_view profile_name(Profile p);
std::string_view recipe_kind_name(RecipeKind k);
float fp8_max(Fp8Type t);

}  // namespace qtc
