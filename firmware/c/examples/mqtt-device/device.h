/*
 * device.h — the reference device's logic, apart from MQTT: what it does
 * with a grant, a protocol v1 command, or (behind the agent's mqttrelay
 * driver) a relayed POWER command. It publishes through a callback, so it
 * can be driven by libmosquitto (fgdevice.c) or by anything else.
 */
#ifndef FGD_DEVICE_H
#define FGD_DEVICE_H

#include "fencegate.h"

#include <stddef.h>
#include <stdint.h>

#define FGD_MAX_PAYLOAD 8192 /* longer commands are bad_request */
#define FGD_RECENT 32        /* command ids remembered for retries (RAM only) */
#define FGD_TOPIC_LEN 1100

/* fgd_publish sends payload[0..len) on topic (QoS 1), retained or not. */
typedef void (*fgd_publish)(void *ctx, const char *topic, const char *payload, size_t len, int retain);

/* fgd_recent is a command the device answered after its fence check, kept
 * so that a retry (same id) gets the same answer and is not applied twice. */
typedef struct {
    char id[129];
    uint64_t epoch, seq;
    char op[129];
    uint64_t args_hash;
    const char *status, *code;
    char message[160];
    char output[8]; /* the POWER reported on applied, or "" */
} fgd_recent;

/* fgd_command is one protocol v1 command as decoded. */
typedef struct {
    char id[129];
    char token[FGD_MAX_PAYLOAD];
    size_t token_len;
    char op[129];
    const char *args;
    size_t args_len;
    char reply_to[FGD_TOPIC_LEN];
    int64_t deadline_ms;
    int has_id, has_token, has_op, has_reply_to, has_deadline;
} fgd_command;

/* fgd_device is one device: its identity, keys, fence and simulated output. */
typedef struct {
    int relay;                 /* 0: protocol v1 topics; 1: Tasmota-like topics under base */
    char id[129];
    char domain[129];
    char prefix[256];          /* protocol topic prefix, e.g. fencegate/v1 */
    char base[256];            /* relay mode: topic base, e.g. plant/relays/fw1 */
    fg_keyring ring;
    fg_fence fence;
    int log_fd;                /* apply log (devices/sim lines), or -1 */
    char power[4];             /* the simulated output: "ON" or "OFF" */
    fgd_recent recent[FGD_RECENT];
    unsigned next_recent;
    fgd_publish publish;
    void *publish_ctx;
    int fatal;                 /* the fence storage failed: stop */
    fgd_command cmd;           /* scratch for the command being handled */
    fg_token tok;              /* scratch for its token */
} fgd_device;

/* fgd_topic writes one of the device's topics into out: "commands",
 * "results", "state", "status" (agent status), "grant", or in relay mode
 * "cmnd", "result", "power", "lwt", "fence". */
void fgd_topic(const fgd_device *d, const char *which, char *out, size_t cap);

/* fgd_on_connect announces the device online (status, state or LWT). */
void fgd_on_connect(fgd_device *d);

/* fgd_offline_will writes the Will payload into out and the topic into topic. */
void fgd_offline_will(const fgd_device *d, char *topic, size_t tcap, char *out, size_t cap);

/* fgd_on_grant raises the fence from a retained or live grant announcement. */
void fgd_on_grant(fgd_device *d, const char *payload, size_t len);

/* fgd_on_command handles a protocol v1 command and publishes its result. */
void fgd_on_command(fgd_device *d, const char *payload, size_t len);

/* fgd_on_relay handles a relayed POWER command ({"state","token"[,"id"]}). */
void fgd_on_relay(fgd_device *d, const char *payload, size_t len);

#endif
