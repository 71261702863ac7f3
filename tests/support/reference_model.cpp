#include "support/reference_model.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>

namespace cpinfer::testing {

namespace {

using Mat = std::vector<double>;  // row-major

// A minimal safetensors reader of its own (single file), so the oracle does not lean
// on the engine's loader for the numbers it checks.
struct RawTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;  // every stored dtype (F32, BF16, F16) widens exactly to float
  double at(int64_t i) const { return values[size_t(i)]; }
  int64_t numel() const { int64_t n = 1; for (auto d : shape) n *= d; return n; }
  Mat to_double() const { return Mat(values.begin(), values.end()); }
};

float widen(const std::string& dtype, const uint8_t* p) {
  if (dtype == "F32") { float f; std::memcpy(&f, p, 4); return f; }
  uint16_t h;
  std::memcpy(&h, p, 2);
  if (dtype == "BF16") { uint32_t u = uint32_t(h) << 16; float f; std::memcpy(&f, &u, 4); return f; }
  if (dtype == "F16") {  // IEEE half, by its definition
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    return float((h & 0x8000) ? -v : v);
  }
  throw std::runtime_error("reference: unsupported dtype " + dtype);
}

std::map<std::string, RawTensor> read_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("reference: cannot open " + path);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  f.read(header.data(), std::streamsize(n));
  auto j = nlohmann::json::parse(header);
  std::map<std::string, RawTensor> out;
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") continue;
    RawTensor t;
    std::string dtype = v["dtype"];
    t.shape = v["shape"].get<std::vector<int64_t>>();
    uint64_t b = v["data_offsets"][0], e = v["data_offsets"][1];
    std::vector<uint8_t> bytes(e - b);
    f.seekg(std::streamoff(8 + n + b));
    f.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(e - b));
    size_t es = dtype == "F32" ? 4 : 2;
    t.values.resize(bytes.size() / es);
    for (size_t i = 0; i < t.values.size(); ++i) t.values[i] = widen(dtype, &bytes[i * es]);
    out[name] = std::move(t);
  }
  return out;
}

// y[n0 .. n1) = the dot products of x[K] with rows n0 .. n1 of W[N, K] (element type T:
// float or double, widened exactly). Every y[n] is the plain loop's sum: products in double,
// added in k order from 0, one rounding each (the build targets baseline x86-64, so no FMA
// contraction). Eight rows go together only so that their eight independent sums overlap in
// the CPU (one running sum waits on its previous add: the plain loop ran at one add per add
// latency); each sum's operations and their order stay those of the plain loop, so the
// results are bit for bit the same.
template <typename T>
void dot_rows(const double* x, const T* w, int64_t K, int64_t n0, int64_t n1, double* y) {
  constexpr int kRows = 8;
  int64_t n = n0;
  for (; n + kRows <= n1; n += kRows) {
    double s[kRows] = {};
    const T* wn = w + n * K;
    for (int64_t k = 0; k < K; ++k)
      for (int r = 0; r < kRows; ++r) s[r] += x[k] * double(wn[r * K + k]);
    for (int r = 0; r < kRows; ++r) y[n + r] = s[r];
  }
  for (; n < n1; ++n) {
    double s = 0;
    for (int64_t k = 0; k < K; ++k) s += x[k] * double(w[n * K + k]);
    y[n] = s;
  }
}

// y[M, N] = x[M, K] W[N, K]^T, two threads over N.
Mat matmul_t(const Mat& x, int64_t M, int64_t K, const Mat& w, int64_t N) {
  Mat y(size_t(M * N));
  auto part = [&](int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < M; ++m) dot_rows(x.data() + m * K, w.data(), K, n0, n1, y.data() + m * N);
  };
  std::thread t(part, 0, N / 2);
  part(N / 2, N);
  t.join();
  return y;
}

void rmsnorm(Mat& x, int64_t M, int64_t H, const Mat& w, double eps) {
  for (int64_t m = 0; m < M; ++m) {
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += x[size_t(m * H + i)] * x[size_t(m * H + i)];
    double r = 1.0 / std::sqrt(ss / double(H) + eps);
    for (int64_t i = 0; i < H; ++i) x[size_t(m * H + i)] *= r * w[size_t(i)];
  }
}

}  // namespace

struct ReferenceModel::Impl {
  nlohmann::json cfg;
  std::map<std::string, RawTensor> t;
  int64_t H, I, L, Hq, Hkv, D, V;
  double eps, theta;
  bool tied;
  bool qk_norm;  // Qwen3
  std::vector<double> inv_freq;
  double rope_mult = 1.0;  // YaRN: cos and sin are multiplied by its attention factor
  const RawTensor& get(const std::string& n) const {
    auto it = t.find(n);
    if (it == t.end()) throw std::runtime_error("reference: missing tensor " + n);
    return it->second;
  }
};

ReferenceModel::ReferenceModel(const std::string& dir) : impl_(new Impl) {
  Impl& m = *impl_;
  std::ifstream cf(dir + "/config.json");
  m.cfg = nlohmann::json::parse(cf);
  m.t = read_safetensors(dir + "/model.safetensors");
  m.H = m.cfg["hidden_size"];
  m.I = m.cfg["intermediate_size"];
  m.L = m.cfg["num_hidden_layers"];
  m.Hq = m.cfg["num_attention_heads"];
  m.Hkv = m.cfg["num_key_value_heads"];
  m.D = m.cfg.contains("head_dim") ? int64_t(m.cfg["head_dim"]) : m.H / m.Hq;
  m.V = m.cfg["vocab_size"];
  m.eps = m.cfg["rms_norm_eps"];
  m.theta = m.cfg["rope_theta"];
  m.tied = m.cfg.value("tie_word_embeddings", false);
  m.qk_norm = m.cfg.value("model_type", "") == "qwen3";
  nlohmann::json rs = m.cfg.contains("rope_scaling") ? m.cfg["rope_scaling"] : nlohmann::json();
  std::string type = "default";
  if (rs.is_object()) type = rs.contains("rope_type") ? rs["rope_type"] : rs["type"];
  for (int64_t i = 0; i < m.D / 2; ++i)
    m.inv_freq.push_back(1.0 / std::pow(m.theta, double(2 * i) / double(m.D)));
  if (type == "linear") {
    // Position p is used as p / factor.
    for (double& f : m.inv_freq) f = f / double(rs["factor"]);
  } else if (type == "llama3") {
    // Llama 3 rope scaling, straight from its definition.
    double factor = rs["factor"], lo = rs["low_freq_factor"], hi = rs["high_freq_factor"];
    double old_ctx = rs["original_max_position_embeddings"];
    for (double& f : m.inv_freq) {
      double wavelen = 2 * M_PI / f;
      if (wavelen > old_ctx / lo) f = f / factor;
      else if (wavelen >= old_ctx / hi) {
        double smooth = (old_ctx / wavelen - lo) / (hi - lo);
        f = (1 - smooth) * f / factor + smooth * f;
      }
    }
  } else if (type == "yarn") {
    // YaRN from the paper's definitions (Peng et al. 2023, "NTK-by-parts" + attention
    // temperature), with Hugging Face's defaults and its rounding of the ramp's ends.
    auto num = [&](const char* k, double def) {
      return rs.contains(k) && !rs[k].is_null() && double(rs[k]) != 0 ? double(rs[k]) : def;
    };
    const double s = rs["factor"];
    const double L = rs.contains("original_max_position_embeddings")
                         ? double(rs["original_max_position_embeddings"])
                         : double(m.cfg["max_position_embeddings"]);
    const double alpha = num("beta_slow", 1), beta = num("beta_fast", 32);
    const bool truncate = rs.value("truncate", true);
    // Dimension pair d (of D/2) has wavelength 2 pi theta^(2d/D) and so makes
    // r(d) = L / wavelength turns over the original context. Its ramp
    // gamma(r) = 0 for r < alpha, 1 for r > beta, linear in d between those pairs.
    auto pair_at = [&](double r) {  // the (fractional) pair that turns r times
      return double(m.D) * std::log(L / (2 * M_PI * r)) / (2 * std::log(m.theta));
    };
    double lo = pair_at(beta), hi = pair_at(alpha);
    if (truncate) { lo = std::floor(lo); hi = std::ceil(hi); }
    lo = std::max(lo, 0.0);
    hi = std::min(hi, double(m.D - 1));
    if (hi == lo) hi = lo + 0.001;
    for (size_t d = 0; d < m.inv_freq.size(); ++d) {
      double t = (double(d) - lo) / (hi - lo);
      double interp = t < 0 ? 0 : t > 1 ? 1 : t;  // 1: fully interpolated (theta_d / s)
      double theta_d = m.inv_freq[d];
      m.inv_freq[d] = (1 - interp) * theta_d + interp * theta_d / s;
    }
    // sqrt(1/t) = 0.1 ln(s) + 1 in the paper; DeepSeek's mscale / mscale_all_dim variant.
    auto mscale = [&](double ms) { return s <= 1 ? 1.0 : 0.1 * ms * std::log(s) + 1; };
    if (rs.contains("attention_factor") && !rs["attention_factor"].is_null())
      m.rope_mult = rs["attention_factor"];
    else if (num("mscale", 0) != 0 && num("mscale_all_dim", 0) != 0)
      m.rope_mult = mscale(num("mscale", 0)) / mscale(num("mscale_all_dim", 0));
    else
      m.rope_mult = mscale(1);
  } else if (type != "default") {
    throw std::runtime_error("reference: rope type " + type);
  }
}

ReferenceModel::~ReferenceModel() { delete impl_; }

int64_t ReferenceModel::vocab_size() const { return impl_->V; }

std::vector<double> ReferenceModel::logits(const std::vector<int32_t>& tokens,
                                           const std::vector<int64_t>& rows) const {
  const Impl& m = *impl_;
  const int64_t n = int64_t(tokens.size()), H = m.H, D = m.D, Hq = m.Hq, Hkv = m.Hkv, I = m.I;
  const RawTensor& emb = m.get("model.embed_tokens.weight");
  Mat x(size_t(n * H));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < H; ++j) x[size_t(i * H + j)] = emb.at(int64_t(tokens[size_t(i)]) * H + j);

  auto rope = [&](Mat& a, int64_t heads) {
    for (int64_t p = 0; p < n; ++p)
      for (int64_t h = 0; h < heads; ++h) {
        double* v = &a[size_t((p * heads + h) * D)];
        for (int64_t i = 0; i < D / 2; ++i) {
          double ang = double(p) * m.inv_freq[size_t(i)];
          double c = std::cos(ang) * m.rope_mult, s = std::sin(ang) * m.rope_mult;
          double x1 = v[i], x2 = v[i + D / 2];
          v[i] = x1 * c - x2 * s;
          v[i + D / 2] = x2 * c + x1 * s;
        }
      }
  };

  for (int64_t l = 0; l < m.L; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    Mat h = x;
    rmsnorm(h, n, H, m.get(p + "input_layernorm.weight").to_double(), m.eps);
    Mat q = matmul_t(h, n, H, m.get(p + "self_attn.q_proj.weight").to_double(), Hq * D);
    Mat k = matmul_t(h, n, H, m.get(p + "self_attn.k_proj.weight").to_double(), Hkv * D);
    Mat v = matmul_t(h, n, H, m.get(p + "self_attn.v_proj.weight").to_double(), Hkv * D);
    if (m.t.count(p + "self_attn.q_proj.bias")) {
      Mat qb = m.get(p + "self_attn.q_proj.bias").to_double();
      Mat kb = m.get(p + "self_attn.k_proj.bias").to_double();
      Mat vb = m.get(p + "self_attn.v_proj.bias").to_double();
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < Hq * D; ++j) q[size_t(i * Hq * D + j)] += qb[size_t(j)];
        for (int64_t j = 0; j < Hkv * D; ++j) {
          k[size_t(i * Hkv * D + j)] += kb[size_t(j)];
          v[size_t(i * Hkv * D + j)] += vb[size_t(j)];
        }
      }
    }
    if (m.qk_norm) {
      // Qwen3: RMSNorm over each head's D values (rows of [n * heads, D]), before RoPE.
      rmsnorm(q, n * Hq, D, m.get(p + "self_attn.q_norm.weight").to_double(), m.eps);
      rmsnorm(k, n * Hkv, D, m.get(p + "self_attn.k_norm.weight").to_double(), m.eps);
    }
    rope(q, Hq);
    rope(k, Hkv);
    // Causal softmax attention, natural exp, each q head on KV head h / (Hq / Hkv).
    Mat att(size_t(n * Hq * D), 0.0);
    const double scale = 1.0 / std::sqrt(double(D));
    std::vector<double> sc(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t hh = 0; hh < Hq; ++hh) {
        int64_t g = hh / (Hq / Hkv);
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += q[size_t((i * Hq + hh) * D + d)] * k[size_t((j * Hkv + g) * D + d)];
          sc[size_t(j)] = s * scale;
          mx = std::max(mx, sc[size_t(j)]);
        }
        double den = 0;
        for (int64_t j = 0; j <= i; ++j) den += sc[size_t(j)] = std::exp(sc[size_t(j)] - mx);
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t d = 0; d < D; ++d)
            att[size_t((i * Hq + hh) * D + d)] += sc[size_t(j)] / den * v[size_t((j * Hkv + g) * D + d)];
      }
    Mat o = matmul_t(att, n, Hq * D, m.get(p + "self_attn.o_proj.weight").to_double(), H);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = x;
    rmsnorm(h, n, H, m.get(p + "post_attention_layernorm.weight").to_double(), m.eps);
    Mat g = matmul_t(h, n, H, m.get(p + "mlp.gate_proj.weight").to_double(), I);
    Mat u = matmul_t(h, n, H, m.get(p + "mlp.up_proj.weight").to_double(), I);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    Mat dn = matmul_t(g, n, I, m.get(p + "mlp.down_proj.weight").to_double(), H);
    for (size_t i = 0; i < x.size(); ++i) x[i] += dn[i];
  }
  rmsnorm(x, n, H, m.get("model.norm.weight").to_double(), m.eps);
  const RawTensor& head = m.tied ? emb : m.get("lm_head.weight");
  std::vector<double> out(rows.size() * size_t(m.V));
  auto part = [&](int64_t v0, int64_t v1) {
    for (size_t r = 0; r < rows.size(); ++r)
      dot_rows(x.data() + rows[r] * H, head.values.data(), H, v0, v1, out.data() + r * size_t(m.V));
  };
  std::thread t(part, 0, m.V / 2);
  part(m.V / 2, m.V);
  t.join();
  return out;
}

}  // namespace cpinfer::testing
