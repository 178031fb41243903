/*
 * attack_device — attacks on the reference device's command logic
 * (examples/mqtt-device/device.c), driven without MQTT: the device's
 * publish callback is captured, its fence is kept in memory (tu_mem), its
 * apply log is a scratch file. Tokens are the Go-signed ones of
 * testdata/tokens.txt:
 *
 *   valid-doc-example  press-7 @1767225600000.42 ctl-a  (key of seed 0)
 *   valid-second-key   press-7 @1767225600000.43 ctl-b  (key of seed 1)
 *   valid-case-domain  Press-7 @1767225600000.42 ctl-a  (another domain, same position)
 *
 * Each check is expected to FAIL on the code as it is, for the reason its
 * message gives:
 *
 *   1. foreign-domain retry: a command whose token is of another domain
 *      and whose id, position, op and args equal a command the device
 *      applied is answered "applied" (duplicate) instead of wrong_domain:
 *      the retry lookup (retry()) runs before the domain check and compares
 *      only epoch and seq. Positions of different domains collide as a rule
 *      (one epoch per controller store, a seq counter per domain from 1).
 *   2. a retry re-encoded (whitespace inside args, or args null for absent)
 *      is answered bad_request "id reused for a different command" — the
 *      agent compacts args and treats null as absent (persist
 *      commandDigest), so a retried command does not get its result back
 *      (I4) from the device.
 *   3. the apply log loses an applied command: a line longer than
 *      apply_log's 2048-byte buffer is dropped silently (a 128-byte device
 *      id, a command id of 128 control characters — legal in protocol v1,
 *      6 bytes each once escaped — and 1023 bytes of args), and args of
 *      1024 bytes or more are left out of the line — each time the device
 *      answered "applied" and changed its output.
 *   4. a power command without args applies a zero offset to a NULL
 *      pointer in the JSON reader (jr_init(&r, NULL, 0) from power_arg):
 *      undefined behaviour, which UBSan (attack.sh's sanitizer build)
 *      stops on. It runs last.
 *
 * usage: attack_device <testdata dir> <scratch dir>
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "device.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static fgd_device dev; /* large: static */
static tu_mem mem;
static fg_key keys[TU_MAX_KEYS];
static char result[8192]; /* the last non-retained publication */
static char log_path[4096];

static void capture(void *ctx, const char *topic, const char *payload, size_t len, int retain)
{
    (void)ctx;
    (void)topic;
    if (!retain) {
        snprintf(result, sizeof result, "%.*s", (int)len, payload);
    }
}

/* token loads the wire form of the tokens.txt vector name into out. */
static void token(const char *dir, const char *name, char *out, size_t cap)
{
    static char line[16384];
    static uint8_t wire[4096];
    char n[128], hex[8192];
    FILE *f = tu_open(dir, "tokens.txt");
    while (fgets(line, sizeof line, f) != NULL) {
        long k;
        if (sscanf(line, "tok %127s %8191s", n, hex) == 2 && strcmp(n, name) == 0 &&
            (k = tu_unhex(hex, wire, sizeof wire)) > 0 && (size_t)k < cap) {
            memcpy(out, wire, (size_t)k);
            out[k] = '\0';
            fclose(f);
            return;
        }
    }
    fprintf(stderr, "no token %s in tokens.txt\n", name);
    exit(2);
}

/* setup is a fresh device of domain press-7 with an empty fence. */
static void setup(const char *testdata, const char *scratch)
{
    fg_storage s;
    char path[4096];
    memset(&dev, 0, sizeof dev);
    snprintf(path, sizeof path, "%s/tokens.txt", testdata);
    if (tu_load_ring(path, keys, &dev.ring) != 0) {
        fprintf(stderr, "cannot load the ring from %s\n", path);
        exit(2);
    }
    snprintf(dev.id, sizeof dev.id, "fw1");
    snprintf(dev.domain, sizeof dev.domain, "press-7");
    snprintf(dev.prefix, sizeof dev.prefix, "fencegate/v1");
    snprintf(dev.power, sizeof dev.power, "OFF");
    dev.publish = capture;
    tu_mem_init(&mem, 0xFF, &s);
    if (fg_fence_open(&dev.fence, "press-7", 7, &s) != FG_OK) {
        exit(2);
    }
    snprintf(log_path, sizeof log_path, "%s/attack-applied.log", scratch);
    if ((dev.log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0) {
        perror(log_path);
        exit(2);
    }
}

/* command sends one protocol v1 command; args_member is `,"args":...` or "". */
static const char *command(const char *id_json, const char *tok, const char *op, const char *args_member)
{
    static char payload[FGD_MAX_PAYLOAD + 1];
    snprintf(payload, sizeof payload, "{\"id\":\"%s\",\"token\":\"%s\",\"op\":\"%s\"%s}", id_json, tok, op, args_member);
    result[0] = '\0';
    fgd_on_command(&dev, payload, strlen(payload));
    return result;
}

static int has(const char *s, const char *part)
{
    return strstr(s, part) != NULL;
}

static void attack_foreign_domain_retry(tu_counts *c, const char *testdata, const char *scratch)
{
    static char mine[1100], foreign[1100];
    const char *r;
    setup(testdata, scratch);
    token(testdata, "valid-doc-example", mine, sizeof mine);
    token(testdata, "valid-case-domain", foreign, sizeof foreign);
    r = command("c1", mine, "power", ",\"args\":{\"state\":\"ON\"}");
    tu_check(c, has(r, "\"status\":\"applied\""), "foreign retry: the press-7 command is applied: %s", r);
    r = command("c1", foreign, "power", ",\"args\":{\"state\":\"ON\"}");
    tu_check(c, has(r, "\"code\":\"wrong_domain\"") && !has(r, "\"status\":\"applied\""),
             "foreign retry: a command under a Press-7 token (another domain, same position) with a known id is "
             "answered %s — 'applied' for a command the device never applied, where the agent says wrong_domain",
             r);
}

static void attack_reencoded_retry(tu_counts *c, const char *testdata, const char *scratch)
{
    static char t[1100];
    const char *r;
    setup(testdata, scratch);
    token(testdata, "valid-doc-example", t, sizeof t);
    r = command("r1", t, "power", ",\"args\":{\"state\":\"ON\"}");
    tu_check(c, has(r, "\"status\":\"applied\""), "re-encoded retry: first send applied: %s", r);
    r = command("r1", t, "power", ",\"args\":{ \"state\": \"ON\" }");
    tu_check(c, has(r, "\"status\":\"applied\"") && has(r, "\"duplicate\":true"),
             "re-encoded retry: the same command re-encoded with white space in args gets %s, not its result back (I4)", r);
    r = command("r2", t, "status", "");
    tu_check(c, has(r, "\"status\":\"applied\""), "re-encoded retry: status without args applied: %s", r);
    r = command("r2", t, "status", ",\"args\":null");
    tu_check(c, has(r, "\"status\":\"applied\"") && has(r, "\"duplicate\":true"),
             "re-encoded retry: the retry with args null (absent, for the agent) gets %s, not its result back (I4)", r);
}

/* log_holds reports whether the apply log holds a line with part. */
static int log_holds(const char *part)
{
    static char buf[1 << 16];
    ssize_t n;
    int fd = open(log_path, O_RDONLY);
    if (fd < 0) {
        return 0;
    }
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return strstr(buf, part) != NULL;
}

static void attack_apply_log(tu_counts *c, const char *testdata, const char *scratch)
{
    static char t[1100], id[1024], args[1400];
    const char *r;
    size_t i, n = 0;
    setup(testdata, scratch);
    token(testdata, "valid-doc-example", t, sizeof t);
    /* A device id of 128 bytes, the longest --id takes. */
    memset(dev.id, 'd', 128);
    dev.id[128] = '\0';
    /* 128 bytes of id, each a control character: 768 bytes once escaped. */
    for (i = 0; i < 128; i++) {
        n += (size_t)snprintf(id + n, sizeof id - n, "\\u00%02x", (unsigned)(1 + i % 31));
    }
    /* args of 1023 bytes (the most apply_log still copies): the state and a note. */
    n = (size_t)snprintf(args, sizeof args, ",\"args\":{\"state\":\"ON\",\"note\":\"");
    while (n < 8 + 1023 - 2) {
        args[n++] = 'n';
    }
    memcpy(args + n, "\"}", 3);
    r = command(id, t, "power", args);
    tu_check(c, has(r, "\"status\":\"applied\"") && strcmp(dev.power, "ON") == 0, "apply log: long command applied: %.80s", r);
    tu_check(c, log_holds("\"note\":\"nnnn"),
             "apply log: the device answered applied (output ON) but its apply log has no line for the command (the "
             "line overflowed apply_log's 2048-byte buffer and was dropped without a word)");

    /* args of 1100 bytes: applied, but logged without them. */
    n = (size_t)snprintf(args, sizeof args, ",\"args\":{\"state\":\"OFF\",\"note\":\"");
    while (n < 8 + 1100 - 2) {
        args[n++] = 'm';
    }
    memcpy(args + n, "\"}", 3);
    r = command("long-args", t, "power", args);
    tu_check(c, has(r, "\"status\":\"applied\"") && strcmp(dev.power, "OFF") == 0, "apply log: 1100-byte args applied: %.80s", r);
    tu_check(c, log_holds("\"id\":\"long-args\"") && log_holds("\"state\":\"OFF\""),
             "apply log: the command that switched the output OFF is %s", log_holds("\"id\":\"long-args\"")
                 ? "logged without its args (args of 1024 bytes or more are left out): the log does not say what was applied"
                 : "not logged");
}

static void attack_no_args(tu_counts *c, const char *testdata, const char *scratch)
{
    static char t[1100];
    const char *r;
    setup(testdata, scratch);
    token(testdata, "valid-doc-example", t, sizeof t);
    r = command("n1", t, "power", ""); /* UBSan stops here: NULL + 0 in jr_init */
    tu_check(c, has(r, "\"code\":\"device_error\""), "no args: power without args answered %s", r);
}

int main(int argc, char **argv)
{
    tu_counts c = {0, 0, 0};
    const char *testdata = argc > 1 ? argv[1] : "testdata", *scratch = argc > 2 ? argv[2] : ".";
    attack_foreign_domain_retry(&c, testdata, scratch);
    attack_reencoded_retry(&c, testdata, scratch);
    attack_apply_log(&c, testdata, scratch);
    fflush(stdout); /* UBSan aborts in the next one */
    attack_no_args(&c, testdata, scratch);
    return tu_finish(&c);
}
