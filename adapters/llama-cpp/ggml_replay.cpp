// SPDX-License-Identifier: MIT OR Apache-2.0
//
// The replay of the adapter protocol (docs/protocol.md, "replay") with ggml's
// own CPU ops, as llama.cpp's Qwen3.5 graph calls them (llama.cpp 0c1e57098,
// src/models/qwen35.cpp lines 358-441): ggml_ssm_conv and ggml_silu over the
// checkpoint's columns and the window's pre-conv rows; q and k L2-normed as
// build_gdn_l2_norm does (src/models/models.h lines 13-18); g from
// ggml_softplus(a + dt_bias) times -exp(A_log), beta ggml_sigmoid(b); then
// ggml_gated_delta_net with K equal to the window, which writes the state
// after every token (ggml/include/ggml.h lines 2641-2651: slot 0 the newest,
// slot s the state s tokens back). A round rolls back as llama.cpp does with
// n_rs_seq snapshots: it keeps the snapshot of its last accepted token, and
// the conv columns that end there.
//
// adapters/llama-cpp/ggml_adapter.py speaks the protocol and hands each
// decoded request here, one per line on stdin, numbers as C99 hex floats:
//
//   nk dk nv dv width gates rounds
//   conv_weight (conv_dim x width)  [a_log (nv)  dt_bias (nv) when gates]
//   conv (conv_dim x (width - 1))  h (nv x dk x dv)
//   then per round: tokens accepted, and per token qkv (conv_dim), g (nv),
//   beta (nv) [a (nv) b (nv) when gates]
//
// and reads one line back: the state after each round (conv then h, %a), or
// "error <text>". `ggml-replay off-by-one` is the control build: it keeps the
// snapshot one token off the accepted count (one later where the window has
// room, else one earlier), so its partial accepts must fail.
//
// Built by adapters/llama-cpp/build.py against the release's ggml.

#include "ggml.h"
#include "ggml-cpu.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// The largest dimension and window the adapter takes (the protocol's bound on dims).
constexpr long MAX_DIM = 4096;
constexpr long MAX_TOKENS = 4096;
// The epsilon of the L2 norm: Qwen3.5's rms_norm_eps, which build_gdn_l2_norm takes.
constexpr float L2_EPS = 1e-6f;

struct Numbers {
    std::istringstream in;
    explicit Numbers(const std::string & line) : in(line) {}

    long integer(long low, long high, const char * what) {
        long value = 0;
        if (!(in >> value) || value < low || value > high) {
            throw std::runtime_error(std::string("bad ") + what);
        }
        return value;
    }

    std::vector<float> floats(size_t count, const char * what) {
        std::vector<float> out(count);
        std::string word;
        for (size_t i = 0; i < count; ++i) {
            if (!(in >> word)) {
                throw std::runtime_error(std::string("short ") + what);
            }
            char * end = nullptr;
            const double value = std::strtod(word.c_str(), &end);
            if (end == word.c_str() || *end != '\0' || !std::isfinite(value)) {
                throw std::runtime_error(std::string("bad float in ") + what);
            }
            // The protocol's values are FP32 values here (the pipeline's): exact.
            out[i] = static_cast<float>(value);
        }
        return out;
    }
};

struct Round {
    long tokens = 0;
    long accepted = 0;
    std::vector<float> qkv, g, beta, a, b;  // token-major
};

long off_by_one(long accepted, long window) {
    if (accepted < window) {
        return accepted + 1;
    }
    return accepted > 1 ? accepted - 1 : accepted;
}

ggml_tensor * filled(ggml_context * ctx, ggml_tensor * t, const std::vector<float> & values) {
    std::memcpy(t->data, values.data(), values.size() * sizeof(float));
    return t;
}

// build_gdn_l2_norm: ggml_rms_norm with eps / n, then ggml_scale by 1 / sqrtf(n).
ggml_tensor * l2_norm(ggml_context * ctx, ggml_tensor * x) {
    const float n = static_cast<float>(x->ne[0]);
    return ggml_scale(ctx, ggml_rms_norm(ctx, x, L2_EPS / n), 1.0f / sqrtf(n));
}

// q or k of nk heads repeated to nv heads as the protocol's model does
// (repeat_interleave: value head h reads key head h / (nv / nk)); ggml's
// kernel would tile them (head h reads h % nk), so the repeat is explicit.
ggml_tensor * to_value_heads(ggml_context * ctx, ggml_tensor * x, long nk, long nv, long tokens) {
    const long dk = x->ne[0];
    ggml_tensor * grouped = ggml_reshape_4d(ctx, ggml_cont(ctx, x), dk, 1, nk, tokens);
    ggml_tensor * repeated = ggml_repeat_4d(ctx, grouped, dk, nv / nk, nk, tokens);
    return ggml_reshape_4d(ctx, repeated, dk, nv, tokens, 1);
}

std::string answer(const std::string & line, bool control) {
    Numbers in(line);
    const long nk = in.integer(1, MAX_DIM, "num_key_heads");
    const long dk = in.integer(1, MAX_DIM, "key_head_dim");
    const long nv = in.integer(1, MAX_DIM, "num_value_heads");
    const long dv = in.integer(1, MAX_DIM, "value_head_dim");
    const long width = in.integer(2, MAX_DIM, "conv_kernel");
    const bool gates = in.integer(0, 1, "gates") == 1;
    const long n_rounds = in.integer(1, 1 << 20, "rounds");
    if (dk != dv) {
        // ggml_gated_delta_net's state is S_v x S_v (ggml.h line 2641: S_k == S_v).
        return "error ggml_gated_delta_net needs key_head_dim == value_head_dim, got " +
               std::to_string(dk) + " and " + std::to_string(dv);
    }
    if (nv % nk != 0) {
        return "error num_value_heads must be a multiple of num_key_heads";
    }
    const long key_dim = nk * dk;
    const long conv_dim = 2 * key_dim + nv * dv;
    const long kept = width - 1;
    std::vector<float> weight = in.floats(conv_dim * width, "conv_weight");
    std::vector<float> a_log, dt_bias;
    if (gates) {
        a_log = in.floats(nv, "a_log");
        dt_bias = in.floats(nv, "dt_bias");
    }
    std::vector<float> conv = in.floats(conv_dim * kept, "checkpoint.conv");
    std::vector<float> h = in.floats(nv * dk * dv, "checkpoint.h");
    std::vector<Round> rounds(n_rounds);
    for (Round & r : rounds) {
        r.tokens = in.integer(1, MAX_TOKENS, "tokens");
        r.accepted = in.integer(1, r.tokens, "accepted");
        for (long t = 0; t < r.tokens; ++t) {
            auto add = [&](std::vector<float> & to, size_t n, const char * what) {
                std::vector<float> got = in.floats(n, what);
                to.insert(to.end(), got.begin(), got.end());
            };
            add(r.qkv, conv_dim, "qkv");
            add(r.g, nv, "g");
            add(r.beta, nv, "beta");
            if (gates) {
                add(r.a, nv, "a");
                add(r.b, nv, "b");
            }
        }
    }

    std::ostringstream out;
    char hex[64];
    for (const Round & r : rounds) {
        const long T = r.tokens;
        const size_t bytes = 64u * 1024 * 1024 + static_cast<size_t>(T) * conv_dim * 64 +
                             static_cast<size_t>(T) * nv * dv * dv * 8;
        ggml_init_params params = {bytes, nullptr, false};
        ggml_context * ctx = ggml_init(params);
        if (ctx == nullptr) {
            return "error ggml_init failed";
        }

        // The conv's input: per channel, the checkpoint's columns then the window's.
        std::vector<float> columns(conv_dim * (kept + T));
        for (long c = 0; c < conv_dim; ++c) {
            for (long i = 0; i < kept; ++i) {
                columns[c * (kept + T) + i] = conv[c * kept + i];
            }
            for (long t = 0; t < T; ++t) {
                columns[c * (kept + T) + kept + t] = r.qkv[t * conv_dim + c];
            }
        }
        ggml_tensor * conv_in = filled(ctx, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, kept + T, conv_dim, 1), columns);
        ggml_tensor * conv_w = filled(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, width, conv_dim), weight);
        ggml_tensor * mixed = ggml_silu(ctx, ggml_ssm_conv(ctx, conv_in, conv_w));  // [conv_dim, T, 1]

        const size_t row = ggml_row_size(GGML_TYPE_F32, conv_dim);
        const size_t f = sizeof(float);
        ggml_tensor * q = ggml_view_4d(ctx, mixed, dk, nk, T, 1, dk * f, row, row * T, 0);
        ggml_tensor * k = ggml_view_4d(ctx, mixed, dk, nk, T, 1, dk * f, row, row * T, key_dim * f);
        ggml_tensor * v = ggml_view_4d(ctx, mixed, dv, nv, T, 1, dv * f, row, row * T, 2 * key_dim * f);
        q = to_value_heads(ctx, l2_norm(ctx, q), nk, nv, T);
        k = to_value_heads(ctx, l2_norm(ctx, k), nk, nv, T);
        v = ggml_cont(ctx, v);

        ggml_tensor * g = nullptr;
        ggml_tensor * beta = nullptr;
        if (gates) {
            ggml_tensor * a = filled(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, nv, T), r.a);
            ggml_tensor * b = filled(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, nv, T), r.b);
            ggml_tensor * dt = filled(ctx, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, nv), dt_bias);
            ggml_tensor * al = filled(ctx, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, nv), a_log);
            // llama.cpp's converter stores ssm_a = -exp(A_log); here ggml takes the exp.
            ggml_tensor * ssm_a = ggml_neg(ctx, ggml_exp(ctx, al));
            g = ggml_mul(ctx, ggml_softplus(ctx, ggml_add(ctx, a, dt)), ssm_a);
            beta = ggml_sigmoid(ctx, b);
        } else {
            g = filled(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, nv, T), r.g);
            beta = filled(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, nv, T), r.beta);
        }
        g = ggml_reshape_4d(ctx, g, 1, nv, T, 1);
        beta = ggml_reshape_4d(ctx, beta, 1, nv, T, 1);

        // ggml keeps S transposed: element (j, i) of head h is S[i][j] (ops.cpp line 11228).
        std::vector<float> s(nv * dv * dv);
        for (long head = 0; head < nv; ++head) {
            for (long i = 0; i < dk; ++i) {
                for (long j = 0; j < dv; ++j) {
                    s[(head * dv + j) * dv + i] = h[(head * dk + i) * dv + j];
                }
            }
        }
        ggml_tensor * state = filled(ctx, ggml_new_tensor_4d(ctx, GGML_TYPE_F32, dv, dv, nv, 1), s);
        ggml_tensor * result = ggml_gated_delta_net(ctx, q, k, v, g, beta, state, T);

        ggml_cgraph * graph = ggml_new_graph(ctx);
        ggml_build_forward_expand(graph, result);
        if (ggml_graph_compute_with_ctx(ctx, graph, 1) != GGML_STATUS_SUCCESS) {
            ggml_free(ctx);
            return "error ggml_graph_compute failed";
        }

        const long accepted = control ? off_by_one(r.accepted, T) : r.accepted;
        // The snapshot after `accepted` tokens is T - accepted tokens back.
        const long slot = T - accepted;
        const float * snapshots = static_cast<const float *>(result->data) + dv * nv * T;
        const float * snap = snapshots + slot * (dv * dv * nv);
        for (long head = 0; head < nv; ++head) {
            for (long i = 0; i < dk; ++i) {
                for (long j = 0; j < dv; ++j) {
                    h[(head * dk + i) * dv + j] = snap[(head * dv + j) * dv + i];
                }
            }
        }
        for (long c = 0; c < conv_dim; ++c) {
            for (long i = 0; i < kept; ++i) {
                conv[c * kept + i] = columns[c * (kept + T) + accepted + i];
            }
        }
        ggml_free(ctx);

        for (float value : conv) {
            std::snprintf(hex, sizeof hex, "%a ", static_cast<double>(value));
            out << hex;
        }
        for (float value : h) {
            std::snprintf(hex, sizeof hex, "%a ", static_cast<double>(value));
            out << hex;
        }
    }
    return out.str();
}

}  // namespace

int main(int argc, char ** argv) {
    const bool control = argc > 1 && std::strcmp(argv[1], "off-by-one") == 0;
    if (argc > 1 && !control) {
        std::fprintf(stderr, "usage: ggml-replay [off-by-one]\n");
        return 2;
    }
    std::string line;
    while (std::getline(std::cin, line)) {
        std::string reply;
        try {
            reply = answer(line, control);
        } catch (const std::exception & error) {
            reply = std::string("error ") + error.what();
        }
        std::cout << reply << '\n' << std::flush;
    }
    return 0;
}
