/*
 * device.c — see device.h. The order of a command's checks follows the
 * agent (docs/agent.md): token, retry of a known id, domain, op, fence
 * (made durable before anything is applied), deadline, args, apply.
 */
#define _POSIX_C_SOURCE 200809L
#include "device.h"
#include "json.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* rfc3339 writes the current UTC time with milliseconds. */
static void rfc3339(char *out, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%03dZ", (int)(ts.tv_nsec / 1000000) % 1000);
}

void fgd_topic(const fgd_device *d, const char *which, char *out, size_t cap)
{
    if (strcmp(which, "status") == 0) {
        snprintf(out, cap, "%s/agents/%s/status", d->prefix, d->id);
    } else if (strcmp(which, "grant") == 0) {
        snprintf(out, cap, "%s/leases/%s/grant", d->prefix, d->domain);
    } else if (strcmp(which, "cmnd") == 0) {
        snprintf(out, cap, "%s/cmnd/POWER", d->base);
    } else if (strcmp(which, "result") == 0) {
        snprintf(out, cap, "%s/stat/RESULT", d->base);
    } else if (strcmp(which, "power") == 0) {
        snprintf(out, cap, "%s/stat/POWER", d->base);
    } else if (strcmp(which, "lwt") == 0) {
        snprintf(out, cap, "%s/tele/LWT", d->base);
    } else if (strcmp(which, "fence") == 0) {
        snprintf(out, cap, "%s/stat/FENCE", d->base);
    } else {
        snprintf(out, cap, "%s/devices/%s/%s", d->prefix, d->id, which);
    }
}

static void send(fgd_device *d, const char *topic, const jw *w, int retain)
{
    if (!w->err) {
        d->publish(d->publish_ctx, topic, w->buf, w->len, retain);
    }
}

/* fence_json appends the fence object {"epoch","seq","holder"}. */
static void fence_json(jw *w, const fg_fence *f)
{
    jw_raw(w, "{\"epoch\":");
    jw_u64(w, f->lease.epoch);
    jw_raw(w, ",\"seq\":");
    jw_u64(w, f->lease.seq);
    jw_raw(w, ",\"holder\":");
    jw_str(w, f->lease.holder, f->lease.holder_len);
    jw_raw(w, "}");
}

/* publish_fence announces the fence: the device state (protocol mode) or
 * <base>/stat/FENCE (relay mode), both retained. */
static void publish_fence(fgd_device *d)
{
    char buf[1024], at[40], topic[FGD_TOPIC_LEN];
    jw w;
    rfc3339(at, sizeof at);
    jw_init(&w, buf, sizeof buf);
    if (d->relay) {
        fgd_topic(d, "fence", topic, sizeof topic);
        jw_raw(&w, "{\"domain\":");
        jw_cstr(&w, d->domain);
        if (d->fence.has_lease) {
            jw_raw(&w, ",\"fence\":");
            fence_json(&w, &d->fence);
            jw_raw(&w, ",\"issued_at\":");
            jw_i64(&w, d->fence.lease.issued_at);
        }
    } else {
        fgd_topic(d, "state", topic, sizeof topic);
        jw_raw(&w, "{\"device\":");
        jw_cstr(&w, d->id);
        jw_raw(&w, ",\"domain\":");
        jw_cstr(&w, d->domain);
        jw_raw(&w, ",\"agent\":");
        jw_cstr(&w, d->id);
        jw_raw(&w, ",\"online\":true");
        if (d->fence.has_lease) {
            jw_raw(&w, ",\"fence\":");
            fence_json(&w, &d->fence);
        }
    }
    jw_raw(&w, ",\"updated_at\":");
    jw_cstr(&w, at);
    jw_raw(&w, "}");
    send(d, topic, &w, 1);
}

void fgd_offline_will(const fgd_device *d, char *topic, size_t tcap, char *out, size_t cap)
{
    if (d->relay) {
        fgd_topic(d, "lwt", topic, tcap);
        snprintf(out, cap, "Offline");
    } else {
        fgd_topic(d, "status", topic, tcap);
        snprintf(out, cap, "{\"online\":false,\"version\":\"fgdevice/1\",\"at\":\"\"}");
    }
}

void fgd_on_connect(fgd_device *d)
{
    char topic[FGD_TOPIC_LEN], buf[256], at[40];
    jw w;
    jw_init(&w, buf, sizeof buf);
    if (d->relay) {
        fgd_topic(d, "lwt", topic, sizeof topic);
        jw_raw(&w, "Online");
    } else {
        rfc3339(at, sizeof at);
        fgd_topic(d, "status", topic, sizeof topic);
        jw_raw(&w, "{\"online\":true,\"version\":\"fgdevice/1\",\"at\":");
        jw_cstr(&w, at);
        jw_raw(&w, "}");
    }
    send(d, topic, &w, 1);
    publish_fence(d);
}

/* raise raises the fence to d->tok; returns the check, with d->fatal set
 * (and FG_CHECK_STALE returned) if the storage failed. */
static fg_check raise(fgd_device *d)
{
    fg_check outcome = FG_CHECK_STALE;
    if (fg_fence_raise(&d->fence, &d->tok, &outcome) != FG_OK) {
        fprintf(stderr, "fgdevice: the fence storage failed; stopping\n");
        d->fatal = 1;
        return FG_CHECK_STALE;
    }
    if (outcome == FG_CHECK_NEWER) {
        fprintf(stderr, "fgdevice: fence raised to %s@%llu.%llu/%s\n", d->domain,
                (unsigned long long)d->fence.lease.epoch, (unsigned long long)d->fence.lease.seq, d->fence.lease.holder);
        publish_fence(d);
    }
    return outcome;
}

void fgd_on_grant(fgd_device *d, const char *payload, size_t len)
{
    char key[32];
    int first = 1;
    size_t n = 0;
    fg_status st;
    jr r;
    if (len == 0) {
        return; /* a cleared retained grant */
    }
    jr_init(&r, payload, len);
    d->cmd.token_len = 0;
    while (jr_object_next(&r, &first, key, sizeof key)) {
        if (strcmp(key, "token") == 0) {
            jr_string(&r, d->cmd.token, sizeof d->cmd.token, &n);
            d->cmd.token_len = n;
        } else {
            const char *s;
            jr_skip(&r, &s, &n);
        }
    }
    jr_end(&r);
    if (r.err || d->cmd.token_len == 0) {
        fprintf(stderr, "fgdevice: ignoring a malformed grant\n");
        return;
    }
    if ((st = fg_token_verify(&d->ring, d->cmd.token, d->cmd.token_len, &d->tok)) != FG_OK) {
        fprintf(stderr, "fgdevice: ignoring a grant whose token fails: %s\n", fg_status_name(st));
        return;
    }
    if (fg_fence_check(&d->fence, &d->tok) == FG_CHECK_WRONG_DOMAIN) {
        fprintf(stderr, "fgdevice: ignoring a grant of domain %s\n", d->tok.domain);
        return;
    }
    raise(d);
}

/* answer is the result of one command. */
typedef struct {
    const char *status, *code, *message, *output;
    int duplicate;
} answer;

static void publish_result(fgd_device *d, const char *topic, const char *id, const answer *a)
{
    char buf[2048], at[40];
    jw w;
    rfc3339(at, sizeof at);
    jw_init(&w, buf, sizeof buf);
    jw_raw(&w, "{\"id\":");
    jw_cstr(&w, id);
    jw_raw(&w, ",\"device\":");
    jw_cstr(&w, d->id);
    jw_raw(&w, ",\"status\":");
    jw_cstr(&w, a->status);
    jw_raw(&w, ",\"code\":");
    jw_cstr(&w, a->code);
    if (a->message != NULL && a->message[0] != '\0') {
        jw_raw(&w, ",\"message\":");
        jw_cstr(&w, a->message);
    }
    jw_raw(&w, a->duplicate ? ",\"duplicate\":true" : ",\"duplicate\":false");
    if (d->fence.has_lease) {
        jw_raw(&w, ",\"fence\":");
        fence_json(&w, &d->fence);
    }
    if (a->output != NULL && a->output[0] != '\0') {
        jw_raw(&w, ",\"output\":{\"POWER\":");
        jw_cstr(&w, a->output);
        jw_raw(&w, "}");
    }
    jw_raw(&w, ",\"at\":");
    jw_cstr(&w, at);
    jw_raw(&w, "}");
    send(d, topic, &w, 0);
}

static void reject(fgd_device *d, const char *topic, const char *id, const char *code, const char *message)
{
    answer a = {"rejected", NULL, NULL, NULL, 0};
    a.code = code;
    a.message = message;
    publish_result(d, topic, id, &a);
}

/* member decodes one member of a command into c: 1, or 0 with an error
 * message in *why (an unknown key, a wrong type). */
static int member(jr *r, const char *key, fgd_command *c, const char **why)
{
    size_t n;
    if (strcmp(key, "id") == 0) {
        jr_string(r, c->id, sizeof c->id, &n);
        c->has_id = !r->err && n > 0;
    } else if (strcmp(key, "token") == 0) {
        jr_string(r, c->token, sizeof c->token, &c->token_len);
        c->has_token = !r->err;
    } else if (strcmp(key, "op") == 0) {
        jr_string(r, c->op, sizeof c->op, &n);
        c->has_op = !r->err && n > 0;
    } else if (strcmp(key, "args") == 0) {
        if (jr_peek(r) != '{' && jr_peek(r) != 'n') {
            *why = "args must be an object";
            return 0;
        }
        jr_skip(r, &c->args, &c->args_len);
    } else if (strcmp(key, "reply_to") == 0) {
        jr_string(r, c->reply_to, sizeof c->reply_to, &n);
        c->has_reply_to = !r->err;
    } else if (strcmp(key, "deadline_ms") == 0) {
        jr_int(r, &c->deadline_ms);
        c->has_deadline = !r->err;
    } else {
        *why = "unknown field";
        return 0;
    }
    *why = "malformed or mistyped field";
    return !r->err;
}

/* salvage_id sets id to the "id" string of a payload that failed strict
 * decoding, if the payload is a JSON object with one (as protocol.Salvage
 * does for the agent), else to "": the rejection still gets an answer. */
static void salvage_id(const char *payload, size_t len, char *id, size_t cap)
{
    char key[32], tmp[129];
    int first = 1, found = 0;
    size_t n;
    jr r;
    jr_init(&r, payload, len > FGD_MAX_PAYLOAD ? 0 : len);
    while (jr_object_next(&r, &first, key, sizeof key)) {
        if (strcmp(key, "id") == 0 && jr_peek(&r) == '"') {
            jr_string(&r, tmp, sizeof tmp, &n);
            found = !r.err;
        } else {
            const char *v;
            jr_skip(&r, &v, &n);
        }
    }
    jr_end(&r);
    snprintf(id, cap, "%s", found && !r.err ? tmp : "");
}

/* parse_command decodes payload into c; it returns an error message, or
 * NULL. */
static const char *parse_command(const char *payload, size_t len, fgd_command *c)
{
    char key[32];
    int first = 1;
    jr r;
    c->id[0] = c->op[0] = c->reply_to[0] = '\0';
    c->token_len = 0;
    c->args = NULL;
    c->args_len = 0;
    c->deadline_ms = 0;
    c->has_id = c->has_token = c->has_op = c->has_reply_to = c->has_deadline = 0;
    if (len > FGD_MAX_PAYLOAD) {
        return "payload over 8192 bytes";
    }
    jr_init(&r, payload, len);
    while (jr_object_next(&r, &first, key, sizeof key)) {
        const char *why = NULL;
        if (!member(&r, key, c, &why)) {
            return why;
        }
    }
    jr_end(&r);
    if (r.err) {
        return "malformed JSON";
    }
    if (!c->has_id || !c->has_token || !c->has_op) {
        return "id, token and op are required";
    }
    return NULL;
}

/* topic_text reports whether t is well-formed UTF-8 without control
 * characters (C0, DEL, C1): a broker drops a client that publishes any
 * other topic, so a reply there would never arrive. */
static int topic_text(const char *t)
{
    const unsigned char *p = (const unsigned char *)t;
    while (*p != 0) {
        unsigned c = *p, n, i;
        uint32_t cp;
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f) {
                return 0;
            }
            p++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1, cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2, cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3, cp = c & 0x07;
        } else {
            return 0;
        }
        for (i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80) {
                return 0;
            }
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f)) {
            return 0;
        }
        p += n + 1;
    }
    return 1;
}

/* reply_ok applies the reply-topic rule: under <prefix>/replies/, no
 * wildcards, not too long, well-formed UTF-8 without control characters. */
static int reply_ok(const fgd_device *d, const char *t)
{
    char ns[300];
    size_t n = (size_t)snprintf(ns, sizeof ns, "%s/replies/", d->prefix);
    return strlen(t) <= 1024 && strncmp(t, ns, n) == 0 && strlen(t) > n && strpbrk(t, "+#") == NULL &&
           topic_text(t);
}

/* args_hash hashes args as the agent compares them: white space outside
 * strings dropped, and null the same as no args. (FNV-1a: the ids it
 * tells apart are a device's recent commands, not an adversary's choice.) */
static uint64_t args_hash(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    size_t i;
    int in_string = 0, escaped = 0;
    if (n == 4 && memcmp(p, "null", 4) == 0) {
        n = 0;
    }
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (in_string) {
            in_string = escaped || c != '"';
            escaped = !escaped && c == '\\';
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        } else {
            in_string = c == '"';
        }
        h = (h ^ c) * 1099511628211ull;
    }
    return h;
}

static fgd_recent *find_recent(fgd_device *d, const char *id)
{
    unsigned i;
    for (i = 0; i < FGD_RECENT; i++) {
        if (d->recent[i].id[0] != '\0' && strcmp(d->recent[i].id, id) == 0) {
            return &d->recent[i];
        }
    }
    return NULL;
}

static void remember(fgd_device *d, const answer *a)
{
    fgd_recent *e = &d->recent[d->next_recent];
    const fgd_command *c = &d->cmd;
    d->next_recent = (d->next_recent + 1) % FGD_RECENT;
    snprintf(e->id, sizeof e->id, "%s", c->id);
    snprintf(e->op, sizeof e->op, "%s", c->op);
    e->epoch = d->tok.epoch;
    e->seq = d->tok.seq;
    e->args_hash = args_hash(c->args, c->args_len);
    e->status = a->status;
    e->code = a->code;
    snprintf(e->message, sizeof e->message, "%s", a->message != NULL ? a->message : "");
    snprintf(e->output, sizeof e->output, "%s", a->output != NULL ? a->output : "");
}

/* retry answers a command whose id is known: the recorded answer for the
 * same command, bad_request for another. Returns 0 if the id is new. */
static int retry(fgd_device *d, const char *topic)
{
    const fgd_command *c = &d->cmd;
    fgd_recent *e = find_recent(d, c->id);
    answer a = {NULL, NULL, NULL, NULL, 1};
    if (e == NULL) {
        return 0;
    }
    if (e->epoch != d->tok.epoch || e->seq != d->tok.seq || strcmp(e->op, c->op) != 0 ||
        e->args_hash != args_hash(c->args, c->args_len)) {
        reject(d, topic, c->id, "bad_request", "id reused for a different command");
        return 1;
    }
    a.status = e->status;
    a.code = e->code;
    a.message = e->message;
    a.output = e->output;
    publish_result(d, topic, c->id, &a);
    return 1;
}

/* apply_log appends a devices/sim apply-log line with one write(2). */
static void apply_log(fgd_device *d, const char *id, const char *op, const char *args, size_t args_len)
{
    /* Room for the largest command (its args, ids escaped ×6) and the rest. */
    char buf[FGD_MAX_PAYLOAD + 6 * 2 * 129 + 1024], at[40];
    jw w;
    if (d->log_fd < 0) {
        return;
    }
    rfc3339(at, sizeof at);
    jw_init(&w, buf, sizeof buf);
    jw_raw(&w, "{\"device\":");
    jw_cstr(&w, d->id);
    jw_raw(&w, ",\"id\":");
    jw_cstr(&w, id);
    jw_raw(&w, ",\"op\":");
    jw_cstr(&w, op);
    jw_raw(&w, ",\"domain\":");
    jw_cstr(&w, d->domain);
    jw_raw(&w, ",\"epoch\":");
    jw_u64(&w, d->tok.epoch);
    jw_raw(&w, ",\"seq\":");
    jw_u64(&w, d->tok.seq);
    jw_raw(&w, ",\"holder\":");
    jw_cstr(&w, d->tok.holder);
    if (args != NULL && args_len > 0) {
        char raw[FGD_MAX_PAYLOAD + 1];
        size_t n = args_len < FGD_MAX_PAYLOAD ? args_len : FGD_MAX_PAYLOAD;
        memcpy(raw, args, n);
        raw[n] = '\0';
        jw_raw(&w, ",\"args\":");
        jw_raw(&w, raw);
    }
    jw_raw(&w, ",\"started\":");
    jw_cstr(&w, at);
    jw_raw(&w, ",\"at\":");
    jw_cstr(&w, at);
    jw_raw(&w, "}\n");
    if (w.err) {
        fprintf(stderr, "fgdevice: apply log line of %s too long; not logged\n", id);
    } else if (write(d->log_fd, w.buf, w.len) != (ssize_t)w.len) {
        fprintf(stderr, "fgdevice: apply log write failed\n");
    }
}

/* power_arg reads {"state": "ON"|"OFF"} from args into out. */
static int power_arg(const char *args, size_t len, char out[4])
{
    char key[32], v[8];
    int first = 1, found = 0;
    size_t n;
    jr r;
    jr_init(&r, args, len);
    while (jr_object_next(&r, &first, key, sizeof key)) {
        if (strcmp(key, "state") == 0) {
            jr_string(&r, v, sizeof v, &n);
            found = !r.err && (strcmp(v, "ON") == 0 || strcmp(v, "OFF") == 0);
        } else {
            const char *s;
            jr_skip(&r, &s, &n);
        }
    }
    if (found) {
        memcpy(out, v, strlen(v) + 1); /* "ON" or "OFF" */
    }
    return found && !r.err;
}

/* fence_verdict answers a command whose token was verified: wrong
 * domain, stale, conflict, or (NULL) go on. */
static const char *fence_verdict(fgd_device *d, const char **message)
{
    if (fg_fence_check(&d->fence, &d->tok) == FG_CHECK_WRONG_DOMAIN) {
        *message = "the token's domain is not the device's";
        return "wrong_domain";
    }
    switch (raise(d)) {
    case FG_CHECK_STALE:
        *message = d->fatal ? "the device's fence store failed" : "a newer lease holds this device";
        return d->fatal ? "internal" : "stale_token";
    case FG_CHECK_CONFLICT:
        *message = "another lease at the fence's position";
        return "invalid_token";
    default:
        return NULL;
    }
}

/* execute applies the command whose token passed the fence. */
static void execute(fgd_device *d, const char *topic)
{
    const fgd_command *c = &d->cmd;
    answer a = {"applied", "ok", NULL, NULL, 0};
    char state[4];
    if (c->has_deadline && now_ms() > c->deadline_ms) {
        a.status = "rejected", a.code = "expired", a.message = "deadline_ms passed before the device was free";
    } else if (strcmp(c->op, "power") == 0 && !power_arg(c->args, c->args_len, state)) {
        a.status = "failed", a.code = "device_error", a.message = "args must be {\"state\": \"ON\" or \"OFF\"}";
    } else {
        if (strcmp(c->op, "power") == 0) {
            memcpy(d->power, state, sizeof state);
        }
        apply_log(d, c->id, c->op, c->args, c->args_len);
        a.output = d->power;
    }
    remember(d, &a);
    publish_result(d, topic, c->id, &a);
}

void fgd_on_command(fgd_device *d, const char *payload, size_t len)
{
    char topic[FGD_TOPIC_LEN], msg[96];
    fgd_command *c = &d->cmd;
    const char *err = parse_command(payload, len, c), *code, *message = NULL;
    fg_status st;
    fgd_topic(d, "results", topic, sizeof topic);
    if (err != NULL) {
        salvage_id(payload, len, c->id, sizeof c->id);
        reject(d, topic, c->id, "bad_request", err);
        return;
    }
    if (c->has_reply_to && !reply_ok(d, c->reply_to)) {
        reject(d, topic, c->id, "bad_request", "reply_to is not a topic in the reply namespace");
        return;
    }
    if (c->has_reply_to) {
        snprintf(topic, sizeof topic, "%s", c->reply_to);
    }
    if ((st = fg_token_verify(&d->ring, c->token, c->token_len, &d->tok)) != FG_OK) {
        snprintf(msg, sizeof msg, "token rejected: %s", fg_status_name(st));
        reject(d, topic, c->id, "invalid_token", msg);
        return;
    }
    if (fg_fence_check(&d->fence, &d->tok) == FG_CHECK_WRONG_DOMAIN) {
        /* Before the retry lookup: ids are per device, and another
         * domain's token at the same position is no retry of ours. */
        reject(d, topic, c->id, "wrong_domain", "the token's domain is not the device's");
        return;
    }
    if (retry(d, topic)) {
        return;
    }
    if (strcmp(c->op, "power") != 0 && strcmp(c->op, "status") != 0) {
        reject(d, topic, c->id, "unknown_op", "ops are power and status");
        return;
    }
    if ((code = fence_verdict(d, &message)) != NULL) {
        answer a = {"rejected", NULL, NULL, NULL, 0};
        a.status = d->fatal ? "failed" : "rejected", a.code = code, a.message = message;
        publish_result(d, topic, c->id, &a);
        return;
    }
    execute(d, topic);
}

/* relay_reply publishes a relayed command's rejection on <base>/stat/RESULT
 * without a POWER field, so the agent's confirmation rule skips it. */
static void relay_reply(fgd_device *d, const char *code, const char *reason)
{
    char topic[FGD_TOPIC_LEN], buf[1024];
    jw w;
    fgd_topic(d, "result", topic, sizeof topic);
    jw_init(&w, buf, sizeof buf);
    jw_raw(&w, "{\"Error\":");
    jw_cstr(&w, code);
    jw_raw(&w, ",\"Reason\":");
    jw_cstr(&w, reason);
    if (d->fence.has_lease) {
        jw_raw(&w, ",\"Fence\":");
        fence_json(&w, &d->fence);
    }
    jw_raw(&w, "}");
    send(d, topic, &w, 0);
}

/* parse_relay decodes {"state": "ON"|"OFF", "token": "...", "id"?}. */
static int parse_relay(fgd_device *d, const char *payload, size_t len, char state[4])
{
    char key[32], v[8];
    int first = 1, has_state = 0;
    size_t n;
    jr r;
    fgd_command *c = &d->cmd;
    c->token_len = 0;
    c->id[0] = '\0';
    c->has_token = 0;
    jr_init(&r, payload, len);
    while (jr_object_next(&r, &first, key, sizeof key)) {
        if (strcmp(key, "state") == 0) {
            jr_string(&r, v, sizeof v, &n);
            has_state = !r.err && (strcmp(v, "ON") == 0 || strcmp(v, "OFF") == 0);
        } else if (strcmp(key, "token") == 0) {
            jr_string(&r, c->token, sizeof c->token, &c->token_len);
            c->has_token = !r.err;
        } else if (strcmp(key, "id") == 0) {
            jr_string(&r, c->id, sizeof c->id, &n);
        } else {
            r.err = 1;
        }
    }
    jr_end(&r);
    if (has_state) {
        memcpy(state, v, strlen(v) + 1); /* "ON" or "OFF" */
    }
    return !r.err && has_state && c->has_token && len <= FGD_MAX_PAYLOAD;
}

void fgd_on_relay(fgd_device *d, const char *payload, size_t len)
{
    char state[4], topic[FGD_TOPIC_LEN], buf[64], args[32];
    const char *code, *message = NULL;
    fg_status st;
    jw w;
    if (!parse_relay(d, payload, len, state)) {
        relay_reply(d, "bad_request", "want {\"state\":\"ON\"|\"OFF\",\"token\":\"fg1...\"}");
        return;
    }
    if ((st = fg_token_verify(&d->ring, d->cmd.token, d->cmd.token_len, &d->tok)) != FG_OK) {
        relay_reply(d, "invalid_token", fg_status_name(st));
        return;
    }
    if ((code = fence_verdict(d, &message)) != NULL) {
        relay_reply(d, code, message);
        return;
    }
    memcpy(d->power, state, sizeof state);
    snprintf(args, sizeof args, "{\"state\":\"%s\"}", state);
    apply_log(d, d->cmd.id, "power", args, strlen(args));
    fgd_topic(d, "result", topic, sizeof topic);
    jw_init(&w, buf, sizeof buf);
    jw_raw(&w, "{\"POWER\":");
    jw_cstr(&w, d->power);
    jw_raw(&w, "}");
    send(d, topic, &w, 0);
    fgd_topic(d, "power", topic, sizeof topic);
    jw_init(&w, buf, sizeof buf);
    jw_raw(&w, d->power);
    send(d, topic, &w, 1);
}
