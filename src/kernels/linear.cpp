// linear() and embedding_lookup(): argument checks, the split into pool tasks, and the
// choice of per-ISA kernels (linear_impl.h).
#include "kernels/linear.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>

#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/linear_impl.h"
#include "kernels/quantize.h"

namespace cpinfer {

namespace linear_impl {

float* thread_scratch(int slot, size_t floats) {
  struct Buffer {
    float* data = nullptr;
    size_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffers[4];
  Buffer& b = buffers[slot];
  if (b.size < floats) {
    std::free(b.data);
    size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    b.data = static_cast<float*>(std::aligned_alloc(64, bytes));
    CPI_CHECK(b.data, "out of memory allocating {} bytes of GEMM scratch", bytes);
    b.size = floats;
  }
  return b.data;
}

}  // namespace linear_impl

namespace {

const linear_impl::Kernels& kernels_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return linear_impl::avx512_kernels();
    case Isa::Avx2: return linear_impl::avx2_kernels();
    default: return linear_impl::generic_kernels();
  }
}

bool is_weight_dtype(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16 || t == DType::Q8_0;
}

// GEMV (W streamed once, x re-read per W row), skinny register tiles (decode batches) or
// packed GEMM (W widened and transposed into panels, x broadcast from registers): see
// choose_path.
std::atomic<int> g_forced_path{int(linear_impl::Path::Auto)};
// Under bf16 dot math, up to this many rows the dot skinny tiles, beyond them the dot GEMM
// (choose_path).
constexpr int64_t kBf16DotSkinnyMaxRows = 128;
// Under int8 dot math over Q8_0 weights, up to this many rows the int8-dot GEMV, beyond it the
// int8-dot GEMM (choose_path).
constexpr int64_t kInt8DotGemvMaxRows = 4;

}  // namespace

linear_impl::Path linear_impl::choose_path(const Kernels& k, int64_t M, int64_t K, DType dt) {
  Path p = Path(g_forced_path.load(std::memory_order_relaxed));
  const bool automatic = p == Path::Auto;
  const bool skinny = k.skinny && dt != DType::Q8_0;  // no skinny tiles over Q8_0 blocks
  if (p == Path::Auto && dt == DType::Q8_0) {
    // Q8_0 weights: the GEMV (one pass over W for groups of 4 x rows, W blocks reused
    // from L1/L2 across groups) for decode batches, the GEMM (panels dequantized to f32
    // once per call) for prefill.
    p = M <= 64 ? Path::Gemv : Path::Gemm;
  }
  if (p == Path::Auto) {
    // Measured on Zen 4, 2 threads, bf16 Qwen2.5-0.5B shapes (bench/linear_bench.cpp, best
    // GFLOP/s of the paths at each M; peak 235): M = 4: GEMV 79-113, skinny 84-104; M = 16:
    // skinny 166, GEMV 104, GEMM 87-105; M = 64: skinny 203-212, GEMM 150-178; M = 256:
    // skinny 209-217, GEMM 180-202; M = 512: both 185-212 (1 thread: both 101-106). So the
    // GEMV up to M = 4 (one pass over W for all rows), skinny tiles up to M = 256, and the
    // packed GEMM for prefill beyond (on Zen 4; the crossover moves lower on Intel cores:
    // skinny_max_rows_for). Without skinny tiles: the GEMV up to M = 8, and up to
    // M = 32 while a group of 4 x rows (16 K bytes) fits in L1.
    // Over bf16 weights the skinny tiles win from fewer rows where the GEMV's widening
    // binds (AVX2's pair tiles from 4, AVX-512 on Zen 4 from 2): k.skinny_min_rows_bf16
    // (skinny_min_rows_bf16_for).
    const int64_t gemv_max_rows = skinny && dt == DType::BF16 ? k.skinny_min_rows_bf16 - 1 : 4;
    if (M <= gemv_max_rows) p = Path::Gemv;
    else if (skinny) p = M <= k.skinny_max_rows ? Path::Skinny : Path::Gemm;
    else p = M <= 8 || (M <= 32 && K <= 1024) ? Path::Gemv : Path::Gemm;
  }
  // bf16 weights with bf16 dot products chosen: the dot skinny tiles where the f32 skinny
  // tiles or the GEMV of 2-4 rows would run, up to 128 rows; the dot GEMM for the rest; a
  // single row keeps the GEMV (one FMA per 16 weights: bound by the reads, and x exact).
  // Measured on an AMD EPYC Zen 5 (bench/linear_bench, 2 threads, qkv / gate_up / down of
  // Qwen2.5-0.5B, best GFLOP/s): M = 64: dot skinny 600 / 662 / 537, dot GEMM 444 / 403 / 466;
  // M = 128: 632 / 678 / 450 against 568 / 514 / 538 (the skinny tiles ahead on the layer's
  // sum). On an AMD EPYC Zen 4 (one 512-bit FMA a cycle, 2 threads, GFLOP/s, f32 GEMV / dot
  // skinny): M = 4: qkv 78 / 101, o 67 / 87, gate_up 92 / 104, down 40 / 103, LM head
  // 62 / 104 (the GEMV's 4 FMAs per 16 weights bind it); M = 2: qkv 38 / 53, o 33 / 47,
  // gate_up 54 / 53, down 26 / 49, LM head 58 / 53.
  if (automatic && M >= 2 && linear_uses_bf16_dot(dt))  // (one row: always the GEMV above)
    p = (p == Path::Skinny || p == Path::Gemv) && M <= kBf16DotSkinnyMaxRows
            ? Path::SkinnyBf16Dot
            : Path::GemmBf16Dot;
  // Q8_0 weights under int8 dot math, where the int8-dot kernels run: the GEMV up to 4 rows,
  // the GEMM from 5. Measured on Zen 4 (bench/linear_bench, GFLOP/s, GEMV / GEMM, 1 thread):
  // M = 4: gate/up 81 / 48, down 45 / 72, LM head 79 / 48; M = 8: 73 / 87, 61 / 125, 67 / 88;
  // M = 64: 80 / 253, 86 / 274, 84 / 253 (2 threads alike). Elsewhere the f32 kernels'
  // choice above, on the quantized x.
  if (automatic && linear_uses_int8_dot(dt) && int8_dot_available(dt))
    p = M <= kInt8DotGemvMaxRows ? Path::GemvInt8Dot : Path::GemmInt8Dot;
  if (p == Path::GemvInt8Dot && !int8_dot_available(dt)) p = Path::Gemv;
  if (p == Path::GemmInt8Dot && !int8_dot_available(dt)) p = Path::Gemm;
  if (p == Path::SkinnyBf16Dot && !bf16_dot_gemm_available(dt)) p = Path::Skinny;
  if (p == Path::Skinny && !skinny) p = Path::Gemv;
  if (p == Path::GemmBf16Dot && !bf16_dot_gemm_available(dt)) p = Path::Gemm;
  return p;
}

bool linear_impl::bf16_dot_gemm_available(DType dt) {
  return dt == DType::BF16 && active_isa() == Isa::Avx512 && bf16_dot_supported();
}

bool linear_impl::int8_dot_available(DType dt) {
  return dt == DType::Q8_0 && active_isa() == Isa::Avx512 && int8_dot_supported();
}

// AMD with AVX2 only (Zen 3, bench/linear_bench, best GFLOP/s, skinny against GEMM, bf16
// Qwen2.5-0.5B shapes qkv / o / gate_up / down, 2 threads): M = 128: 151 / 148 / 154 / 160
// against 154 / 156 / 155 / 163; M = 256: 147 / 142 / 149 / 161 against 162 / 165 / 164 /
// 170; one thread at M = 64 the pair tiles still win (qkv 84 against 71). So 128 there.
int64_t linear_impl::skinny_max_rows_for(bool avx512) {
  static const bool amd = __builtin_cpu_is("amd");
  if (amd) return avx512 ? 256 : 128;
  return avx512 ? 24 : 48;
}

namespace {
// AMD family 25 (19h) is Zen 3 and Zen 4; of the two only Zen 4 has AVX-512.
bool cpu_is_zen4() {
  static const bool zen4 =
      __builtin_cpu_is("amd") && cpu_family() == 0x19 && isa_supported(Isa::Avx512);
  return zen4;
}
}  // namespace

int64_t linear_impl::skinny_min_rows_bf16_for(bool avx512) {
  if (!avx512) return 4;
  return cpu_is_zen4() ? 2 : 5;
}

namespace {
// CPINFER_GEMV_PREFETCH: 1 or 0 forces the GEMVs' software prefetch on or off, -1 (unset):
// the per-CPU rules below.
int gemv_prefetch_forced() {
  static const int forced = [] {
    const char* v = std::getenv("CPINFER_GEMV_PREFETCH");
    if (v == nullptr || *v == '\0') return -1;
    const std::string s(v);
    CPI_CHECK(s == "0" || s == "1", "CPINFER_GEMV_PREFETCH='{}' is not 0 or 1", s);
    return s == "1" ? 1 : 0;
  }();
  return forced;
}
}  // namespace

bool linear_impl::gemv_prefetch_for(DType dt) {
  const int forced = gemv_prefetch_forced();
  if (forced >= 0) return forced == 1;
  return dt == DType::Q8_0 || !cpu_is_zen4();
}

bool linear_impl::gemv_int8_dot_prefetch() {
  const int forced = gemv_prefetch_forced();
  if (forced >= 0) return forced == 1;
  return !cpu_is_zen4();
}

bool linear_impl::skinny_prefetch_to_l2() { return cpu_is_zen4(); }

const linear_impl::Kernels& linear_impl::kernels_for_path(const Kernels& k, Path p) {
  if (p == Path::GemmInt8Dot) return avx512_int8_dot_kernels();
  return p == Path::GemmBf16Dot || p == Path::SkinnyBf16Dot ? avx512_bf16_dot_kernels() : k;
}

linear_impl::GemvFn linear_impl::rows_kernel(const Kernels& k, Path p) {
  if (p == Path::SkinnyBf16Dot) return k.skinny_bf16;
  if (p == Path::GemvInt8Dot) return gemv_int8_dot;
  return p == Path::Skinny ? k.skinny : k.gemv;
}

const linear_impl::Kernels& linear_impl::active_kernels() { return kernels_for(active_isa()); }

namespace {

using linear_impl::kMinMacsPerTask;

// Decode: split the W rows into contiguous ranges (a few per thread, so an oversubscribed
// rank still balances), each streamed once for all M rows by `rows_fn` (gemv or skinny).
void run_rows(linear_impl::GemvFn rows_fn, const float* x, int64_t M, int64_t ldx,
              const WeightView& w, const float* bias, float* y, int64_t ldy, ThreadPool& pool) {
  const int64_t N = w.rows;
  constexpr int64_t kRowAlign = 16;  // tasks never share a 64-byte line of y
  int64_t tasks = pool.size() == 1 ? 1 : int64_t(pool.size()) * 4;
  tasks = std::min(tasks, std::max<int64_t>(1, M * N * w.cols / kMinMacsPerTask));
  tasks = std::min(tasks, (N + kRowAlign - 1) / kRowAlign);
  tasks = std::max<int64_t>(tasks, 1);
  const int64_t blocks = (N + kRowAlign - 1) / kRowAlign;
  pool.run(tasks, [&](int64_t t, int) {
    int64_t n0 = std::min(N, blocks * t / tasks * kRowAlign);
    int64_t n1 = std::min(N, blocks * (t + 1) / tasks * kRowAlign);
    if (n0 < n1) rows_fn(x, M, ldx, w, bias, y, ldy, n0, n1);
  });
}

// Prefill: tasks are (N range, M range) blocks. N ranges are whole strips of nr W rows and
// disjoint, so no W panel is packed twice; M is split only when there are too few strips.
void run_gemm(const linear_impl::Kernels& kern, const float* x, int64_t M, int64_t ldx,
              const WeightView& w, const float* bias, float* y, int64_t ldy, ThreadPool& pool) {
  const int64_t N = w.rows, K = w.cols;
  const int64_t T = pool.size();
  const int64_t strips = (N + kern.nr - 1) / kern.nr;
  const int64_t max_tasks = std::max<int64_t>(1, M * N * K / (4 * kMinMacsPerTask));
  int64_t n_tasks = 1, m_tasks = 1;
  if (T > 1 && max_tasks > 1) {
    // About one task per packed panel, rounded up to a multiple of the thread count so
    // every thread gets the same share.
    n_tasks = std::max<int64_t>(1, (strips + kern.nc_strips - 1) / kern.nc_strips);
    n_tasks = (n_tasks + T - 1) / T * T;
    n_tasks = std::min({n_tasks, strips, max_tasks});
    if (n_tasks < T) {
      const int64_t m_tiles = (M + kern.mr - 1) / kern.mr;
      m_tasks = std::min({(T + n_tasks - 1) / n_tasks, m_tiles, max_tasks / n_tasks});
      m_tasks = std::max<int64_t>(m_tasks, 1);
    }
  }
  pool.run(n_tasks * m_tasks, [&](int64_t t, int) {
    const int64_t tn = t / m_tasks, tm = t % m_tasks;
    const int64_t n0 = std::min(N, strips * tn / n_tasks * kern.nr);
    const int64_t n1 = std::min(N, strips * (tn + 1) / n_tasks * kern.nr);
    // M ranges in whole microkernel tiles where possible.
    const int64_t m_tiles = (M + kern.mr - 1) / kern.mr;
    const int64_t m0 = std::min(M, m_tiles * tm / m_tasks * kern.mr);
    const int64_t m1 = std::min(M, m_tiles * (tm + 1) / m_tasks * kern.mr);
    if (n0 < n1 && m0 < m1) kern.gemm(x, ldx, w, bias, y, ldy, m0, m1, n0, n1);
  });
}

}  // namespace

void linear_impl::force_path(Path p) { g_forced_path.store(int(p)); }

namespace {
// Rows [0, M) of x through quantize(x + m0 * ldx, m1 - m0, ldx, K, dst + m0 * dst_ld) on
// the pool, in pieces of at least 16K elements.
template <typename Quantize>
void quantize_rows_on(ThreadPool& pool, const float* x, int64_t M, int64_t ldx, int64_t K,
                      float* dst, int64_t dst_ld, Quantize quantize) {
  pool.parallel_for(M, std::max<int64_t>(1, 16384 / K), [&](int64_t m0, int64_t m1) {
    quantize(x + m0 * ldx, m1 - m0, ldx, K, dst + m0 * dst_ld);
  });
}
}  // namespace

const float* linear_impl::rows_for_path(const float* x, int64_t M, int64_t& ldx, int64_t K,
                                        DType dt, Path path, ThreadPool& pool) {
  const bool automatic = Path(g_forced_path.load(std::memory_order_relaxed)) == Path::Auto;
  if (reads_int8_rows(path) || (automatic && linear_uses_int8_dot(dt))) {
    const bool packed = reads_int8_rows(path);
    const int64_t row = packed ? q8_act_row_floats(K) : K;
    float* r = thread_scratch(3, size_t(M * row));
    quantize_rows_on(pool, x, M, ldx, K, r, row, packed ? q8_act_rows : q8_act_fake_rows);
    ldx = row;
    return r;
  }
  if (path == Path::SkinnyBf16Dot) {
    const int64_t stride = bf16_row_stride(K);
    float* packed = thread_scratch(3, size_t(M * stride / 2));
    avx512_bf16_dot_kernels().pack_rows_bf16(x, M, ldx, K, reinterpret_cast<uint16_t*>(packed));
    ldx = stride / 2;
    return packed;
  }
  if (path == Path::GemmBf16Dot || !automatic || !linear_uses_bf16_dot(dt))
    return x;
  float* r = thread_scratch(3, size_t(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) r[m * K + k] = float(bf16(x[m * ldx + k]));
  ldx = K;
  return r;
}

void linear_read_environment() { (void)linear_impl::gemv_prefetch_for(DType::BF16); }

bool linear_uses_bf16_dot(DType dt) {
  return linear_impl::bf16_dot_gemm_available(dt) && bf16_dot_chosen();
}

bool linear_uses_int8_dot(DType dt) { return dt == DType::Q8_0 && int8_dot_chosen(); }

std::string_view linear_prefill_unit(DType dt) {
  if (linear_uses_bf16_dot(dt)) return "bf16_dot";
  if (linear_uses_int8_dot(dt) && linear_impl::int8_dot_available(dt)) return "int8_vnni512";
  return "fp32_fma";
}

void linear_impl::check_args(const float* x, int64_t M, int64_t ldx, const WeightView& w,
                             const float* y, int64_t ldy) {
  CPI_CHECK(is_weight_dtype(w.dtype), "linear: weight dtype {} is not F32, BF16, F16 or Q8_0",
            dtype_name(w.dtype));
  CPI_CHECK(w.dtype != DType::Q8_0 || (w.cols % kQ8BlockElems == 0 && w.ld % kQ8BlockElems == 0),
            "linear: a Q8_0 weight needs K ({}) and its row stride ({}) in whole 32-element "
            "blocks", w.cols, w.ld);
  CPI_CHECK(w.rows >= 1 && w.cols >= 1, "linear: weight shape [{}, {}] must be non-empty",
            w.rows, w.cols);
  CPI_CHECK(w.ld >= w.cols, "linear: weight row stride {} is less than its {} columns", w.ld,
            w.cols);
  CPI_CHECK(w.data != nullptr, "linear: weight [{}, {}] has no data", w.rows, w.cols);
  CPI_CHECK(M >= 0, "linear: M = {} is negative", M);
  CPI_CHECK(ldx >= w.cols, "linear: x row stride {} is less than K = {}", ldx, w.cols);
  CPI_CHECK(ldy >= w.rows, "linear: y row stride {} is less than N = {}", ldy, w.rows);
  CPI_CHECK(M == 0 || (x != nullptr && y != nullptr), "linear: x or y is null for M = {}", M);
}

void linear(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
            float* y, int64_t ldy, ThreadPool& pool) {
  linear_impl::check_args(x, M, ldx, w, y, ldy);
  if (M == 0) return;
  const linear_impl::Kernels& kern = linear_impl::active_kernels();
  const linear_impl::Path path = linear_impl::choose_path(kern, M, w.cols, w.dtype);
  x = linear_impl::rows_for_path(x, M, ldx, w.cols, w.dtype, path, pool);
  if (linear_impl::is_gemm(path))
    run_gemm(linear_impl::kernels_for_path(kern, path), x, M, ldx, w, bias, y, ldy, pool);
  else run_rows(linear_impl::rows_kernel(linear_impl::kernels_for_path(kern, path), path), x, M,
                ldx, w, bias, y, ldy, pool);
}

void embedding_lookup(const WeightView& table, const int32_t* ids, int64_t n, float* out,
                      ThreadPool& pool) {
  CPI_CHECK(is_weight_dtype(table.dtype), "embedding: table dtype {} is not F32, BF16, F16 or "
            "Q8_0", dtype_name(table.dtype));
  CPI_CHECK(table.dtype != DType::Q8_0 ||
                (table.cols % kQ8BlockElems == 0 && table.ld % kQ8BlockElems == 0),
            "embedding: a Q8_0 table needs its {} columns and row stride {} in whole 32-element "
            "blocks", table.cols, table.ld);
  CPI_CHECK(table.rows >= 1 && table.cols >= 1 && table.ld >= table.cols && table.data,
            "embedding: table [{}, {}] with row stride {} is not a valid matrix", table.rows,
            table.cols, table.ld);
  CPI_CHECK(n >= 0, "embedding: {} ids is negative", n);
  if (n == 0) return;
  CPI_CHECK(ids != nullptr && out != nullptr, "embedding: ids or out is null for {} ids", n);
  for (int64_t i = 0; i < n; ++i)
    CPI_CHECK(ids[i] >= 0 && ids[i] < table.rows,
              "embedding: token id {} at position {} is outside the vocabulary [0, {})", ids[i],
              i, table.rows);
  const linear_impl::Kernels& kern = kernels_for(active_isa());
  const int64_t row_bytes = dtype_bytes(table.dtype, table.ld);
  const auto* base = static_cast<const uint8_t*>(table.data);
  pool.parallel_for(n, std::max<int64_t>(1, 16384 / table.cols), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      kern.widen(base + ids[i] * row_bytes, table.dtype, table.cols,
                 out + i * table.cols);
  });
}

}  // namespace cpinfer
