// SPDX-License-Identifier: MIT OR Apache-2.0
//
// A racy C adapter (docs/protocol.md, version 2), written as a newcomer
// would: everything right but the published mode's cell, a check-then-set
// with relaxed atomics, no lock and no sleep. It offers only the mandatory
// `race` (no `race_cells`), releasing each race's threads from a spinning
// barrier. The race-power benchmark (benchmarks/race_power.py) measures how
// often a default `check` catches it. Asked for `spans`, it gives each racing
// call's start and end on CLOCK_MONOTONIC (docs/protocol-race-evidence.md).
// Build: cc -O2 -pthread adapter.c

#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum kind { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct json {
    enum kind kind;
    char *text;  // a number's source text, or a string's UTF-8 bytes
    size_t length;
    struct json **items;
    char **keys;
    size_t *key_lengths;
    size_t count;
};

enum { MAX_DEPTH = 16, MAX_EVENTS = 256 };

struct reader {
    const char *at;
    const char *end;
    const char *error;
};

static void *grab(size_t bytes) {
    void *memory = malloc(bytes ? bytes : 1);
    if (!memory) {
        fputs("c-racy-adapter: out of memory\n", stderr);
        exit(1);
    }
    return memory;
}

static void space(struct reader *r) {
    while (r->at < r->end && (*r->at == ' ' || *r->at == '\t' || *r->at == '\n' || *r->at == '\r'))
        r->at++;
}

static int hex4(struct reader *r, unsigned *out) {
    if (r->end - r->at < 4) return 0;
    unsigned value = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->at[i];
        value <<= 4;
        if (c >= '0' && c <= '9') value |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') value |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') value |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    r->at += 4;
    *out = value;
    return 1;
}

static size_t put_utf8(char *out, unsigned code) {
    if (code < 0x80) { out[0] = (char)code; return 1; }
    if (code < 0x800) {
        out[0] = (char)(0xC0 | (code >> 6)); out[1] = (char)(0x80 | (code & 0x3F)); return 2;
    }
    if (code < 0x10000) {
        out[0] = (char)(0xE0 | (code >> 12)); out[1] = (char)(0x80 | ((code >> 6) & 0x3F));
        out[2] = (char)(0x80 | (code & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | (code >> 18)); out[1] = (char)(0x80 | ((code >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((code >> 6) & 0x3F)); out[3] = (char)(0x80 | (code & 0x3F));
    return 4;
}

static int string(struct reader *r, char **text, size_t *length) {
    r->at++;  // the opening quote
    char *out = grab((size_t)(r->end - r->at) + 1);
    size_t n = 0;
    while (r->at < r->end) {
        unsigned char c = (unsigned char)*r->at++;
        if (c == '"') { out[n] = 0; *text = out; *length = n; return 1; }
        if (c < 0x20) { r->error = "a raw control character in a string"; return 0; }
        if (c != '\\') { out[n++] = (char)c; continue; }
        if (r->at >= r->end) break;
        char e = *r->at++;
        unsigned code;
        switch (e) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u':
            if (!hex4(r, &code)) { r->error = "a malformed \\u escape"; return 0; }
            if (code >= 0xDC00 && code < 0xE000) { r->error = "a lone surrogate"; return 0; }
            if (code >= 0xD800 && code < 0xDC00) {
                unsigned low;
                if (r->end - r->at < 2 || r->at[0] != '\\' || r->at[1] != 'u') {
                    r->error = "a lone surrogate"; return 0;
                }
                r->at += 2;
                if (!hex4(r, &low) || low < 0xDC00 || low >= 0xE000) {
                    r->error = "a lone surrogate"; return 0;
                }
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            }
            n += put_utf8(out + n, code);
            break;
        default: r->error = "an unknown escape"; return 0;
        }
    }
    r->error = "an unfinished string";
    return 0;
}

static int digits(struct reader *r) {
    int count = 0;
    while (r->at < r->end && *r->at >= '0' && *r->at <= '9') { r->at++; count++; }
    return count;
}

static struct json *value(struct reader *r, int depth);

static struct json *node(enum kind kind) {
    struct json *j = grab(sizeof *j);
    memset(j, 0, sizeof *j);
    j->kind = kind;
    return j;
}

static struct json *literal(struct reader *r, const char *word, enum kind kind) {
    size_t n = strlen(word);
    if ((size_t)(r->end - r->at) < n || memcmp(r->at, word, n) != 0) {
        r->error = "an unexpected character";
        return NULL;
    }
    r->at += n;
    struct json *j = node(kind);
    j->text = (char *)word;
    return j;
}

static struct json *container(struct reader *r, int depth, int object) {
    // Only arrays and objects are levels: the request object is level 1.
    if (depth > MAX_DEPTH) { r->error = "nested deeper than 16 levels"; return NULL; }
    struct json *j = node(object ? J_OBJ : J_ARR);
    size_t capacity = 4;
    j->items = grab(capacity * sizeof *j->items);
    j->keys = grab(capacity * sizeof *j->keys);
    j->key_lengths = grab(capacity * sizeof *j->key_lengths);
    r->at++;
    space(r);
    char close = object ? '}' : ']';
    if (r->at < r->end && *r->at == close) { r->at++; return j; }
    for (;;) {
        if (j->count == capacity) {
            capacity *= 2;
            j->items = realloc(j->items, capacity * sizeof *j->items);
            j->keys = realloc(j->keys, capacity * sizeof *j->keys);
            j->key_lengths = realloc(j->key_lengths, capacity * sizeof *j->key_lengths);
            if (!j->items || !j->keys || !j->key_lengths) exit(1);
        }
        if (object) {
            space(r);
            if (r->at >= r->end || *r->at != '"') { r->error = "an object key must be a string"; return NULL; }
            if (!string(r, &j->keys[j->count], &j->key_lengths[j->count])) return NULL;
            space(r);
            if (r->at >= r->end || *r->at != ':') { r->error = "a ':' is missing"; return NULL; }
            r->at++;
        }
        struct json *item = value(r, depth + 1);
        if (!item) return NULL;
        j->items[j->count++] = item;
        space(r);
        if (r->at < r->end && *r->at == ',') { r->at++; continue; }
        if (r->at < r->end && *r->at == close) { r->at++; return j; }
        r->error = "a ',' or a closing bracket is missing";
        return NULL;
    }
}

static struct json *value(struct reader *r, int depth) {
    space(r);
    if (r->at >= r->end) { r->error = "an unexpected end of line"; return NULL; }
    const char *start = r->at;
    switch (*r->at) {
    case 'n': return literal(r, "null", J_NULL);
    case 't': return literal(r, "true", J_BOOL);
    case 'f': return literal(r, "false", J_BOOL);
    case '"': {
        struct json *j = node(J_STR);
        return string(r, &j->text, &j->length) ? j : NULL;
    }
    case '[': return container(r, depth, 0);
    case '{': return container(r, depth, 1);
    default: break;
    }
    if (*r->at != '-' && (*r->at < '0' || *r->at > '9')) { r->error = "an unexpected character"; return NULL; }
    if (*r->at == '-') r->at++;
    const char *first = r->at;
    int count = digits(r);
    if (count == 0 || (*first == '0' && count > 1)) { r->error = "a malformed number"; return NULL; }
    if (r->at < r->end && *r->at == '.') {
        r->at++;
        if (!digits(r)) { r->error = "a malformed number"; return NULL; }
    }
    if (r->at < r->end && (*r->at == 'e' || *r->at == 'E')) {
        r->at++;
        if (r->at < r->end && (*r->at == '+' || *r->at == '-')) r->at++;
        if (!digits(r)) { r->error = "a malformed number"; return NULL; }
    }
    struct json *j = node(J_NUM);
    j->length = (size_t)(r->at - start);
    j->text = grab(j->length + 1);
    memcpy(j->text, start, j->length);
    j->text[j->length] = 0;
    return j;
}

static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t extra;
        unsigned code;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) { extra = 1; code = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { extra = 2; code = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { extra = 3; code = c & 0x07; }
        else return 0;
        for (size_t k = 1; k <= extra; k++) {
            if (i + k >= n || (s[i + k] & 0xC0) != 0x80) return 0;
            code = (code << 6) | (s[i + k] & 0x3F);
        }
        if ((extra == 2 && (code < 0x800 || (code >= 0xD800 && code < 0xE000))) ||
            (extra == 3 && (code < 0x10000 || code > 0x10FFFF)))
            return 0;
        i += extra + 1;
    }
    return 1;
}

// The last member of that name wins, as in most JSON readers (docs/protocol.md).
static struct json *get(struct json *object, const char *key) {
    if (!object || object->kind != J_OBJ) return NULL;
    size_t n = strlen(key);
    for (size_t i = object->count; i-- > 0;)
        if (object->key_lengths[i] == n && memcmp(object->keys[i], key, n) == 0) return object->items[i];
    return NULL;
}

static int is_text(struct json *j, const char *text) {
    return j && j->kind == J_STR && j->length == strlen(text) && memcmp(j->text, text, j->length) == 0;
}

static int as_u64(struct json *j, uint64_t *out) {
    if (!j || j->kind != J_NUM) return 0;
    uint64_t value = 0;
    for (size_t i = 0; i < j->length; i++) {
        char c = j->text[i];
        if (c < '0' || c > '9') return 0;  // no sign, no fraction, no exponent
        if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, (uint64_t)(c - '0'), &value))
            return 0;
    }
    *out = value;
    return 1;
}

// --- the racy published mode ----------------------------------------------

enum { SNAPSHOT = 0, REPLAY = 1 };
static const char *const NAMES[] = {"snapshot", "replay"};

static atomic_int written;
static atomic_int published;

// Wrong on purpose: two callers can both see the cell empty.
static int set_mode(int mode) {
    if (!atomic_load_explicit(&written, memory_order_relaxed)) {
        atomic_store_explicit(&published, mode, memory_order_relaxed);
        atomic_store_explicit(&written, 1, memory_order_relaxed);
    }
    return atomic_load_explicit(&published, memory_order_relaxed);
}

// --- replies ----------------------------------------------------------------

static void write_string(FILE *out, const char *text, size_t length) {
    fputc('"', out);
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"' || c == '\\') { fputc('\\', out); fputc(c, out); }
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

static void error_reply(const char *kind, const char *message) {
    printf("{\"error\":{\"kind\":\"%s\",\"message\":", kind);
    write_string(stdout, message, strlen(message));
    fputs("}}\n", stdout);
}

static void modes_reply(const int *modes, size_t count) {
    fputs("{\"ok\":[", stdout);
    for (size_t i = 0; i < count; i++) printf("%s\"%s\"", i ? "," : "", NAMES[modes[i]]);
    fputs("]}\n", stdout);
}

// The same reply with each call's span beside it: "spans":[[START,END],...].
static void modes_and_spans_reply(const int *modes, const uint64_t (*spans)[2], size_t count) {
    fputs("{\"ok\":[", stdout);
    for (size_t i = 0; i < count; i++) printf("%s\"%s\"", i ? "," : "", NAMES[modes[i]]);
    fputs("],\"spans\":[", stdout);
    for (size_t i = 0; i < count; i++)
        printf("%s[%llu,%llu]", i ? "," : "", (unsigned long long)spans[i][0], (unsigned long long)spans[i][1]);
    fputs("]}\n", stdout);
}

// Nanoseconds on the monotonic clock.
static uint64_t now_ns(void) {
    struct timespec at;
    clock_gettime(CLOCK_MONOTONIC, &at);
    return (uint64_t)at.tv_sec * 1000000000u + (uint64_t)at.tv_nsec;
}

// An event: -1 for a get, or the mode a set publishes.
static int events(struct json *request, int *out, size_t *count) {
    struct json *list = get(request, "events");
    if (!list || list->kind != J_ARR || list->count > MAX_EVENTS) return 0;
    for (size_t i = 0; i < list->count; i++) {
        struct json *event = list->items[i];
        struct json *op = get(event, "op");
        if (is_text(op, "get")) out[i] = -1;
        else if (is_text(op, "set") && is_text(get(event, "mode"), "snapshot")) out[i] = SNAPSHOT;
        else if (is_text(op, "set") && is_text(get(event, "mode"), "replay")) out[i] = REPLAY;
        else return 0;
    }
    *count = list->count;
    return 1;
}

static int run_event(int event) { return set_mode(event < 0 ? SNAPSHOT : event); }

struct racer {
    int event;
    int returned;
    atomic_int *arrived;
    atomic_int *go;
    uint64_t span[2];
};

static void spin_until(atomic_int *flag, int at_least) {
    unsigned spins = 0;
    while (atomic_load_explicit(flag, memory_order_acquire) < at_least)
        if (++spins % 1024 == 0) sched_yield();
}

static void *race_thread(void *argument) {
    struct racer *racer = argument;
    atomic_fetch_add_explicit(racer->arrived, 1, memory_order_acq_rel);
    spin_until(racer->go, 1);
    racer->span[0] = now_ns();
    racer->returned = run_event(racer->event);
    racer->span[1] = now_ns();
    return NULL;
}

static void answer(char *line, size_t length) {
    if (!valid_utf8((unsigned char *)line, length)) { error_reply("bad-request", "not UTF-8"); return; }
    struct reader r = {line, line + length, NULL};
    struct json *request = value(&r, 1);
    if (request) {
        space(&r);
        if (r.at != r.end) { request = NULL; r.error = "trailing characters"; }
    }
    if (!request) { error_reply("bad-request", r.error ? r.error : "not JSON"); return; }
    if (request->kind != J_OBJ) { error_reply("bad-request", "a request must be a JSON object"); return; }
    struct json *op = get(request, "op");
    if (!op || op->kind != J_STR) { error_reply("bad-request", "field 'op' must be a string"); return; }
    if (is_text(op, "describe")) {
        puts("{\"ok\":{\"name\":\"c-racy-adapter (a check-then-set cell)\",\"usize_bits\":64}}");
    } else if (is_text(op, "parse")) {
        struct json *text = get(request, "text");
        if (!text || text->kind != J_STR) { error_reply("bad-request", "field 'text' must be a string"); return; }
        if (is_text(text, "snapshot") || is_text(text, "replay")) {
            printf("{\"ok\":\"%s\"}\n", text->text);
            return;
        }
        fputs("{\"error\":{\"kind\":\"unknown-mode\",\"message\":", stdout);
        size_t n = text->length + 64;
        char *message = grab(n);
        memcpy(message, "unknown ssm-rollback-mode '", 27);
        memcpy(message + 27, text->text, text->length);
        memcpy(message + 27 + text->length, "' (valid: snapshot, replay)", 27);
        write_string(stdout, message, text->length + 54);
        free(message);
        fputs("}}\n", stdout);
    } else if (is_text(op, "row_bytes")) {
        uint64_t q, nv, a, b, sum;
        if (!as_u64(get(request, "qkvz_elems"), &q) || !as_u64(get(request, "nv"), &nv)) {
            error_reply("bad-request", "a size must be an integer in [0, 18446744073709551615]");
            return;
        }
        if (__builtin_mul_overflow(q, 2, &a) || __builtin_mul_overflow(nv, 8, &b) || __builtin_add_overflow(a, b, &sum))
            error_reply("overflow", "ssm_replay_row_bytes exceeds usize max");
        else printf("{\"ok\":%llu}\n", (unsigned long long)sum);
    } else if (is_text(op, "ring_bytes")) {
        uint64_t f[4], product = 1;
        const char *names[] = {"num_ssm_layers", "row_bytes", "k_ceiling", "mtp_state_slots"};
        for (int i = 0; i < 4; i++)
            if (!as_u64(get(request, names[i]), &f[i])) {
                error_reply("bad-request", "a size must be an integer in [0, 18446744073709551615]");
                return;
            }
        f[2] = f[2] ? f[2] - 1 : 0;
        int overflow = 0;
        if (f[0] && f[1] && f[2] && f[3])
            for (int i = 0; i < 4; i++) overflow |= __builtin_mul_overflow(product, f[i], &product);
        else product = 0;
        if (overflow) error_reply("overflow", "ssm_replay_ring_bytes exceeds usize max");
        else printf("{\"ok\":%llu}\n", (unsigned long long)product);
    } else if (is_text(op, "verify_entry")) {
        struct json *mode = get(request, "mode");
        if (is_text(mode, "snapshot")) puts("{\"ok\":null}");
        else if (is_text(mode, "replay")) error_reply("unsupported", "speculative verify refused in replay mode");
        else error_reply("bad-request", "field 'mode' must be \"snapshot\" or \"replay\"");
    } else if (is_text(op, "trace") || is_text(op, "race")) {
        int list[MAX_EVENTS], returned[MAX_EVENTS];
        static uint64_t spans[MAX_EVENTS][2];
        size_t count;
        if (!events(request, list, &count)) {
            error_reply("bad-request", "field 'events' must be a list of at most 256 set or get events");
            return;
        }
        struct json *asked = get(request, "spans");
        if (is_text(op, "race") && asked && asked->kind != J_BOOL) {
            error_reply("bad-request", "field 'spans' must be true or false");
            return;
        }
        if (is_text(op, "trace")) {
            for (size_t i = 0; i < count; i++) returned[i] = run_event(list[i]);
        } else {
            // Every thread started, then released together by this one.
            static pthread_t threads[MAX_EVENTS];
            static struct racer racers[MAX_EVENTS];
            atomic_int arrived = 0, go = 0;
            for (size_t i = 0; i < count; i++) {
                racers[i] = (struct racer){list[i], 0, &arrived, &go, {0, 0}};
                if (pthread_create(&threads[i], NULL, race_thread, &racers[i]) != 0) {
                    fputs("c-racy-adapter: cannot start a thread\n", stderr);
                    exit(1);
                }
            }
            spin_until(&arrived, (int)count);
            atomic_store_explicit(&go, 1, memory_order_release);
            for (size_t i = 0; i < count; i++) {
                pthread_join(threads[i], NULL);
                returned[i] = racers[i].returned;
                spans[i][0] = racers[i].span[0];
                spans[i][1] = racers[i].span[1];
            }
            if (asked && strcmp(asked->text, "true") == 0) {
                modes_and_spans_reply(returned, (const uint64_t (*)[2])spans, count);
                return;
            }
        }
        modes_reply(returned, count);
    } else {
        error_reply("unknown-op", "unknown op");
    }
}

int main(void) {
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    while ((length = getline(&line, &capacity, stdin)) > 0) {
        if (line[length - 1] == '\n') line[--length] = 0;
        answer(line, (size_t)length);
        fflush(stdout);
    }
    free(line);
    return 0;
}
