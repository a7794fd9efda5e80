// scalebench: the client side of bench/bench_scaling.py (issue 31's scaling table), written against the C client
// (libnats) so that the load generator is not the bottleneck and natsd and nats-server are driven by the same
// client. The driver creates streams and consumers itself; this program only publishes, fetches and
// requests.
//
// Build: scripts/build-scalebench.sh -> bench/bin/scalebench
// Usage:
//   scalebench URL pub PREFIX N NSUBJ SIZE INFLIGHT LATN
//       async JetStream publish of N messages with acks (at most INFLIGHT unacknowledged) to
//       PREFIX.<i % NSUBJ>, then LATN synchronous publishes to PREFIX.0 (each waits for its PubAck):
//       rate = acked msgs/s of the async phase; p50_us/p99_us of the synchronous round trips
//   scalebench URL fetch STREAM DURABLE N
//       pull-fetch N messages from an existing durable consumer (batches of 500, each message acked);
//       rate = msgs/s fetched
//   scalebench URL conns M N SIZE REQS
//       M subscriber connections, connection i subscribed to sc.<i> (counts) and rq.<i> (replies); one
//       publisher connection sends N core messages round robin over sc.<i>: rate = msgs/s received by
//       all M (received = how many arrived: a server may drop for slow consumers); then REQS sequential
//       requests round robin over rq.<i> from another connection: p50_us/p99_us/req_rate
// Output: "mark start" / "mark end" around the timed phase (the driver samples the server's CPU there), then
// one line of key=value pairs starting with "result".
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHK(x) do { natsStatus _s = (x); if (_s != NATS_OK) { \
    fprintf(stderr, "scalebench: %s failed: %s (jerr=%d)\n", #x, natsStatus_GetText(_s), (int)jerr); \
    nats_PrintLastErrorStack(stderr); exit(1); } } while (0)

static jsErrCode jerr = 0;
static int64_t received = 0;

static void mark(const char *what) { printf("mark %s\n", what); fflush(stdout); }

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

// p-th percentile (0..100) of n sorted values, in µs (values are ns)
static double pct(int64_t *v, int n, double p) {
    if (n == 0) return 0;
    int i = (int)(p / 100.0 * (n - 1) + 0.5);
    return v[i] / 1000.0;
}

// asap: write each message at once instead of leaving it to the flusher thread (which waits to coalesce);
// the connections that answer and send requests use it, as latency clients do, the publisher does not
static natsConnection *connect_to(const char *url, bool asap) {
    natsConnection *nc = NULL; natsOptions *o = NULL;
    CHK(natsOptions_Create(&o)); CHK(natsOptions_SetURL(o, url));
    if (asap) CHK(natsOptions_SetSendAsap(o, true));
    CHK(natsOptions_SetTimeout(o, 30000));
    CHK(natsOptions_SetMaxPendingMsgs(o, 1000000));
    // one pool of delivery threads for every subscription instead of a thread per subscription (the
    // connections axis opens up to thousands of subscriptions)
    CHK(natsOptions_UseGlobalMessageDelivery(o, true));
    CHK(natsConnection_Connect(&nc, o));
    natsOptions_Destroy(o);
    return nc;
}

static int pub(const char *url, char **a) {
    const char *prefix = a[0];
    int n = atoi(a[1]), nsubj = atoi(a[2]), size = atoi(a[3]), inflight = atoi(a[4]), latn = atoi(a[5]);
    char *data = calloc(1, size > 0 ? size : 1);
    memset(data, 'x', size);
    natsConnection *nc = connect_to(url, false);
    jsCtx *js = NULL; jsOptions jo; jsPubOptions po;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = inflight;
    // a server that pauses (a block rolled over, a collection) must not fail the run: wait for acks
    jo.PublishAsync.StallWait = 60000;
    jo.Wait = 60000;
    CHK(natsConnection_JetStream(&js, nc, &jo));
    char subj[256];
    mark("start");
    int64_t t0 = nats_NowInNanoSeconds();
    for (int i = 0; i < n; i++) {
        snprintf(subj, sizeof subj, "%s.%d", prefix, nsubj > 1 ? i % nsubj : 0);
        CHK(js_PublishAsync(js, subj, data, size, NULL));
    }
    jsPubOptions_Init(&po); po.MaxWait = 600000;
    CHK(js_PublishAsyncComplete(js, &po));
    int64_t t1 = nats_NowInNanoSeconds();
    mark("end");
    int64_t *lat = calloc(latn > 0 ? latn : 1, sizeof *lat);
    snprintf(subj, sizeof subj, "%s.0", prefix);
    natsConnection *lc = connect_to(url, true);  // round trips: each publish written at once
    jsCtx *ljs = NULL;
    CHK(natsConnection_JetStream(&ljs, lc, &jo));
    for (int i = 0; i < latn; i++) {
        jsPubAck *pa = NULL;
        int64_t s = nats_NowInNanoSeconds();
        CHK(js_Publish(&pa, ljs, subj, data, size, NULL, &jerr));
        lat[i] = nats_NowInNanoSeconds() - s;
        jsPubAck_Destroy(pa);
    }
    qsort(lat, latn, sizeof *lat, cmp64);
    printf("result n=%d rate=%.1f p50_us=%.1f p99_us=%.1f\n", n, n / ((t1 - t0) / 1e9), pct(lat, latn, 50),
           pct(lat, latn, 99));
    jsCtx_Destroy(ljs);
    natsConnection_Destroy(lc);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return 0;
}

static int fetch(const char *url, char **a) {
    const char *stream = a[0], *durable = a[1];
    int n = atoi(a[2]);
    natsConnection *nc = connect_to(url, false);
    jsCtx *js = NULL; jsSubOptions so; natsSubscription *sub = NULL;
    CHK(natsConnection_JetStream(&js, nc, NULL));
    jsSubOptions_Init(&so);
    so.Stream = stream; so.Consumer = durable;
    CHK(js_PullSubscribe(&sub, js, NULL, durable, NULL, &so, &jerr));
    int got = 0;
    mark("start");
    int64_t t0 = nats_NowInNanoSeconds();
    while (got < n) {
        natsMsgList list = {0};
        int want = n - got < 500 ? n - got : 500;
        CHK(natsSubscription_Fetch(&list, sub, want, 10000, &jerr));
        for (int i = 0; i < list.Count; i++) natsMsg_Ack(list.Msgs[i], NULL);
        got += list.Count;
        natsMsgList_Destroy(&list);
    }
    CHK(natsConnection_Flush(nc));
    int64_t t1 = nats_NowInNanoSeconds();
    mark("end");
    printf("result n=%d rate=%.1f\n", got, got / ((t1 - t0) / 1e9));
    natsSubscription_Destroy(sub);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return 0;
}

static void on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure) {
    (void)nc; (void)sub; (void)closure;
    __atomic_fetch_add(&received, 1, __ATOMIC_RELAXED);
    natsMsg_Destroy(msg);
}

static void on_req(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure) {
    (void)sub; (void)closure;
    if (natsMsg_GetReply(msg)) natsConnection_Publish(nc, natsMsg_GetReply(msg), "ok", 2);
    natsMsg_Destroy(msg);
}

static int conns(const char *url, char **a) {
    int m = atoi(a[0]), n = atoi(a[1]), size = atoi(a[2]), reqs = atoi(a[3]);
    char *data = calloc(1, size > 0 ? size : 1);
    memset(data, 'x', size);
    natsConnection **subs = calloc(m, sizeof *subs);
    natsSubscription *s = NULL;
    char subj[64];
    for (int i = 0; i < m; i++) {
        subs[i] = connect_to(url, true);
        snprintf(subj, sizeof subj, "sc.%d", i);
        CHK(natsConnection_Subscribe(&s, subs[i], subj, on_msg, NULL));
        CHK(natsSubscription_SetPendingLimits(s, -1, -1));
        snprintf(subj, sizeof subj, "rq.%d", i);
        CHK(natsConnection_Subscribe(&s, subs[i], subj, on_req, NULL));
        CHK(natsConnection_Flush(subs[i]));
    }
    natsConnection *p = connect_to(url, false), *rq = connect_to(url, true);
    mark("start");
    int64_t t0 = nats_NowInNanoSeconds();
    for (int i = 0; i < n; i++) {
        snprintf(subj, sizeof subj, "sc.%d", i % m);
        CHK(natsConnection_Publish(p, subj, data, size));
    }
    CHK(natsConnection_Flush(p));
    int64_t last = -1, since = nats_Now();
    while (__atomic_load_n(&received, __ATOMIC_RELAXED) < n) {
        int64_t g = __atomic_load_n(&received, __ATOMIC_RELAXED);
        if (g != last) { last = g; since = nats_Now(); }
        if (nats_Now() - since > 10000) break;  // core messages may be dropped (slow consumer): stop waiting
        nats_Sleep(1);
    }
    int64_t got = __atomic_load_n(&received, __ATOMIC_RELAXED);
    int64_t t1 = nats_NowInNanoSeconds();
    mark("end");
    int64_t *lat = calloc(reqs > 0 ? reqs : 1, sizeof *lat);
    int64_t r0 = nats_NowInNanoSeconds();
    for (int i = 0; i < reqs; i++) {
        natsMsg *reply = NULL;
        snprintf(subj, sizeof subj, "rq.%d", i % m);
        int64_t st = nats_NowInNanoSeconds();
        CHK(natsConnection_Request(&reply, rq, subj, data, size, 10000));
        lat[i] = nats_NowInNanoSeconds() - st;
        natsMsg_Destroy(reply);
    }
    int64_t r1 = nats_NowInNanoSeconds();
    qsort(lat, reqs, sizeof *lat, cmp64);
    printf("result n=%d received=%lld rate=%.1f p50_us=%.1f p99_us=%.1f req_rate=%.1f\n", n, (long long)got,
           got / ((t1 - t0) / 1e9), pct(lat, reqs, 50), pct(lat, reqs, 99), reqs / ((r1 - r0) / 1e9));
    fflush(stdout);
    natsConnection_Destroy(p);
    natsConnection_Destroy(rq);
    for (int i = 0; i < m; i++) natsConnection_Destroy(subs[i]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: scalebench URL pub|fetch|conns ARGS...\n"); return 2; }
    const char *url = argv[1], *mode = argv[2];
    nats_SetMessageDeliveryPoolSize(4);
    if (!strcmp(mode, "pub") && argc == 9) return pub(url, argv + 3);
    if (!strcmp(mode, "fetch") && argc == 6) return fetch(url, argv + 3);
    if (!strcmp(mode, "conns") && argc == 7) return conns(url, argv + 3);
    fprintf(stderr, "scalebench: bad arguments for %s\n", mode);
    return 2;
}
