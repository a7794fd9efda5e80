// jsmany: JetStream publishes over many distinct subjects (issue 31), against the C client (libnats), so that
// natsd and nats-server are driven by the same client that is not itself the bottleneck.
//
// Build: scripts/build-jsbench.sh (beside jsbench)
// Usage: jsmany URL WORKLOAD [N] [SIZE] [SUBJECTS]
//   WORKLOAD: jspub1k  async JetStream publish (4,000 in flight, one connection) into a file stream whose
//                      subject is bench.js.>, cycling over SUBJECTS (default 1,000) subjects bench.js.<i>;
//                      acked msgs/s
//             plgd     the seed's shape: SUBJECTS devices (default 10,000) publish events plgd.<device>.<event>
//                      (5 event types, device and event drawn pseudo-randomly) asynchronously with acks into one
//                      file stream (plgd.>), while one durable push consumer per event type (filter
//                      plgd.*.<event>, explicit ack, on its own connection) consumes and acks;
//                      acked publishes/s, consumed msgs/s (until every consumer has everything), and the lag
//                      (messages stored but not yet delivered, over all consumers) when the last PubAck arrives
// Output: one line of key=value pairs with rate= among them, e.g. "workload=jspub1k n=300000 size=128 rate=123456"
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHK(x) do { natsStatus _s = (x); if (_s != NATS_OK) { \
    fprintf(stderr, "jsmany: %s failed: %s (jerr=%d)\n", #x, natsStatus_GetText(_s), (int)jerr); exit(1); } } while (0)

#define EVENTS 5
static const char *events[EVENTS] = {"registered", "online", "offline", "resources", "metadata"};
static jsErrCode jerr = 0;
static int64_t consumed[EVENTS];

static void addStream(jsCtx *js, const char *name, const char *subj) {
    jsStreamConfig sc; jsStreamInfo *si = NULL; const char *subjs[1] = {subj};
    js_DeleteStream(js, name, NULL, NULL);
    jsStreamConfig_Init(&sc); sc.Name = name; sc.Subjects = subjs; sc.SubjectsLen = 1; sc.Storage = js_FileStorage;
    CHK(js_AddStream(&si, js, &sc, NULL, &jerr));
    jsStreamInfo_Destroy(si);
}

static void onEvent(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure) {
    (void)nc; (void)sub;
    natsMsg_Ack(msg, NULL);
    __atomic_add_fetch(&consumed[(intptr_t)closure], 1, __ATOMIC_RELAXED);
    natsMsg_Destroy(msg);
}

static int64_t consumedTotal(void) {
    int64_t t = 0;
    for (int e = 0; e < EVENTS; e++) t += __atomic_load_n(&consumed[e], __ATOMIC_RELAXED);
    return t;
}

static void plgd(const char *url, jsCtx *js, int n, int devices, const char *data, int size) {
    natsConnection *cc[EVENTS] = {0}; jsCtx *cjs[EVENTS] = {0}; natsSubscription *subs[EVENTS] = {0};
    int64_t per[EVENTS] = {0}; char subj[96], filter[64], durable[32];
    unsigned int r = 12345;
    addStream(js, "PLGD", "plgd.>");
    for (int e = 0; e < EVENTS; e++) {
        jsSubOptions so; jsOptions jo;
        CHK(natsConnection_ConnectTo(&cc[e], url));
        jsOptions_Init(&jo);
        CHK(natsConnection_JetStream(&cjs[e], cc[e], &jo));
        snprintf(filter, sizeof filter, "plgd.*.%s", events[e]);
        snprintf(durable, sizeof durable, "EV_%s", events[e]);
        jsSubOptions_Init(&so); so.Config.Durable = durable; so.Config.AckPolicy = js_AckExplicit;
        so.Config.MaxAckPending = 20000;
        CHK(js_Subscribe(&subs[e], cjs[e], filter, onEvent, (void *)(intptr_t)e, &jo, &so, &jerr));
        natsSubscription_SetPendingLimits(subs[e], -1, -1);
    }
    int64_t t0 = nats_NowInNanoSeconds();
    for (int i = 0; i < n; i++) {
        r = r * 1103515245u + 12345u; int dev = (r >> 8) % devices;
        r = r * 1103515245u + 12345u; int ev = (r >> 8) % EVENTS;
        per[ev]++;
        snprintf(subj, sizeof subj, "plgd.d%05d.%s", dev, events[ev]);
        CHK(js_PublishAsync(js, subj, data, size, NULL));
    }
    jsPubOptions po; jsPubOptions_Init(&po); po.MaxWait = 120000;
    CHK(js_PublishAsyncComplete(js, &po));
    int64_t t1 = nats_NowInNanoSeconds();
    int64_t lag = n - consumedTotal();
    int64_t deadline = nats_Now() + 120000;
    while (consumedTotal() < n && nats_Now() < deadline) nats_Sleep(1);
    int64_t t2 = nats_NowInNanoSeconds(), got = consumedTotal();
    if (got < n) fprintf(stderr, "jsmany: only %lld of %d consumed\n", (long long)got, n);
    for (int e = 0; e < EVENTS; e++) {
        if (consumed[e] != per[e]) fprintf(stderr, "jsmany: %s consumed %lld of %lld\n", events[e],
                                           (long long)consumed[e], (long long)per[e]);
        natsSubscription_Unsubscribe(subs[e]); natsSubscription_Destroy(subs[e]);
        jsCtx_Destroy(cjs[e]); natsConnection_Destroy(cc[e]);
    }
    printf("workload=plgd n=%d size=%d devices=%d events=%d lag_at_last_ack=%lld consume_rate=%.0f rate=%.0f\n",
           n, size, devices, EVENTS, (long long)lag, got / ((t2 - t0) / 1e9), n / ((t1 - t0) / 1e9));
    js_DeleteStream(js, "PLGD", NULL, NULL);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: jsmany URL jspub1k|plgd [N] [SIZE] [SUBJECTS]\n"); return 2; }
    const char *url = argv[1], *w = argv[2];
    int n = argc > 3 ? atoi(argv[3]) : 300000, size = argc > 4 ? atoi(argv[4]) : 128;
    int subjects = argc > 5 ? atoi(argv[5]) : (!strcmp(w, "plgd") ? 10000 : 1000);
    char *data = malloc(size); memset(data, 'x', size);
    natsConnection *nc = NULL; jsCtx *js = NULL; jsOptions jo;
    CHK(natsConnection_ConnectTo(&nc, url));
    // StallWait: how long a publish waits for room among those in flight (libnats default 200 ms, after which
    // it fails with Timeout); a loaded machine pauses longer than that.
    jsOptions_Init(&jo); jo.PublishAsync.MaxPending = 4000; jo.PublishAsync.StallWait = 30000; jo.Wait = 10000;
    CHK(natsConnection_JetStream(&js, nc, &jo));
    if (!strcmp(w, "jspub1k")) {
        char **subj = malloc(sizeof(char *) * subjects);
        for (int k = 0; k < subjects; k++) { subj[k] = malloc(32); snprintf(subj[k], 32, "bench.js.%d", k); }
        addStream(js, "BENCH", "bench.js.>");
        int64_t t0 = nats_NowInNanoSeconds();
        for (int i = 0; i < n; i++) CHK(js_PublishAsync(js, subj[i % subjects], data, size, NULL));
        jsPubOptions po; jsPubOptions_Init(&po); po.MaxWait = 120000;
        CHK(js_PublishAsyncComplete(js, &po));
        int64_t t1 = nats_NowInNanoSeconds();
        printf("workload=jspub1k n=%d size=%d subjects=%d rate=%.0f\n", n, size, subjects, n / ((t1 - t0) / 1e9));
        js_DeleteStream(js, "BENCH", NULL, NULL);
    } else if (!strcmp(w, "plgd")) {
        plgd(url, js, n, subjects, data, size);
    } else { fprintf(stderr, "jsmany: unknown workload %s\n", w); return 2; }
    jsCtx_Destroy(js); natsConnection_Destroy(nc); nats_Close();
    return 0;
}
