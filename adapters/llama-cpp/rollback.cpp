// SPDX-License-Identifier: MIT OR Apache-2.0
//
// llama-rollback: llama.cpp's own recurrent rollback, driven through llama.h
// over a JSON-lines protocol (docs/engines.md, the llama.cpp row), so that a
// property test can draw speculative rounds the way runtimes make them.
//
//   llama-rollback make-model OUT.gguf SEED [qwen35|qwen3next]
//       writes a small random Qwen3.5 (the default) or Qwen3-Next model
//       (llama_model_init_from_user, then llama_model_save_to_file;
//       include/llama.h in the pinned release).
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
    if (tensor->type != GGML_TYPE_F32) {
        throw std::runtime_error("make-model writes F32 tensors only");
    }
    std::vector<float> data(ggml_nelements(tensor));
    for (float & x : data) {
        const float r = normal(gen);
        x = decay ? -std::fabs(r) : norm ? 1.0f + r : r;
    }
    ggml_backend_tensor_set(tensor, data.data(), 0, ggml_nbytes(tensor));
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
        std::fprintf(stderr, "llama-rollback: make-model makes qwen35 or qwen3next, not %s\n", arch.c_str());
        return 2;
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
