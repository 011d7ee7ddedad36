// SPDX-License-Identifier: MIT OR Apache-2.0
//
// Reproducer: llama.cpp accepts a snapshot rollback of one sequence decoded
// beside others, and then decodes from another cell's recurrent state
// (docs/findings/llamacpp-snapshot-beside-other-sequences.md).
//
// C, against llama.h alone. It loads a Qwen3.5 GGUF model (any model of an
// architecture llama.cpp gives n_rs_seq snapshots; the finding's page uses
// the llamacpp tier's tiny random one) and runs three speculative rounds in
// a context with 3 sequences and n_rs_seq 4:
//
//   1. sequence 0 decodes token 0 at position 0;
//   2. one llama_decode of sequence 2's window [0, 0] (positions 0 and 1),
//      sequence 0's [0] (position 1) and sequence 1's [0] (position 0),
//      in that order; sequence 2 rolls its last token back:
//      llama_memory_seq_rm(mem, 2, 1, -1), which returns true;
//   3. sequence 2 decodes token 2 at position 1.
//
// Every kept token's logits are compared with those of a second context
// (n_rs_seq 0) that decodes only the kept tokens, one llama_decode each, and
// never rolls back. With WAY `checkpoint` the first context has no snapshots
// and rolls back as llama.cpp's server does: the sequence's state saved
// before each window (llama_state_seq_get_data_ext, PARTIAL_ONLY) is put
// back, the window's positions are removed and the kept tokens decoded
// again. That control agrees.
//
// Prints one line on standard output. Exit 1 when some kept token's logits
// differ from the reference by more than 1e-3 (the largest difference and
// where; 1e-3 since ggml's native CPU variants decode a window and a single
// token with different kernels, up to about 2e-4 apart with no rollback at
// all, while the snapshot findings are 5e-3 and 2e-2), 0 when
// they agree (or when llama.cpp refuses the rollback, as a fixed release
// may), 2 for a bad command line or a model that does not load, 3 when a
// llama.cpp call fails.
//
// Build it against a static llama.cpp build (cmake -DBUILD_SHARED_LIBS=OFF),
// SRC the llama.cpp source and BUILD its build folder, in one line:
//
//   cc -O2 -std=c11 -I SRC/include -I SRC/ggml/include
//      llamacpp-snapshot-beside-other-sequences.c -o beside
//      -Wl,--start-group BUILD/src/libllama.a BUILD/ggml/src/libggml.a
//      BUILD/ggml/src/libggml-cpu.a BUILD/ggml/src/libggml-base.a
//      -Wl,--end-group -lpthread -lm -lstdc++
//
// or against shared libraries: ... -L LIBDIR -lllama -lggml -lggml-base.
// Where ggml loads its CPU backend at run time (GGML_BACKEND_DL, as in
// node-llama-cpp's prebuilt libraries), GGML_BACKEND_PATH names the CPU
// variant's library to load. Run:
//
//   ./beside MODEL.gguf              the snapshot way: exit 1 where affected
//   ./beside MODEL.gguf checkpoint   the control: exit 0
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
#define MAX_WINDOW 4
#define MAX_VOCAB 65536

// One sequence's window in a round, and how many of its tokens are rolled back.
struct window {
    int seq;
    int n;
    llama_token tokens[MAX_WINDOW];
    int back;
};

struct round {
    int n_windows;
    struct window windows[N_SEQ];
};

// The shrunk case (tests/llamacpp/test_rollback.py, DEVIATION_ROUNDS).
static const struct round ROUNDS[] = {
    {1, {{0, 1, {0}, 0}}},
    {3, {{2, 2, {0, 0}, 1}, {0, 1, {0}, 0}, {1, 1, {0}, 0}}},
    {1, {{2, 1, {2}, 0}}},
};
#define N_ROUNDS ((int) (sizeof ROUNDS / sizeof ROUNDS[0]))
static const char * const WHAT = "a snapshot rollback beside other sequences";

enum way { SNAPSHOT, CHECKPOINT };

struct worst {
    double difference;
    int round, seq, pos, logit;
    float got, expected;
    int compared;
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

// One llama_decode of `count` windows; `logits` 1 asks for every token's row.
static void decode(struct llama_context * ctx, const struct window * windows, const int * lengths,
                   int count, llama_pos * pos, int logits) {
    int n = 0;
    for (int i = 0; i < count; ++i) {
        n += lengths[i];
    }
    if (n == 0) {
        return;
    }
    struct llama_batch batch = llama_batch_init(n, 0, 1);
    batch.n_tokens = 0;
    for (int i = 0; i < count; ++i) {
        for (int j = 0; j < lengths[i]; ++j) {
            const int k = batch.n_tokens++;
            batch.token[k] = windows[i].tokens[j];
            batch.pos[k] = pos[windows[i].seq] + j;
            batch.n_seq_id[k] = 1;
            batch.seq_id[k][0] = windows[i].seq;
            batch.logits[k] = (int8_t) logits;
        }
    }
    batch.logits[n - 1] = 1;
    const int32_t rc = llama_decode(ctx, batch);
    llama_batch_free(batch);
    if (rc != 0) {
        fail("llama_decode failed");
    }
    for (int i = 0; i < count; ++i) {
        pos[windows[i].seq] += lengths[i];
    }
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
    llama_pos pos[N_SEQ] = {0}, ref_pos[N_SEQ] = {0};
    float * rows = malloc(sizeof(float) * (size_t) n_vocab * N_SEQ * MAX_WINDOW);
    unsigned char * saved[N_SEQ] = {NULL};
    size_t saved_size[N_SEQ] = {0};
    struct worst worst = {0.0, 0, 0, 0, 0, 0.0f, 0.0f, 0};
    if (rows == NULL) {
        fail("out of memory");
    }
    for (int r = 0; r < N_ROUNDS; ++r) {
        const struct round * round = &ROUNDS[r];
        int lengths[N_SEQ];
        llama_pos start[N_SEQ];
        for (int i = 0; i < round->n_windows; ++i) {
            const int seq = round->windows[i].seq;
            lengths[i] = round->windows[i].n;
            start[i] = pos[seq];
            if (way == CHECKPOINT) {
                // The state before the window, as the server's checkpoint keeps it.
                saved_size[seq] = llama_state_seq_get_size_ext(ctx, seq, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
                saved[seq] = realloc(saved[seq], saved_size[seq]);
                if (saved[seq] == NULL ||
                    llama_state_seq_get_data_ext(ctx, saved[seq], saved_size[seq], seq,
                                                 LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) != saved_size[seq]) {
                    fail("llama_state_seq_get_data_ext failed");
                }
            }
        }
        decode(ctx, round->windows, lengths, round->n_windows, pos, 1);
        int row = 0;
        for (int i = 0; i < round->n_windows; ++i) {
            for (int j = 0; j < lengths[i]; ++j, ++row) {
                memcpy(rows + (size_t) row * n_vocab, llama_get_logits_ith(ctx, row),
                       sizeof(float) * (size_t) n_vocab);
            }
        }
        row = 0;
        for (int i = 0; i < round->n_windows; ++i) {
            const struct window * w = &round->windows[i];
            const int kept = w->n - w->back;
            if (w->back > 0 && way == SNAPSHOT) {
                if (!llama_memory_seq_rm(mem, w->seq, pos[w->seq] - w->back, -1)) {
                    printf("llama.cpp refuses %s (llama_memory_seq_rm returned false): not "
                           "reproduced\n", WHAT);
                    return 0;
                }
                pos[w->seq] -= w->back;
            } else if (w->back > 0) {
                if (llama_state_seq_set_data_ext(ctx, saved[w->seq], saved_size[w->seq], w->seq,
                                                 LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) == 0) {
                    fail("llama_state_seq_set_data_ext failed");
                }
                if (!llama_memory_seq_rm(mem, w->seq, start[i], -1)) {
                    fail("llama_memory_seq_rm refused to trim after a restore");
                }
                pos[w->seq] = start[i];
                decode(ctx, w, &kept, 1, pos, 0);
            }
            // The reference: the kept tokens, one llama_decode each, never rolled back.
            for (int j = 0; j < kept; ++j) {
                const int one = 1;
                struct window single = {w->seq, 1, {w->tokens[j]}, 0};
                decode(ref, &single, &one, 1, ref_pos, 1);
                const float * expected = llama_get_logits_ith(ref, 0);
                const float * got = rows + (size_t) (row + j) * n_vocab;
                for (int v = 0; v < n_vocab; ++v) {
                    const double d = fabs((double) got[v] - (double) expected[v]);
                    if (d > worst.difference) {
                        worst = (struct worst){d, r + 1, w->seq, ref_pos[w->seq] - 1, v,
                                               got[v], expected[v], worst.compared};
                    }
                }
                ++worst.compared;
            }
            row += w->n;
        }
    }
    const char * way_name = way == SNAPSHOT ? "snapshot" : "checkpoint";
    const int differs = worst.difference > TOLERANCE;
    if (differs) {
        printf("differs: after %s (%s way), the kept tokens' logits are %.2e (max abs) from "
               "decoding only the kept tokens: round %d, sequence %d, position %d, logit %d: "
               "%.9g, plain decoding %.9g\n",
               WHAT, way_name, worst.difference, worst.round, worst.seq, worst.pos, worst.logit,
               (double) worst.got, (double) worst.expected);
    } else {
        printf("agrees: after %s (%s way), the kept tokens' logits are %.2e (max abs) from "
               "decoding only the kept tokens, over %d tokens\n",
               WHAT, way_name, worst.difference, worst.compared);
    }
    for (int s = 0; s < N_SEQ; ++s) {
        free(saved[s]);
    }
    free(rows);
    llama_free(ctx);
    llama_free(ref);
    llama_model_free(model);
    llama_backend_free();
    return differs ? 1 : 0;
}
