/*
 * fgdevice — the reference MQTT device: one simulated relay that verifies
 * every fencing token itself and keeps its own fence in a file, over
 * libmosquitto. Without the agent it speaks protocol v1 for its device id
 * (commands, results, retained state); behind the agent's mqttrelay driver
 * (--relay BASE) it takes Tasmota-like POWER commands that carry the token.
 * Either way it subscribes to its domain's retained grant topic and raises
 * its fence from it. docs/firmware-c.md describes it.
 *
 * usage: fgdevice --id ID --domain DOMAIN --key HEX [--key HEX...] --state FILE
 *                 [--broker HOST:PORT] [--prefix fencegate/v1] [--relay BASE]
 *                 [--log APPLY_LOG] [--client-id ID] [--username U --password P]
 *
 * It exits 0 on SIGTERM or SIGINT, 1 if its fence storage fails (it stops
 * rather than act unfenced), 2 on bad arguments.
 */
#define _POSIX_C_SOURCE 200809L
#include "device.h"
#include "fg_storage_file.h"

#include <errno.h>
#include <fcntl.h>
#include <mosquitto.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_KEYS 8

/* options are the command line. */
typedef struct {
    const char *id, *domain, *state, *broker, *prefix, *relay, *log, *client_id, *username, *password;
    const char *keys[MAX_KEYS];
    int nkeys;
} options;

/* app is everything the program owns; one instance, in main. */
typedef struct {
    options opt;
    fgd_device dev;
    fg_key keys[MAX_KEYS];
    fg_file_storage file;
    struct mosquitto *mosq;
} app;

static volatile sig_atomic_t stopping; /* set by SIGTERM/SIGINT */

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static int usage(const char *why)
{
    fprintf(stderr, "fgdevice: %s\nusage: fgdevice --id ID --domain DOMAIN --key HEX [--key HEX...] --state FILE\n"
                    "  [--broker HOST:PORT] [--prefix P] [--relay BASE] [--log FILE] [--client-id ID]\n"
                    "  [--username U --password P]\n", why);
    return 2;
}

/* parse_args fills o; returns 0 or the exit status of a usage error. */
static int parse_args(int argc, char **argv, options *o)
{
    int i;
    memset(o, 0, sizeof *o);
    o->broker = "127.0.0.1:1883";
    o->prefix = "fencegate/v1";
    for (i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **slot = strcmp(k, "--id") == 0 ? &o->id : strcmp(k, "--domain") == 0 ? &o->domain
                          : strcmp(k, "--state") == 0 ? &o->state : strcmp(k, "--broker") == 0 ? &o->broker
                          : strcmp(k, "--prefix") == 0 ? &o->prefix : strcmp(k, "--relay") == 0 ? &o->relay
                          : strcmp(k, "--log") == 0 ? &o->log : strcmp(k, "--client-id") == 0 ? &o->client_id
                          : strcmp(k, "--username") == 0 ? &o->username
                          : strcmp(k, "--password") == 0 ? &o->password : NULL;
        if (v == NULL) {
            return usage("every flag takes a value");
        }
        if (strcmp(k, "--key") == 0) {
            if (o->nkeys == MAX_KEYS) {
                return usage("at most 8 keys");
            }
            o->keys[o->nkeys++] = v;
        } else if (slot != NULL) {
            *slot = v;
        } else {
            return usage("unknown flag");
        }
    }
    if (o->id == NULL || o->domain == NULL || o->state == NULL || o->nkeys == 0) {
        return usage("--id, --domain, --state and --key are required");
    }
    if (!fg_id_valid(o->id, strlen(o->id)) || !fg_id_valid(o->domain, strlen(o->domain))) {
        return usage("--id and --domain must be 1..128 of [A-Za-z0-9._-]");
    }
    return 0;
}

/* load_keys decodes each raw public key (64 hex digits) and computes its
 * key id, the first 8 bytes of its SHA-256. */
static int load_keys(app *a)
{
    int i;
    for (i = 0; i < a->opt.nkeys; i++) {
        unsigned char sum[crypto_hash_sha256_BYTES];
        size_t n = 0;
        if (sodium_hex2bin(a->keys[i].public_key, FG_PUBLIC_KEY_LEN, a->opt.keys[i], strlen(a->opt.keys[i]), NULL, &n,
                           NULL) != 0 || n != FG_PUBLIC_KEY_LEN) {
            return usage("--key must be 64 hex digits (the raw Ed25519 public key)");
        }
        crypto_hash_sha256(sum, a->keys[i].public_key, FG_PUBLIC_KEY_LEN);
        memcpy(a->keys[i].key_id, sum, FG_KEY_ID_LEN);
    }
    a->dev.ring.keys = a->keys;
    a->dev.ring.count = (size_t)a->opt.nkeys;
    return 0;
}

/* open_fence opens the state file and loads the fence from it. */
static int open_fence(app *a)
{
    fg_storage s;
    fg_status st;
    fgd_device *d = &a->dev;
    if (fg_file_storage_open(&a->file, a->opt.state, &s) != 0) {
        fprintf(stderr, "fgdevice: open %s: %s\n", a->opt.state, strerror(errno));
        return 1;
    }
    if ((st = fg_fence_open(&d->fence, d->domain, strlen(d->domain), &s)) != FG_OK) {
        fprintf(stderr, "fgdevice: fence in %s: %s; refusing to run unfenced\n", a->opt.state, fg_status_name(st));
        return 1;
    }
    if (d->fence.has_lease) {
        fprintf(stderr, "fgdevice: fence of %s at %llu.%llu/%s\n", d->domain, (unsigned long long)d->fence.lease.epoch,
                (unsigned long long)d->fence.lease.seq, d->fence.lease.holder);
    }
    return 0;
}

static void publish(void *ctx, const char *topic, const char *payload, size_t len, int retain)
{
    app *a = ctx;
    int rc = mosquitto_publish(a->mosq, NULL, topic, (int)len, payload, 1, retain != 0);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "fgdevice: publish %s: %s\n", topic, mosquitto_strerror(rc));
    }
}

static int setup(app *a)
{
    fgd_device *d = &a->dev;
    int rc;
    if (sodium_init() < 0) {
        fprintf(stderr, "fgdevice: libsodium failed to initialise\n");
        return 1;
    }
    if ((rc = load_keys(a)) != 0) {
        return rc;
    }
    d->relay = a->opt.relay != NULL;
    snprintf(d->id, sizeof d->id, "%s", a->opt.id);
    snprintf(d->domain, sizeof d->domain, "%s", a->opt.domain);
    snprintf(d->prefix, sizeof d->prefix, "%s", a->opt.prefix);
    snprintf(d->base, sizeof d->base, "%s", d->relay ? a->opt.relay : "");
    snprintf(d->power, sizeof d->power, "OFF");
    d->log_fd = -1;
    d->publish = publish;
    d->publish_ctx = a;
    if (a->opt.log != NULL && (d->log_fd = open(a->opt.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0) {
        fprintf(stderr, "fgdevice: open %s: %s\n", a->opt.log, strerror(errno));
        return 1;
    }
    return open_fence(a);
}

/* on_connect subscribes to the grant topic first: the broker answers in
 * order, so the retained grant is handled before any command. */
static void on_connect(struct mosquitto *m, void *ctx, int rc)
{
    app *a = ctx;
    char topic[FGD_TOPIC_LEN];
    if (rc != 0) {
        fprintf(stderr, "fgdevice: connection refused: %s\n", mosquitto_connack_string(rc));
        return;
    }
    fgd_topic(&a->dev, "grant", topic, sizeof topic);
    mosquitto_subscribe(m, NULL, topic, 1);
    fgd_topic(&a->dev, a->dev.relay ? "cmnd" : "commands", topic, sizeof topic);
    mosquitto_subscribe(m, NULL, topic, 1);
    fgd_on_connect(&a->dev);
    fprintf(stderr, "fgdevice: connected, listening on %s\n", topic);
}

static void on_message(struct mosquitto *m, void *ctx, const struct mosquitto_message *msg)
{
    app *a = ctx;
    char topic[FGD_TOPIC_LEN];
    const char *payload = msg->payload != NULL ? msg->payload : "";
    size_t len = (size_t)msg->payloadlen;
    fgd_topic(&a->dev, "grant", topic, sizeof topic);
    if (strcmp(msg->topic, topic) == 0) {
        fgd_on_grant(&a->dev, payload, len);
    } else if (msg->retain) {
        fprintf(stderr, "fgdevice: ignoring a retained command on %s\n", msg->topic);
    } else if (a->dev.relay) {
        fgd_on_relay(&a->dev, payload, len);
    } else {
        fgd_on_command(&a->dev, payload, len);
    }
    if (a->dev.fatal) {
        mosquitto_disconnect(m);
    }
}

/* connect_mqtt creates the client with its Will and connects, retrying
 * every second until it succeeds or a signal stops the program. */
static int connect_mqtt(app *a)
{
    char host[256], will_topic[FGD_TOPIC_LEN], will[256], id[160];
    const char *colon = strrchr(a->opt.broker, ':');
    int port = colon != NULL ? atoi(colon + 1) : 1883;
    size_t hlen = colon != NULL ? (size_t)(colon - a->opt.broker) : strlen(a->opt.broker);
    if (hlen >= sizeof host) {
        return usage("--broker is too long");
    }
    memcpy(host, a->opt.broker, hlen);
    host[hlen] = '\0';
    snprintf(id, sizeof id, "%s", a->opt.client_id != NULL ? a->opt.client_id : a->opt.id);
    if ((a->mosq = mosquitto_new(id, true, a)) == NULL) {
        fprintf(stderr, "fgdevice: mosquitto_new failed\n");
        return 1;
    }
    fgd_offline_will(&a->dev, will_topic, sizeof will_topic, will, sizeof will);
    mosquitto_will_set(a->mosq, will_topic, (int)strlen(will), will, 1, true);
    if (a->opt.username != NULL) {
        mosquitto_username_pw_set(a->mosq, a->opt.username, a->opt.password);
    }
    mosquitto_connect_callback_set(a->mosq, on_connect);
    mosquitto_message_callback_set(a->mosq, on_message);
    while (!stopping && mosquitto_connect(a->mosq, host, port, 10) != MOSQ_ERR_SUCCESS) {
        sleep(1);
    }
    return 0;
}

/* run serves until a signal or a storage failure. */
static int run(app *a)
{
    while (!stopping && !a->dev.fatal) {
        int rc = mosquitto_loop(a->mosq, 200, 1);
        if (rc != MOSQ_ERR_SUCCESS && !stopping && !a->dev.fatal) {
            sleep(1);
            mosquitto_reconnect(a->mosq);
        }
    }
    mosquitto_disconnect(a->mosq);
    return a->dev.fatal ? 1 : 0;
}

int main(int argc, char **argv)
{
    static app a;
    int rc;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if ((rc = parse_args(argc, argv, &a.opt)) != 0 || (rc = setup(&a)) != 0) {
        return rc;
    }
    mosquitto_lib_init();
    if ((rc = connect_mqtt(&a)) == 0) {
        rc = run(&a);
    }
    mosquitto_destroy(a.mosq);
    mosquitto_lib_cleanup();
    fg_file_storage_close(&a.file);
    return rc;
}
