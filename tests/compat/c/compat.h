/*
 * Shared harness for the libnats (nats.c) compatibility programs run by
 * tests/acceptance/test_compat_libnats.py against natsd and nats-server.
 *
 * Each program is `./prog <server-url>`. It prints exactly ONE JSON object on one line on stdout:
 * the values it observed ("ok":true, exit 0), or, when a libnats call fails unexpectedly,
 * "ok":false with the failing step ("stage"), the call's natsStatus text, libnats' last error
 * text and the JetStream err_code when there is one (exit 1). The pytest side asserts on the
 * observed values; the programs never decide pass/fail themselves beyond that.
 *
 * Output is built in a fixed buffer with json_* helpers (keys are written by the caller as
 * literals; string values are escaped here).
 */
#ifndef NATSD_COMPAT_H
#define NATSD_COMPAT_H

#include <nats/nats.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char   out_buf[1 << 16];
static size_t out_len;
static const char *stage = "start";

/* Append printf-formatted text to the JSON output buffer. */
static void out_raw(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out_buf + out_len, sizeof(out_buf) - out_len, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof(out_buf) - out_len)
        out_len += (size_t)n;
}

/* Append a JSON string literal (escaped) for `s`, or null. */
static void out_str(const char *s)
{
    if (s == NULL) { out_raw("null"); return; }
    out_raw("\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') out_raw("\\%c", *p);
        else if (*p < 0x20) out_raw("\\u%04x", *p);
        else out_raw("%c", *p);
    }
    out_raw("\"");
}

/* `"key":` followed by a value written by the caller. */
#define KEY(k) out_raw("\"%s\":", k)
#define KV_INT(k, v)  do { KEY(k); out_raw("%lld,", (long long)(v)); } while (0)
#define KV_BOOL(k, v) do { KEY(k); out_raw("%s,", (v) ? "true" : "false"); } while (0)
#define KV_STR(k, v)  do { KEY(k); out_str(v); out_raw(","); } while (0)
/* Record a natsStatus by its libnats name text (e.g. "No Responders Available For Request"). */
#define KV_STATUS(k, s) do { KEY(k); out_str((s) == NATS_OK ? "OK" : natsStatus_GetText(s)); out_raw(","); } while (0)

/* Print the result line and exit. */
static void finish(int ok, natsStatus s, jsErrCode jerr)
{
    if (!ok) {
        const char *last = nats_GetLastError(NULL);
        KV_STR("stage", stage);
        KV_STR("status", natsStatus_GetText(s));
        KV_STR("last_error", last);
        KV_INT("err_code", jerr);
    }
    printf("{%s\"ok\":%s}\n", out_buf, ok ? "true" : "false");
    fflush(stdout);
    exit(ok ? 0 : 1);
}

/* Abort with a failure line when a libnats call that must succeed does not. */
#define MUST(call) do { natsStatus _s = (call); if (_s != NATS_OK) finish(0, _s, 0); } while (0)
#define MUST_JS(call, jerr) do { natsStatus _s = (call); if (_s != NATS_OK) finish(0, _s, (jerr)); } while (0)

/* Connect to argv[1] with reconnects off (a dropped connection must fail the test, not hide). */
static inline natsConnection *compat_connect(int argc, char **argv, const char *name)
{
    natsOptions    *opts = NULL;
    natsConnection *nc   = NULL;
    if (argc < 2) { fprintf(stderr, "usage: %s nats://host:port\n", argv[0]); exit(2); }
    stage = "connect";
    MUST(natsOptions_Create(&opts));
    MUST(natsOptions_SetURL(opts, argv[1]));
    MUST(natsOptions_SetName(opts, name));
    MUST(natsOptions_SetAllowReconnect(opts, false));
    MUST(natsOptions_SetTimeout(opts, 5000));
    MUST(natsConnection_Connect(&nc, opts));
    natsOptions_Destroy(opts);
    return nc;
}

#endif
