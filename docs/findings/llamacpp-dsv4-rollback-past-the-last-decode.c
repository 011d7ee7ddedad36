// SPDX-License-Identifier: MIT OR Apache-2.0
//
// Reproducer: llama.cpp accepts a DeepSeek-V4 snapshot rollback deeper than
// the last decode, then decodes from a compressor state that a later
// position has overwritten (docs/findings/llamacpp-dsv4-rollback-past-the-last-decode.md).
//
// C, against llama.h alone. It loads a DeepSeek-V4 GGUF model (`deepseek4`;
// the finding's page uses the llamacpp tier's tiny random one) and runs three
// speculative rounds on sequence 0 of a context with 3 sequences and
// n_rs_seq 4:
//
//   1. decode token 0 at positions 0-8, in one llama_decode;
//   2. decode token 0 at position 9, then roll back 3 tokens, past that
//      one-token window: llama_memory_seq_rm(mem, 0, 7, -1), which returns true;
//   3. decode token 0 at position 7.
//
// Each kept position's logits (0-6 from round 1, 7 from round 3) are compared
// with those of a second context (n_rs_seq 0) that decodes only the kept
// tokens, one llama_decode each, and never rolls back. With WAY `checkpoint`
// the first context has no snapshots and rolls back by a saved state: the
// sequence's state is saved before each window (llama_state_seq_get_data_ext,
// PARTIAL_ONLY); a rollback puts back the latest one saved at or before the
// position it rolls back to, removes the positions after it and decodes the
// kept tokens since it again. That control agrees.
//
// Prints one line on standard output. Exit 1 when some kept token's logits
// differ from the reference by more than 1e-3 (the largest difference and
// where; 1e-3 since ggml's native CPU variants decode a window and a single
// token with different kernels, up to about 2e-4 apart with no rollback at
// all, while this finding is 8e-3), 0 when they agree (or when llama.cpp
// refuses the rollback, as a fixed release may), 2 for a bad command line or
// a model that does not load, 3 when a llama.cpp call fails.
//
// Build it against a static llama.cpp build (cmake -DBUILD_SHARED_LIBS=OFF),
// SRC the llama.cpp source and BUILD its build folder, in one line:
//
//   cc -O2 -std=c11 -I SRC/include -I SRC/ggml/include
//      llamacpp-dsv4-rollback-past-the-last-decode.c -o past-the-last-decode
//      -Wl,--start-group BUILD/src/libllama.a BUILD/ggml/src/libggml.a
//      BUILD/ggml/src/libggml-cpu.a BUILD/ggml/src/libggml-base.a
//      -Wl,--end-group -lpthread -lm -lstdc++
//
// or against shared libraries: ... -L LIBDIR -lllama -lggml -lggml-base.
// Where ggml loads its CPU backend at run time (GGML_BACKEND_DL, as in
// node-llama-cpp's prebuilt libraries), GGML_BACKEND_PATH names the CPU
// variant's library to load. Run:
//
//   ./past-the-last-decode MODEL.gguf              the snapshot way: exit 1 where affected
//   ./past-the-last-decode MODEL.gguf checkpoint   the control: exit 0
//
// The page's "Reproducer" section gives the exact commands its test runs.

#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_SEQ 3
#define N_RS_SEQ 4
#define TOLERANCE 1e-3
#define MAX_WINDOW 9
#define MAX_POS 16
#define MAX_VOCAB 65536
#define SEQ 0

// One round on sequence 0: a window of tokens, then how many tokens are rolled back.
struct round {
    int n;
    llama_token tokens[MAX_WINDOW];
    int back;
};

// The shrunk case (tests/llamacpp/test_architectures.py, DSV4_ROUNDS, then one more token).
static const struct round ROUNDS[] = {
    {9, {0, 0, 0, 0, 0, 0, 0, 0, 0}, 0},
    {1, {0}, 3},
    {1, {0}, 0},
};
#define N_ROUNDS ((int) (sizeof ROUNDS / sizeof ROUNDS[0]))
static const char * const WHAT = "a DeepSeek-V4 snapshot rollback past the last decode";

enum way { SNAPSHOT, CHECKPOINT };

// A saved state of sequence 0 and the position it was saved at.
struct checkpoint {
    unsigned char * data;
    size_t size;
    llama_pos pos;
};

// llama.cpp's errors, once the model is loaded: a model that does not load gets one line.
static int loaded = 0;

static void quiet(enum ggml_log_level level, const char * text, void * data) {
    (void) data;
    if (loaded && level == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

static void fail(const char * what) {
    fprintf(stderr, "reproducer: %s\n", what);
    exit(3);
}

static struct llama_context * new_context(struct llama_model * model, unsigned n_rs_seq) {
    struct llama_context_params p = llama_context_default_params();
    p.n_ctx = 256 * N_SEQ;
    p.n_batch = 256;
    p.n_ubatch = 256;
    p.n_seq_max = N_SEQ;
    p.n_rs_seq = n_rs_seq;
    // One thread: the sums run in one order in both contexts.
    p.n_threads = 1;
    p.n_threads_batch = 1;
    struct llama_context * ctx = llama_init_from_model(model, p);
    if (ctx == NULL) {
        fail("llama_init_from_model failed");
    }
    return ctx;
}

// One llama_decode of `n` tokens of sequence 0 from position *pos; `logits` 1 asks for every row.
static void decode(struct llama_context * ctx, const llama_token * tokens, int n, llama_pos * pos,
                   int logits) {
    if (n == 0) {
        return;
    }
    struct llama_batch batch = llama_batch_init(n, 0, 1);
    batch.n_tokens = n;
    for (int k = 0; k < n; ++k) {
        batch.token[k] = tokens[k];
        batch.pos[k] = *pos + k;
        batch.n_seq_id[k] = 1;
        batch.seq_id[k][0] = SEQ;
        batch.logits[k] = (int8_t) logits;
    }
    batch.logits[n - 1] = 1;
    const int32_t rc = llama_decode(ctx, batch);
    llama_batch_free(batch);
    if (rc != 0) {
        fail("llama_decode failed");
    }
    *pos += n;
}

int main(int argc, char ** argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s MODEL.gguf [snapshot|checkpoint]\n", argv[0]);
        return 2;
    }
    if (argc == 3 && strcmp(argv[2], "snapshot") != 0 && strcmp(argv[2], "checkpoint") != 0) {
        fprintf(stderr, "reproducer: the way is snapshot or checkpoint, not %s\n", argv[2]);
        return 2;
    }
    const enum way way = argc == 3 && strcmp(argv[2], "checkpoint") == 0 ? CHECKPOINT : SNAPSHOT;
    // Backends first, with ggml's own log (it names a CPU variant it loads), then quiet.
    ggml_backend_load_all();
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (model == NULL) {
        fprintf(stderr, "reproducer: llama.cpp cannot load the model %s\n", argv[1]);
        return 2;
    }
    loaded = 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    if (n_vocab < 1 || n_vocab > MAX_VOCAB) {
        fprintf(stderr, "reproducer: the model's vocabulary of %d tokens is not 1 to %d\n", n_vocab,
                MAX_VOCAB);
        return 2;
    }
    struct llama_context * ctx = new_context(model, way == SNAPSHOT ? N_RS_SEQ : 0);
    struct llama_context * ref = new_context(model, 0);
    llama_memory_t mem = llama_get_memory(ctx);
    llama_pos pos = 0;
    // What each position holds: its token, the logits the rounds gave it, the round that did.
    llama_token history[MAX_POS];
    int round_of[MAX_POS];
    float * logits = malloc(sizeof(float) * (size_t) n_vocab * MAX_POS);
    struct checkpoint saved[N_ROUNDS];
    int n_saved = 0;
    if (logits == NULL) {
        fail("out of memory");
    }
    for (int r = 0; r < N_ROUNDS; ++r) {
        const struct round * round = &ROUNDS[r];
        if (pos + round->n > MAX_POS) {
            fail("the rounds outrun MAX_POS");
        }
        if (way == CHECKPOINT) {
            // The state before the window, as the server's checkpoint keeps it.
            struct checkpoint * c = &saved[n_saved++];
            c->size = llama_state_seq_get_size_ext(ctx, SEQ, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
            c->data = malloc(c->size);
            c->pos = pos;
            if (c->data == NULL ||
                llama_state_seq_get_data_ext(ctx, c->data, c->size, SEQ,
                                             LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) != c->size) {
                fail("llama_state_seq_get_data_ext failed");
            }
        }
        const llama_pos start = pos;
        decode(ctx, round->tokens, round->n, &pos, 1);
        for (int j = 0; j < round->n; ++j) {
            history[start + j] = round->tokens[j];
            round_of[start + j] = r + 1;
            memcpy(logits + (size_t) (start + j) * n_vocab, llama_get_logits_ith(ctx, j),
                   sizeof(float) * (size_t) n_vocab);
        }
        if (round->back == 0) {
            continue;
        }
        const llama_pos target = pos - round->back;
        if (way == SNAPSHOT) {
            if (!llama_memory_seq_rm(mem, SEQ, target, -1)) {
                printf("llama.cpp refuses %s (llama_memory_seq_rm returned false): not "
                       "reproduced\n", WHAT);
                return 0;
            }
            pos = target;
            continue;
        }
        // The latest state saved at or before the target, then the kept tokens since it.
        int k = n_saved - 1;
        while (saved[k].pos > target) {
            --k;
        }
        if (llama_state_seq_set_data_ext(ctx, saved[k].data, saved[k].size, SEQ,
                                         LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) == 0) {
            fail("llama_state_seq_set_data_ext failed");
        }
        if (!llama_memory_seq_rm(mem, SEQ, saved[k].pos, -1)) {
            fail("llama_memory_seq_rm refused to trim after a restore");
        }
        pos = saved[k].pos;
        decode(ctx, history + pos, target - pos, &pos, 0);
        // Those saved after it are of positions rolled back.
        while (n_saved > k + 1) {
            free(saved[--n_saved].data);
        }
    }
    // The reference: the kept tokens, one llama_decode each, never rolled back.
    double worst = 0.0;
    int worst_pos = 0, worst_logit = 0;
    float worst_got = 0.0f, worst_expected = 0.0f;
    llama_pos ref_pos = 0;
    while (ref_pos < pos) {
        const llama_pos p = ref_pos;
        decode(ref, history + p, 1, &ref_pos, 1);
        const float * expected = llama_get_logits_ith(ref, 0);
        const float * got = logits + (size_t) p * n_vocab;
        for (int v = 0; v < n_vocab; ++v) {
            const double d = fabs((double) got[v] - (double) expected[v]);
            if (d > worst) {
                worst = d;
                worst_pos = p;
                worst_logit = v;
                worst_got = got[v];
                worst_expected = expected[v];
            }
        }
    }
    const char * way_name = way == SNAPSHOT ? "snapshot" : "checkpoint";
    const int differs = worst > TOLERANCE;
    if (differs) {
        printf("differs: after %s (%s way), the kept tokens' logits are %.2e (max abs) from "
               "decoding only the kept tokens: round %d, sequence %d, position %d, logit %d: "
               "%.9g, plain decoding %.9g\n",
               WHAT, way_name, worst, round_of[worst_pos], SEQ, worst_pos, worst_logit,
               (double) worst_got, (double) worst_expected);
    } else {
        printf("agrees: after %s (%s way), the kept tokens' logits are %.2e (max abs) from "
               "decoding only the kept tokens, over %d tokens\n",
               WHAT, way_name, worst, (int) pos);
    }
    for (int k = 0; k < n_saved; ++k) {
        free(saved[k].data);
    }
    free(logits);
    llama_free(ctx);
    llama_free(ref);
    llama_model_free(model);
    llama_backend_free();
    return differs ? 1 : 0;
}
