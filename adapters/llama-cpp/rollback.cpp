// SPDX-License-Identifier: MIT OR Apache-2.0
//
// llama-rollback: llama.cpp's own recurrent rollback, driven through llama.h
// over a JSON-lines protocol (docs/engines-llama-cpp.md, the llama.cpp row), so that a
// property test can draw speculative rounds the way runtimes make them.
//
//   llama-rollback make-model OUT.gguf SEED [ARCH]
//       writes a small random Qwen3.5 (the default) or Qwen3-Next model
//       (llama_model_init_from_user, then llama_model_save_to_file;
//       include/llama.h in the pinned release), or, for ARCH one of the
//       other architectures llm_arch_supports_rs_rollback lists (kimi-k3,
//       qwen35moe, qwen4exp, deepseek4, glm5-next, nemotron_h,
//       nemotron_h_moe, lfm2, lfm2moe, bailingmoe3), the model llama.cpp's
//       own tests/test-llama-archs.cpp makes of it (make_generated_model).
//   llama-rollback serve MODEL.gguf N_SEQ N_RS_SEQ WAY [FAULT]
//       WAY is `snapshot` (the context's n_rs_seq per-token snapshots, rolled
//       back by llama_memory_seq_rm; src/llama-memory-recurrent.cpp) or
//       `checkpoint` (the whole recurrent state saved before every verify
//       window and restored after a partial acceptance, as the server's
//       spec_ckpt does; tools/server/server-context.cpp).
//       FAULT is a deliberately wrong runtime for the self-test: `ahead`
//       rolls back one token too few and carries on one position later;
//       `other-seq` restores another sequence's checkpoint taken at the same
//       position (with none such, its own): at any other position llama.cpp
//       itself refuses the trim or the next decode.
//
// Requests, one JSON object a line; every reply is one JSON object a line:
//   {"op":"describe"}
//   {"op":"decode","seqs":[0,1],"tokens":[[5,6,7],[9]]}
//       one llama_decode of every sequence's window, a logit row per token
//   {"op":"rollback","seq":0,"n":2}          -> {"ok":true|false}
//   {"op":"finish","seq":0}                  the sequence ends; its slot is free
//   {"op":"reference","seq":0,"tokens":[..],"restart":1}  the tokens, one
//       llama_decode each, appended to (or, with restart, replacing) the
//       sequence's reference: a second context whose sequences never roll back
// A bad request gets {"error":"..."} and the adapter serves on.

#include "ggml-backend.h"
#include "gguf.h"
#include "llama.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef LLAMA_CPP_COMMIT
#define LLAMA_CPP_COMMIT "unknown"
#endif

namespace {

// --- a small strict JSON reader: objects, arrays, strings, integers -------

struct Value {
    enum class Kind { Int, Str, Arr, Obj } kind = Kind::Int;
    long long i = 0;
    std::string s;
    std::vector<Value> arr;
    std::map<std::string, Value> obj;
};

constexpr size_t kMaxLine = 1 << 20;
constexpr int kMaxDepth = 8;

struct Reader {
    const std::string & text;
    size_t at = 0;

    void skip() {
        while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) {
            ++at;
        }
    }
    [[noreturn]] void fail(const char * what) const {
        throw std::runtime_error(std::string("bad JSON: ") + what);
    }
    char peek() {
        skip();
        if (at >= text.size()) {
            fail("unexpected end of line");
        }
        return text[at];
    }
    std::string string() {
        if (peek() != '"') {
            fail("expected a string");
        }
        ++at;
        std::string out;
        while (at < text.size() && text[at] != '"') {
            if (text[at] == '\\' || static_cast<unsigned char>(text[at]) < 0x20) {
                fail("escapes are not part of this protocol");
            }
            out += text[at++];
        }
        if (at >= text.size()) {
            fail("unterminated string");
        }
        ++at;
        return out;
    }
    Value value(int depth) {
        if (depth > kMaxDepth) {
            fail("nested too deeply");
        }
        Value v;
        const char c = peek();
        if (c == '"') {
            v.kind = Value::Kind::Str;
            v.s = string();
        } else if (c == '[') {
            v.kind = Value::Kind::Arr;
            ++at;
            if (peek() == ']') {
                ++at;
                return v;
            }
            for (;;) {
                v.arr.push_back(value(depth + 1));
                const char d = peek();
                ++at;
                if (d == ']') {
                    break;
                }
                if (d != ',') {
                    fail("expected , or ]");
                }
            }
        } else if (c == '{') {
            v.kind = Value::Kind::Obj;
            ++at;
            if (peek() == '}') {
                ++at;
                return v;
            }
            for (;;) {
                std::string key = string();
                if (peek() != ':') {
                    fail("expected :");
                }
                ++at;
                v.obj[key] = value(depth + 1);
                const char d = peek();
                ++at;
                if (d == '}') {
                    break;
                }
                if (d != ',') {
                    fail("expected , or }");
                }
            }
        } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
            size_t end = at + 1;
            while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) {
                ++end;
            }
            if (end - at > 12) {
                fail("integer out of range");
            }
            v.i = std::stoll(text.substr(at, end - at));
            at = end;
        } else {
            fail("expected a value");
        }
        return v;
    }
};

const Value & field(const Value & req, const char * name, Value::Kind kind) {
    const auto it = req.obj.find(name);
    if (it == req.obj.end() || it->second.kind != kind) {
        throw std::runtime_error(std::string("request needs field '") + name + "' of the right type");
    }
    return it->second;
}

// --- the random model ------------------------------------------------------

// FNV-1a, so a tensor's values depend on its name and the seed alone.
uint64_t name_hash(const char * name) {
    uint64_t h = 1469598103934665603ULL;
    for (const char * p = name; *p != '\0'; ++p) {
        h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ULL;
    }
    return h;
}

struct FillParams {
    uint64_t seed;
    float stdev;
};

void fill_tensor(ggml_tensor * tensor, void * userdata) {
    const auto & params = *static_cast<const FillParams *>(userdata);
    std::mt19937_64 gen(params.seed ^ name_hash(tensor->name));
    std::normal_distribution<float> normal(0.0f, params.stdev);
    // The GDN decay A must be negative, or the recurrent state grows without bound.
    const bool decay = std::strstr(tensor->name, "ssm_a") != nullptr;
    // RMS norm weights near 1, as in trained models: small ones would shrink
    // every layer's output, and the logits would barely move with the state,
    // so that a wrong rollback could not be told from a right one.
    const bool norm = std::strstr(tensor->name, "norm") != nullptr;
    if (tensor->type != GGML_TYPE_F32 && tensor->type != GGML_TYPE_F16) {
        throw std::runtime_error("make-model writes F32 and F16 tensors only");
    }
    std::vector<float> data(ggml_nelements(tensor));
    for (float & x : data) {
        const float r = normal(gen);
        x = decay ? -std::fabs(r) : norm ? 1.0f + r : r;
    }
    if (tensor->type == GGML_TYPE_F16) {
        // As the generator does (tests/test-llama-archs.cpp 76-83): the same values, rounded.
        std::vector<ggml_fp16_t> half(data.size());
        for (size_t i = 0; i < data.size(); ++i) {
            half[i] = ggml_fp32_to_fp16(data[i]);
        }
        ggml_backend_tensor_set(tensor, half.data(), 0, ggml_nbytes(tensor));
        return;
    }
    ggml_backend_tensor_set(tensor, data.data(), 0, ggml_nbytes(tensor));
}

// The rest of the architectures llm_arch_supports_rs_rollback lists
// (src/llama-arch.cpp 1123-1140 at 0c1e57098), as llama.cpp's own generator
// writes them: the keys and shapes of get_gguf_ctx (tests/test-llama-archs.cpp
// 116-467 at 0c1e57098), the branches of these architectures alone, dense or a
// mixture of experts as moe_mandatory says (583-639). Two things differ: the
// context length is 1024, as for Qwen3.5 above, so that the adapter's three
// sequences of 256 fit; and fill_tensor gives norm weights 1 + N(0, 0.1) where
// the generator gives N(0, 0.1) (its reason is there). The generator's dummy
// conv/posnet/convnext tensors (455-466) belong to none of these architectures.
const char * const kGenerated[] = {
    "kimi-k3", "qwen35moe", "qwen4exp", "deepseek4", "glm5-next", "nemotron_h",
    "nemotron_h_moe", "lfm2", "lfm2moe", "bailingmoe3",
};

struct Meta {
    gguf_context * ctx;
    std::string arch;
    std::string key(const char * name) const { return arch + "." + name; }
    void u32(const char * name, uint32_t v) const { gguf_set_val_u32(ctx, key(name).c_str(), v); }
    void f32(const char * name, float v) const { gguf_set_val_f32(ctx, key(name).c_str(), v); }
    void flag(const char * name, bool v) const { gguf_set_val_bool(ctx, key(name).c_str(), v); }
    void u32s(const char * name, const std::vector<uint32_t> & v) const {
        gguf_set_arr_data(ctx, key(name).c_str(), GGUF_TYPE_UINT32, v.data(), v.size());
    }
    void u64s(const char * name, const std::vector<uint64_t> & v) const {
        gguf_set_arr_data(ctx, key(name).c_str(), GGUF_TYPE_UINT64, v.data(), v.size());
    }
    void f32s(const char * name, const std::vector<float> & v) const {
        gguf_set_arr_data(ctx, key(name).c_str(), GGUF_TYPE_FLOAT32, v.data(), v.size());
    }
};

int make_generated_model(const char * out, uint64_t seed, const std::string & arch) {
    bool known = false;
    for (const char * name : kGenerated) {
        known = known || arch == name;
    }
    if (!known) {
        std::fprintf(stderr, "llama-rollback: make-model makes qwen35, qwen3next");
        for (const char * name : kGenerated) {
            std::fprintf(stderr, ", %s", name);
        }
        std::fprintf(stderr, ", not %s\n", arch.c_str());
        return 2;
    }
    const bool deepseek4 = arch == "deepseek4";
    const bool glm5 = arch == "glm5-next";
    const bool nemotron = arch == "nemotron_h" || arch == "nemotron_h_moe";
    // MLA with one head (test-llama-archs.cpp 148-161, 231-246).
    const bool mla = arch == "bailingmoe3" || arch == "kimi-k3" || glm5;
    // Per-layer head counts, layer 1 the recurrent one (205-225).
    const bool per_layer = nemotron || arch == "lfm2" || arch == "lfm2moe" || mla;
    // moe_mandatory (583-639): every one but nemotron_h, nemotron_h_moe and lfm2.
    const bool moe = !nemotron && arch != "lfm2";
    uint32_t n_vocab = 128, n_embd = 256, n_head = 2, n_ff = 384, n_layer = 2;  // 121-125
    if (deepseek4) {
        n_embd = 512, n_head = 8, n_ff = 1024, n_layer = 4;  // 138-143
    } else if (mla) {
        n_embd = 128, n_head = 1, n_ff = 192;  // 148-160
    } else if (nemotron) {
        n_layer = 3;  // 161-162
    }
    const uint32_t n_embd_head = n_embd / n_head;
    gguf_context * ctx = gguf_init_empty();
    const Meta m{ctx, arch};
    gguf_set_val_str(ctx, "general.architecture", arch.c_str());
    m.u32("vocab_size", n_vocab);
    m.u32("context_length", 1024);
    m.u32("embedding_length", n_embd);
    m.u32("features_length", n_embd);
    m.u32("block_count", n_layer);
    m.u32("leading_dense_block_count", 1);
    if (nemotron) {  // 187-197: no feed-forward in the first two layers
        std::vector<uint32_t> ff;
        for (uint32_t il = 0; il < n_layer; ++il) {
            ff.push_back(il <= 1 ? 0 : n_ff);
        }
        m.u32s("feed_forward_length", ff);
    } else {
        m.u32("feed_forward_length", n_ff);
    }
    m.flag("use_parallel_residual", false);
    m.f32("logit_scale", 1.0f);
    m.u32("time_mix_extra_dim", 64);
    m.u32("time_decay_extra_dim", 128);
    m.u32("full_attention_interval", 2);
    if (per_layer) {
        std::vector<uint32_t> heads;
        for (uint32_t il = 0; il < n_layer; ++il) {
            heads.push_back(il == 1 ? 0 : n_head);
        }
        if (glm5) {
            m.u32("attention.head_count", n_head);
        } else {
            m.u32s("attention.head_count", heads);
        }
        m.u32s("attention.head_count_kv", heads);
    } else {
        m.u32("attention.head_count", n_head);
        m.u32("attention.head_count_kv", deepseek4 ? 1 : n_head);
    }
    m.f32("attention.max_alibi_bias", 8.0f);
    if (deepseek4) {  // 227-230
        m.u32("attention.key_length", n_embd_head);
        m.u32("attention.value_length", n_embd_head);
        m.u32("rope.dimension_count", n_embd_head / 2);
    } else if (mla) {  // 231-246
        m.u32("attention.key_length", glm5 ? 512 : 576);
        m.u32("attention.value_length", 512);
        m.u32("rope.dimension_count", glm5 ? 0 : 64);
        m.u32("attention.key_length_mla", 192);
        m.u32("attention.value_length_mla", 128);
    }
    m.f32("attention.clamp_kqv", 1.0f);
    m.f32("attention.layer_norm_epsilon", 1e-5f);
    m.f32("attention.layer_norm_rms_epsilon", 1e-5f);
    m.f32("attention.group_norm_epsilon", 1e-5f);
    m.u32("attention.group_norm_groups", 8);
    m.u32("attention.q_lora_rank", deepseek4 ? 64 : 512);
    m.u32("attention.kv_lora_rank", 512);
    m.u32("attention.relative_buckets_count", 8);
    m.u32("attention.sliding_window", 256 / 8);
    m.u32("attention.sliding_window_pattern", 2);  // 295
    if (arch == "qwen4exp" || glm5) {  // 300-331: hyper-connections and the PLE heads
        m.u32("hyper_connection.count", 4);
        m.u32("hyper_connection.sinkhorn_iterations", 2);
        m.f32("hyper_connection.epsilon", 1.0e-6f);
        m.u32("hyper_connection.low_rank", 8);
        m.u32s("attention.compress_ratios", std::vector<uint32_t>(n_layer, 4));
        const uint32_t ngram = 3, per_ngram = 2, ple_heads = (ngram - 1) * per_ngram;
        std::vector<uint64_t> offsets(ple_heads), vocab_sizes(ple_heads, n_vocab);
        for (uint32_t h = 0; h < ple_heads; ++h) {
            offsets[h] = uint64_t(h) * n_vocab;
        }
        m.u32s("ple.layers", {0});
        m.u32("ple.ngram_size", ngram);
        m.u32("ple.heads_per_ngram", per_ngram);
        m.u32("ple.conv_kernel", 4);
        m.u32("ple.eos_token_id", 0);
        m.u32("embedding_length_per_layer_input", n_embd / ple_heads);
        m.u64s("ple.layer_multipliers", {1, 3, 5});
        m.u64s("ple.head_offsets", offsets);
        m.u64s("ple.head_vocab_sizes", vocab_sizes);
    }
    m.u32("attention.indexer.head_count", 64);  // 333-354
    m.u32("attention.indexer.key_length", arch == "qwen4exp" ? n_embd_head : 128);
    m.u32("attention.indexer.top_k", 131072);
    m.u32("attention.indexer.block_size", 4);
    m.u32("attention.indexer.kpool", 4);
    m.flag("attention.indexer.kpool_select_tail", true);
    m.u32("attention.indexer.local_blocks", 1);
    if (arch == "bailingmoe3") {
        m.u32s("rope.dimension_sections", {8, 12, 12, 0});
    } else {
        const uint32_t q = n_embd_head / 4;
        m.u32s("rope.dimension_sections", {q, q, q, q});
    }
    if (deepseek4) {  // 372-384
        m.u32("attention.output_group_count", 8);
        m.u32("attention.output_lora_rank", 32);
        m.u32s("attention.compress_ratios", {0, 0, 4, 128});
        m.f32("attention.compress_rope_freq_base", 160000.0f);
        m.u32("hyper_connection.count", 4);
        m.u32("hyper_connection.sinkhorn_iterations", 2);
        m.f32("hyper_connection.epsilon", 1.0e-6f);
        m.u32("hash_layer_count", 0);
        m.f32("swiglu_clamp_exp", 10.0f);
        m.f32("expert_weights_scale", 1.0f);
        m.flag("expert_weights_norm", true);
    }
    std::vector<std::string> names(n_vocab);  // 397-408: the dummy tokenizer
    std::vector<const char *> name_ptrs(n_vocab);
    std::vector<float> scores(n_vocab, 0.0f);
    for (uint32_t t = 0; t < n_vocab; ++t) {
        names[t] = "tok_" + std::to_string(t);
        name_ptrs[t] = names[t].c_str();
    }
    gguf_set_val_str(ctx, "tokenizer.ggml.model", "test");
    gguf_set_arr_str(ctx, "tokenizer.ggml.tokens", name_ptrs.data(), n_vocab);
    gguf_set_arr_data(ctx, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), n_vocab);
    if (moe) {  // 413-424
        m.u32("expert_feed_forward_length", n_ff);
        m.u32("expert_shared_feed_forward_length", n_ff / 2);
        m.u32("expert_latent_length", n_ff);
        m.u32("interleave_moe_layer_step", 2);
        m.u32("expert_count", 2);
        m.u32("expert_used_count", 2);
        m.u32("expert_shared_count", 1);
        m.u32("expert_gating_func", deepseek4 ? 4 : 2);
        m.f32("expert_group_scale", 1.0f);
        m.u32("experts_per_group", 1);
    }
    m.u32("posnet.embedding_length", n_embd);  // 426-433
    m.u32("posnet.block_count", n_layer);
    m.u32("convnext.embedding_length", n_embd);
    m.u32("convnext.block_count", n_layer);
    gguf_set_val_f32(ctx, "xielu.alpha_n", 1.0f);
    gguf_set_val_f32(ctx, "xielu.alpha_p", 1.0f);
    gguf_set_val_f32(ctx, "xielu.beta", 1.0f);
    gguf_set_val_f32(ctx, "xielu.eps", 1.0e-7f);
    const bool qwen = arch == "qwen35moe" || arch == "qwen4exp";
    m.u32("ssm.inner_size", qwen ? 256 : 2 * n_embd);  // 434-453
    m.u32("ssm.conv_kernel", 4);
    m.u32("ssm.state_size", 128);
    m.u32("ssm.time_step_rank", n_head);
    m.u32("ssm.group_count", 2);
    m.u32("kda.head_dim", 128);
    m.flag("kda.safe_gate", true);
    m.f32("kda.gate_lower_bound", -5.0f);
    if (arch == "bailingmoe3") {
        m.f32s("swiglu_clamp_exp", {0.0f, 4.0f});
        m.f32s("swiglu_clamp_shexp", {0.0f, 5.0f});
    }
    m.u32("wkv.head_size", n_embd / n_head);
    m.u32("shortconv.l_cache", 3);
    m.f32("residual_scale", 3.5565588200778455f);
    m.u32("attn_res.block_size", 12);
    m.f32("activation.situ_beta", 4.0f);
    m.f32("activation.situ_linear_beta", 25.0f);

    FillParams params{seed, 0.1f};
    llama_model * model = llama_model_init_from_user(ctx, fill_tensor, &params, llama_model_default_params());
    gguf_free(ctx);
    if (model == nullptr) {
        std::fprintf(stderr, "llama-rollback: llama.cpp could not make the %s model\n", arch.c_str());
        return 1;
    }
    llama_model_save_to_file(model, out);
    llama_model_free(model);
    return 0;
}

int make_model(const char * out, uint64_t seed, const std::string & arch) {
    // One GDN layer then one attention layer (full_attention_interval 2), the
    // shapes llama.cpp's own tests/test-llama-archs.cpp gives Qwen3.5 and
    // Qwen3-Next; Qwen3-Next is a mixture of experts there (moe_mandatory):
    // two experts, both used, and a shared one.
    constexpr uint32_t n_vocab = 128;
    constexpr uint32_t n_embd = 256;
    constexpr uint32_t n_head = 2;
    constexpr uint32_t n_ff = 384;
    if (arch != "qwen35" && arch != "qwen3next") {
        return make_generated_model(out, seed, arch);
    }
    const auto key = [&](const char * name) { return arch + "." + name; };
    gguf_context * meta = gguf_init_empty();
    gguf_set_val_str(meta, "general.architecture", arch.c_str());
    gguf_set_val_u32(meta, key("vocab_size").c_str(), n_vocab);
    gguf_set_val_u32(meta, key("context_length").c_str(), 1024);
    gguf_set_val_u32(meta, key("embedding_length").c_str(), n_embd);
    gguf_set_val_u32(meta, key("block_count").c_str(), 2);
    gguf_set_val_u32(meta, key("feed_forward_length").c_str(), n_ff);
    gguf_set_val_u32(meta, key("attention.head_count").c_str(), n_head);
    gguf_set_val_u32(meta, key("attention.head_count_kv").c_str(), n_head);
    gguf_set_val_f32(meta, key("attention.layer_norm_rms_epsilon").c_str(), 1e-5f);
    if (arch == "qwen35") {
        const uint32_t quarter = n_embd / n_head / 4;
        const uint32_t sections[4] = {quarter, quarter, quarter, quarter};
        gguf_set_arr_data(meta, key("rope.dimension_sections").c_str(), GGUF_TYPE_UINT32, sections, 4);
    } else {
        gguf_set_val_u32(meta, key("expert_count").c_str(), 2);
        gguf_set_val_u32(meta, key("expert_used_count").c_str(), 2);
        gguf_set_val_u32(meta, key("expert_feed_forward_length").c_str(), n_ff);
        gguf_set_val_u32(meta, key("expert_shared_feed_forward_length").c_str(), n_ff / 2);
    }
    gguf_set_val_u32(meta, key("ssm.conv_kernel").c_str(), 4);
    gguf_set_val_u32(meta, key("ssm.inner_size").c_str(), 256);
    gguf_set_val_u32(meta, key("ssm.state_size").c_str(), 128);
    gguf_set_val_u32(meta, key("ssm.time_step_rank").c_str(), n_head);
    gguf_set_val_u32(meta, key("ssm.group_count").c_str(), 2);
    gguf_set_val_u32(meta, key("full_attention_interval").c_str(), 2);
    gguf_set_val_str(meta, "tokenizer.ggml.model", "test");
    std::vector<std::string> names(n_vocab);
    std::vector<const char *> name_ptrs(n_vocab);
    std::vector<float> scores(n_vocab, 0.0f);
    for (uint32_t t = 0; t < n_vocab; ++t) {
        names[t] = "tok_" + std::to_string(t);
        name_ptrs[t] = names[t].c_str();
    }
    gguf_set_arr_str(meta, "tokenizer.ggml.tokens", name_ptrs.data(), n_vocab);
    gguf_set_arr_data(meta, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), n_vocab);

    FillParams params{seed, 0.1f};
    llama_model_params mparams = llama_model_default_params();
    llama_model * model = llama_model_init_from_user(meta, fill_tensor, &params, mparams);
    gguf_free(meta);
    if (model == nullptr) {
        std::fprintf(stderr, "llama-rollback: llama.cpp could not make the model\n");
        return 1;
    }
    llama_model_save_to_file(model, out);
    llama_model_free(model);
    return 0;
}

// --- the runtime -----------------------------------------------------------

enum class Way { Snapshot, Checkpoint };
enum class Fault { None, Ahead, OtherSeq };

struct Checkpoint {
    bool valid = false;
    llama_pos pos = 0;                // the first position of the window it precedes
    std::vector<llama_token> window;  // the window decoded after it
    std::vector<uint8_t> state;
};

struct Runtime {
    llama_model * model = nullptr;
    llama_context * ctx = nullptr;   // the runtime under test
    llama_context * ref = nullptr;   // decodes accepted tokens one at a time, never rolls back
    int n_seq = 0;
    int n_vocab = 0;
    Way way = Way::Snapshot;
    Fault fault = Fault::None;
    std::vector<llama_pos> pos, ref_pos;
    std::vector<std::vector<llama_token>> last_window;
    std::vector<Checkpoint> ckpt;

    int seq_of(const Value & req) const {
        const long long s = field(req, "seq", Value::Kind::Int).i;
        if (s < 0 || s >= n_seq) {
            throw std::runtime_error("seq out of range");
        }
        return static_cast<int>(s);
    }

    std::vector<llama_token> tokens_of(const Value & arr) const {
        std::vector<llama_token> out;
        for (const Value & t : arr.arr) {
            if (t.kind != Value::Kind::Int || t.i < 0 || t.i >= n_vocab) {
                throw std::runtime_error("a token is not an integer id of the vocabulary");
            }
            out.push_back(static_cast<llama_token>(t.i));
        }
        return out;
    }

    // One llama_decode of several sequences' windows; returns each token's logits.
    std::vector<std::vector<std::vector<float>>> decode(
            llama_context * c, const std::vector<int> & seqs,
            const std::vector<std::vector<llama_token>> & windows, std::vector<llama_pos> & at,
            bool want_logits) {
        int n = 0;
        for (const auto & w : windows) {
            n += static_cast<int>(w.size());
        }
        std::vector<std::vector<std::vector<float>>> out(seqs.size());
        if (n == 0) {
            return out;
        }
        llama_batch batch = llama_batch_init(n, 0, 1);
        batch.n_tokens = 0;
        for (size_t i = 0; i < seqs.size(); ++i) {
            for (size_t j = 0; j < windows[i].size(); ++j) {
                const int k = batch.n_tokens++;
                batch.token[k] = windows[i][j];
                batch.pos[k] = at[seqs[i]] + static_cast<llama_pos>(j);
                batch.n_seq_id[k] = 1;
                batch.seq_id[k][0] = seqs[i];
                batch.logits[k] = want_logits ? 1 : 0;
            }
        }
        if (!want_logits) {
            batch.logits[n - 1] = 1;
        }
        const int32_t rc = llama_decode(c, batch);
        llama_batch_free(batch);
        if (rc != 0) {
            throw std::runtime_error("llama_decode returned " + std::to_string(rc));
        }
        int k = 0;
        for (size_t i = 0; i < seqs.size(); ++i) {
            for (size_t j = 0; j < windows[i].size(); ++j, ++k) {
                if (want_logits) {
                    const float * row = llama_get_logits_ith(c, k);
                    out[i].emplace_back(row, row + n_vocab);
                }
            }
            at[seqs[i]] += static_cast<llama_pos>(windows[i].size());
        }
        return out;
    }

    std::string op_decode(const Value & req) {
        const Value & seqs_v = field(req, "seqs", Value::Kind::Arr);
        const Value & toks_v = field(req, "tokens", Value::Kind::Arr);
        if (seqs_v.arr.size() != toks_v.arr.size() || seqs_v.arr.empty()) {
            throw std::runtime_error("seqs and tokens must be non-empty and of one length");
        }
        std::vector<int> seqs;
        std::vector<std::vector<llama_token>> windows;
        std::vector<bool> seen(n_seq, false);
        for (size_t i = 0; i < seqs_v.arr.size(); ++i) {
            const Value & s = seqs_v.arr[i];
            if (s.kind != Value::Kind::Int || s.i < 0 || s.i >= n_seq || seen[s.i]) {
                throw std::runtime_error("seqs must be distinct ids below n_seq");
            }
            seen[s.i] = true;
            if (toks_v.arr[i].kind != Value::Kind::Arr || toks_v.arr[i].arr.empty()) {
                throw std::runtime_error("each window must be a non-empty array of tokens");
            }
            seqs.push_back(static_cast<int>(s.i));
            windows.push_back(tokens_of(toks_v.arr[i]));
        }
        if (way == Way::Checkpoint) {
            // The server saves the recurrent state before every verify window
            // (server-context.cpp, ckpt.update_tgt with PARTIAL_ONLY).
            for (size_t i = 0; i < seqs.size(); ++i) {
                Checkpoint & c = ckpt[seqs[i]];
                const size_t size = llama_state_seq_get_size_ext(ctx, seqs[i], LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
                c.state.resize(size);
                if (llama_state_seq_get_data_ext(ctx, c.state.data(), size, seqs[i],
                                                 LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) != size) {
                    throw std::runtime_error("llama_state_seq_get_data_ext failed");
                }
                c.valid = true;
                c.pos = pos[seqs[i]];
                c.window = windows[i];
            }
        }
        for (size_t i = 0; i < seqs.size(); ++i) {
            last_window[seqs[i]] = windows[i];
        }
        return logits_reply(decode(ctx, seqs, windows, pos, true));
    }

    std::string op_rollback(const Value & req) {
        const int s = seq_of(req);
        const long long n = field(req, "n", Value::Kind::Int).i;
        if (n < 0 || n > pos[s]) {
            throw std::runtime_error("n must be between 0 and the sequence's length");
        }
        if (n == 0) {
            return "{\"ok\":true}";
        }
        const llama_pos drop = static_cast<llama_pos>(fault == Fault::Ahead ? n - 1 : n);
        if (way == Way::Snapshot) {
            llama_memory_t mem = llama_get_memory(ctx);
            if (!llama_memory_seq_rm(mem, s, pos[s] - static_cast<llama_pos>(n) + (n - drop), -1)) {
                return "{\"ok\":false}";
            }
            pos[s] -= drop;
            return "{\"ok\":true}";
        }
        Checkpoint & c = ckpt[s];
        if (!c.valid || static_cast<size_t>(n) > c.window.size() || pos[s] != c.pos + static_cast<llama_pos>(c.window.size())) {
            return "{\"ok\":false}";
        }
        const Checkpoint * from = &c;
        if (fault == Fault::OtherSeq) {
            // A runtime that mixes up its slots: it restores another sequence's
            // checkpoint, one taken at the same position with another state
            // (sequences decoded in step). That is the mix-up llama.cpp cannot
            // notice: the restore gives the sequence's recurrent cell the saved
            // position (src/llama-memory-recurrent.cpp 1000-1027), so a later
            // checkpoint makes the trim below a partial rollback, refused with
            // n_rs_seq 0 (193-203), and an earlier one leaves the memory's last
            // position (the hybrid's is the smaller of its two,
            // src/llama-memory-hybrid.cpp 177-179) behind the next decode's,
            // which llama_decode refuses (src/llama-batch.cpp 327-341).
            for (int o = 0; o < n_seq; ++o) {
                if (o != s && ckpt[o].valid && ckpt[o].pos == c.pos && ckpt[o].state != c.state) {
                    from = &ckpt[o];
                    break;
                }
            }
        }
        if (llama_state_seq_set_data_ext(ctx, from->state.data(), from->state.size(), s,
                                         LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) == 0) {
            throw std::runtime_error("llama_state_seq_set_data_ext failed");
        }
        // The attention layers' cache drops the window's positions; the
        // recurrent state is the checkpoint's. Then the kept tokens are
        // decoded again, as the server's spec_is_replay round does.
        if (!llama_memory_seq_rm(llama_get_memory(ctx), s, c.pos, -1)) {
            throw std::runtime_error("llama_memory_seq_rm refused to trim after a restore");
        }
        pos[s] = c.pos;
        const size_t keep = c.window.size() - static_cast<size_t>(drop);
        std::vector<llama_token> kept(c.window.begin(), c.window.begin() + static_cast<long>(keep));
        c.valid = false;
        decode(ctx, {s}, {kept}, pos, false);
        return "{\"ok\":true}";
    }

    std::string op_finish(const Value & req) {
        const int s = seq_of(req);
        llama_memory_seq_rm(llama_get_memory(ctx), s, -1, -1);
        llama_memory_seq_rm(llama_get_memory(ref), s, -1, -1);
        pos[s] = 0;
        ref_pos[s] = 0;
        ckpt[s] = Checkpoint{};
        last_window[s].clear();
        return "{\"ok\":true}";
    }

    std::string op_reference(const Value & req) {
        const int s = seq_of(req);
        const std::vector<llama_token> toks = tokens_of(field(req, "tokens", Value::Kind::Arr));
        const auto restart = req.obj.find("restart");
        if (restart != req.obj.end() && restart->second.kind == Value::Kind::Int && restart->second.i == 1) {
            llama_memory_seq_rm(llama_get_memory(ref), s, -1, -1);
            ref_pos[s] = 0;
        }
        std::vector<std::vector<float>> rows;
        for (llama_token t : toks) {
            auto one = decode(ref, {s}, {{t}}, ref_pos, true);
            rows.push_back(one[0][0]);
        }
        return logits_reply({rows});
    }

    std::string op_describe() const {
        const uint32_t n_rs = llama_n_rs_seq(ctx);
        // The model's own architecture: llama.cpp gives Qwen3-Next no snapshots.
        char arch[64] = "";
        llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch);
        return std::string("{\"engine\":\"llama.cpp\",\"commit\":\"") + LLAMA_CPP_COMMIT +
               "\",\"arch\":\"" + arch + "\",\"n_vocab\":" + std::to_string(n_vocab) +
               ",\"n_seq\":" + std::to_string(n_seq) + ",\"n_rs_seq\":" + std::to_string(n_rs) +
               ",\"way\":\"" + (way == Way::Snapshot ? "snapshot" : "checkpoint") + "\"}";
    }

    static std::string logits_reply(const std::vector<std::vector<std::vector<float>>> & all) {
        std::string out = "{\"logits\":[";
        char buf[32];
        for (size_t i = 0; i < all.size(); ++i) {
            out += i ? ",[" : "[";
            for (size_t j = 0; j < all[i].size(); ++j) {
                out += j ? ",[" : "[";
                for (size_t v = 0; v < all[i][j].size(); ++v) {
                    std::snprintf(buf, sizeof buf, v ? ",%.9g" : "%.9g", static_cast<double>(all[i][j][v]));
                    out += buf;
                }
                out += "]";
            }
            out += "]";
        }
        return out + "]}";
    }

    std::string handle(const std::string & line) {
        Reader reader{line};
        const Value req = reader.value(0);
        reader.skip();
        if (req.kind != Value::Kind::Obj || reader.at != line.size()) {
            throw std::runtime_error("a request is one JSON object");
        }
        const std::string op = field(req, "op", Value::Kind::Str).s;
        if (op == "describe") {
            return op_describe();
        }
        if (op == "decode") {
            return op_decode(req);
        }
        if (op == "rollback") {
            return op_rollback(req);
        }
        if (op == "finish") {
            return op_finish(req);
        }
        if (op == "reference") {
            return op_reference(req);
        }
        throw std::runtime_error("unknown op " + op);
    }
};

void quiet_log(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

llama_context * new_context(llama_model * model, int n_seq, uint32_t n_rs_seq) {
    llama_context_params p = llama_context_default_params();
    p.n_ctx = 256 * static_cast<uint32_t>(n_seq);
    p.n_batch = 256;
    p.n_ubatch = 256;
    p.n_seq_max = static_cast<uint32_t>(n_seq);
    p.n_rs_seq = n_rs_seq;
    // One thread: the sums run in one order, and the machine is shared.
    p.n_threads = 1;
    p.n_threads_batch = 1;
    return llama_init_from_model(model, p);
}

int serve(int argc, char ** argv) {
    if (argc < 6 || argc > 7) {
        std::fprintf(stderr, "usage: llama-rollback serve MODEL N_SEQ N_RS_SEQ snapshot|checkpoint [ahead|other-seq]\n");
        return 2;
    }
    Runtime rt;
    rt.n_seq = std::atoi(argv[3]);
    const int n_rs_seq = std::atoi(argv[4]);
    const std::string way = argv[5];
    const std::string fault = argc == 7 ? argv[6] : "";
    if (rt.n_seq < 1 || rt.n_seq > 16 || n_rs_seq < 0 || n_rs_seq > 16) {
        std::fprintf(stderr, "llama-rollback: N_SEQ must be 1..16 and N_RS_SEQ 0..16\n");
        return 2;
    }
    if (way != "snapshot" && way != "checkpoint") {
        std::fprintf(stderr, "llama-rollback: WAY must be snapshot or checkpoint, not %s\n", way.c_str());
        return 2;
    }
    rt.way = way == "snapshot" ? Way::Snapshot : Way::Checkpoint;
    if (fault == "ahead") {
        rt.fault = Fault::Ahead;
    } else if (fault == "other-seq" && rt.way == Way::Checkpoint) {
        rt.fault = Fault::OtherSeq;
    } else if (!fault.empty()) {
        std::fprintf(stderr, "llama-rollback: unknown fault %s for way %s\n", fault.c_str(), way.c_str());
        return 2;
    }
    llama_model_params mparams = llama_model_default_params();
    rt.model = llama_model_load_from_file(argv[2], mparams);
    if (rt.model == nullptr) {
        std::fprintf(stderr, "llama-rollback: cannot load the model %s\n", argv[2]);
        return 2;
    }
    rt.n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(rt.model));
    rt.ctx = new_context(rt.model, rt.n_seq, rt.way == Way::Snapshot ? static_cast<uint32_t>(n_rs_seq) : 0);
    rt.ref = new_context(rt.model, rt.n_seq, 0);
    if (rt.ctx == nullptr || rt.ref == nullptr) {
        std::fprintf(stderr, "llama-rollback: llama.cpp could not make a context\n");
        return 2;
    }
    rt.pos.assign(rt.n_seq, 0);
    rt.ref_pos.assign(rt.n_seq, 0);
    rt.last_window.assign(rt.n_seq, {});
    rt.ckpt.assign(rt.n_seq, {});
    std::string line;
    while (std::getline(std::cin, line)) {
        std::string reply;
        if (line.size() > kMaxLine) {
            reply = "{\"error\":\"a request is longer than 1 MiB\"}";
        } else {
            try {
                reply = rt.handle(line);
            } catch (const std::exception & e) {
                reply = std::string("{\"error\":\"") + e.what() + "\"}";
            }
        }
        std::fputs(reply.c_str(), stdout);
        std::fputc('\n', stdout);
        std::fflush(stdout);
    }
    llama_free(rt.ctx);
    llama_free(rt.ref);
    llama_model_free(rt.model);
    return 0;
}

}  // namespace

int main(int argc, char ** argv) {
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    const std::string cmd = argc > 1 ? argv[1] : "";
    int rc = 2;
    if (cmd == "make-model" && (argc == 4 || argc == 5)) {
        rc = make_model(argv[2], std::strtoull(argv[3], nullptr, 10), argc == 5 ? argv[4] : "qwen35");
    } else if (cmd == "serve") {
        rc = serve(argc, argv);
    } else {
        std::fprintf(stderr, "usage: llama-rollback make-model OUT.gguf SEED [ARCH] | serve MODEL N_SEQ N_RS_SEQ WAY [FAULT]\n");
    }
    llama_backend_free();
    return rc;
}
