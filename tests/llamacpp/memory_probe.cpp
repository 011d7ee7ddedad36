// SPDX-License-Identifier: MIT OR Apache-2.0
// What llama.cpp itself allocates and saves for a model's recurrent state, for
// tests/llamacpp/test_memory_figures.py to hold against the llama.cpp sizing view.
//
//   memory-probe ARCH BLOCKS INTERVAL KEY_HEADS KEY_DIM VALUE_HEADS VALUE_DIM KERNEL N_SEQ N_RS_SEQ
//
// builds a small random model of ARCH (qwen35 or qwen3next) in memory with
// llama_model_init_from_user, BLOCKS layers of which every INTERVAL-th is full
// attention, opens a context of N_SEQ sequences asking for N_RS_SEQ snapshots,
// decodes two tokens in sequence 0 and prints one JSON object:
//   n_rs_seq          what the context kept (llama_n_rs_seq)
//   context_bytes     its memory's buffers (llama_get_memory_breakdown, "context")
//   checkpoint_bytes  sequence 0's saved state (llama_state_seq_get_size_ext, PARTIAL_ONLY)
// A failure prints one line on stderr and exits 1.

#include "ggml-backend.h"
#include "gguf.h"
#include "llama.h"
#include "llama-ext.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void fill(ggml_tensor * tensor, void *) {
    // Small values, a negative decay: the decode only has to run, not to mean anything.
    const float value = std::strstr(tensor->name, "ssm_a") != nullptr ? -0.5f : 0.01f;
    std::vector<float> data(ggml_nelements(tensor), value);
    ggml_backend_tensor_set(tensor, data.data(), 0, ggml_nbytes(tensor));
}

void quiet(ggml_log_level, const char *, void *) {}

uint32_t number(const char * text) {
    char * end = nullptr;
    const unsigned long value = std::strtoul(text, &end, 10);
    if (end == text || *end != '\0' || value > 1u << 20) {
        std::fprintf(stderr, "memory-probe: not a small whole number: %s\n", text);
        std::exit(1);
    }
    return static_cast<uint32_t>(value);
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc != 11) {
        std::fprintf(stderr,
                     "usage: memory-probe ARCH BLOCKS INTERVAL KEY_HEADS KEY_DIM VALUE_HEADS VALUE_DIM "
                     "KERNEL N_SEQ N_RS_SEQ\n");
        return 1;
    }
    const std::string arch = argv[1];
    if (arch != "qwen35" && arch != "qwen3next") {
        std::fprintf(stderr, "memory-probe: ARCH is qwen35 or qwen3next, not %s\n", arch.c_str());
        return 1;
    }
    const uint32_t blocks = number(argv[2]), interval = number(argv[3]);
    const uint32_t key_heads = number(argv[4]), key_dim = number(argv[5]);
    const uint32_t value_heads = number(argv[6]), value_dim = number(argv[7]);
    const uint32_t kernel = number(argv[8]), n_seq = number(argv[9]), n_rs_seq = number(argv[10]);
    llama_log_set(quiet, nullptr);
    llama_backend_init();

    constexpr uint32_t n_vocab = 32;
    constexpr uint32_t n_embd = 64;
    constexpr uint32_t n_head = 2;
    const auto key = [&](const char * name) { return arch + "." + name; };
    gguf_context * meta = gguf_init_empty();
    gguf_set_val_str(meta, "general.architecture", arch.c_str());
    gguf_set_val_u32(meta, key("vocab_size").c_str(), n_vocab);
    gguf_set_val_u32(meta, key("context_length").c_str(), 64);
    gguf_set_val_u32(meta, key("embedding_length").c_str(), n_embd);
    gguf_set_val_u32(meta, key("block_count").c_str(), blocks);
    gguf_set_val_u32(meta, key("feed_forward_length").c_str(), 96);
    gguf_set_val_u32(meta, key("attention.head_count").c_str(), n_head);
    gguf_set_val_u32(meta, key("attention.head_count_kv").c_str(), n_head);
    gguf_set_val_f32(meta, key("attention.layer_norm_rms_epsilon").c_str(), 1e-5f);
    if (arch == "qwen35") {
        const uint32_t quarter = n_embd / n_head / 4;
        const uint32_t sections[4] = {quarter, quarter, quarter, quarter};
        gguf_set_arr_data(meta, key("rope.dimension_sections").c_str(), GGUF_TYPE_UINT32, sections, 4);
    } else {
        gguf_set_val_u32(meta, key("rope.dimension_count").c_str(), n_embd / n_head / 4);
        gguf_set_val_u32(meta, key("expert_count").c_str(), 2);
        gguf_set_val_u32(meta, key("expert_used_count").c_str(), 1);
        gguf_set_val_u32(meta, key("expert_feed_forward_length").c_str(), 32);
        gguf_set_val_u32(meta, key("expert_shared_feed_forward_length").c_str(), 32);
    }
    // conversion/qwen.py:377-381: the GDN shape as llama.cpp's converter writes it.
    gguf_set_val_u32(meta, key("ssm.conv_kernel").c_str(), kernel);
    gguf_set_val_u32(meta, key("ssm.inner_size").c_str(), value_heads * value_dim);
    gguf_set_val_u32(meta, key("ssm.state_size").c_str(), key_dim);
    gguf_set_val_u32(meta, key("ssm.time_step_rank").c_str(), value_heads);
    gguf_set_val_u32(meta, key("ssm.group_count").c_str(), key_heads);
    gguf_set_val_u32(meta, key("full_attention_interval").c_str(), interval);
    // No tokenizer: llama.cpp adds vocab_size dummy tokens (src/llama-vocab.cpp).
    gguf_set_val_str(meta, "tokenizer.ggml.model", "none");

    llama_model * model = llama_model_init_from_user(meta, fill, nullptr, llama_model_default_params());
    gguf_free(meta);
    if (model == nullptr) {
        std::fprintf(stderr, "memory-probe: llama.cpp could not make the %s model\n", arch.c_str());
        return 1;
    }
    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = 64;
    cparams.n_batch = 16;
    cparams.n_ubatch = 16;
    cparams.n_seq_max = n_seq;
    cparams.n_rs_seq = n_rs_seq;
    cparams.n_threads = 1;
    cparams.n_threads_batch = 1;
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (ctx == nullptr) {
        std::fprintf(stderr, "memory-probe: llama.cpp could not open the context\n");
        return 1;
    }
    size_t context_bytes = 0;
    for (const auto & [buft, data] : llama_get_memory_breakdown(ctx)) {
        context_bytes += data.context;
    }
    llama_token tokens[2] = {1, 2};
    if (llama_decode(ctx, llama_batch_get_one(tokens, 2)) != 0) {
        std::fprintf(stderr, "memory-probe: llama_decode failed\n");
        return 1;
    }
    const size_t checkpoint_bytes = llama_state_seq_get_size_ext(ctx, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
    std::printf("{\"n_rs_seq\": %u, \"context_bytes\": %zu, \"checkpoint_bytes\": %zu}\n", llama_n_rs_seq(ctx),
                context_bytes, checkpoint_bytes);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
