// widebench: the wider workload set of issue 15, written against the C client (libnats) so that the
// load generator is not the bottleneck and natsd and nats-server are driven by the same client.
//
// Build: scripts/build-widebench.sh (make widebench) -> bench/bin/widebench
// Usage: widebench URL WORKLOAD [N] [SIZE] [RATE]
//   replay      publish N msgs to a file stream, then an ordered push consumer replays them; msgs/s of the replay
//   pub8streams 8 connections (threads), each publishing N/8 async to its own file stream; acked msgs/s
//   queue4      one publisher, 4 subscribers (own connections) in one queue group; msgs/s received
//   subjects    one publisher cycling over 10,000 subjects bench.w.<i%10>.<i>, 10 subscribers on bench.w.<k>.*
//               (each message matches exactly one wildcard subscriber); msgs/s received
//   subjectsreply  the same, each message with a reply subject _INBOX.bench.<i> (issue 31)
//   reqrep      N sequential requests to one responder; requests/s and p50/p99/p999 latency
//   pub8        8 publisher connections (threads) publishing N/8 each to one subscriber; msgs/s received
//   jspub       async JetStream publish into a file stream (use SIZE=16384 for the 16 KB shape); acked msgs/s
//   consumers   create N durable consumers on one stream, one after the other; creations/s
//   coremax     one publisher, one subscriber (the maximum used to size the latency benchmark's load)
//   latency     a background core pub->sub flow paced at RATE msgs/s, then N sequential requests and N
//               synchronous JetStream publishes; p50/p99/p999 of both
// Output: lines "mark start" / "mark end" around the measured phase (the driver samples the server's CPU
// there), then one line of key=value pairs: workload, n (operations measured), size, rate, and for latency
// workloads p50_us/p99_us/p999_us (reqrep) or rr_*/js_* plus bg_rate and msgs (latency: requests, publishes
// and background messages handled in the measured phase).
#include <nats/nats.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHK(x) do { natsStatus _s = (x); if (_s != NATS_OK) { \
    fprintf(stderr, "widebench: %s failed: %s (jerr=%d)\n", #x, natsStatus_GetText(_s), (int)jerr); exit(1); } } while (0)

static int64_t received = 0;
static jsErrCode jerr = 0;
static const char *url;
static char *data;
static int size;

static void mark(const char *what) { printf("mark %s\n", what); fflush(stdout); }

static void onMsg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure) {
    (void)nc; (void)sub; (void)closure;
    __atomic_fetch_add(&received, 1, __ATOMIC_RELAXED);
    natsMsg_Destroy(msg);
}

static void onRequest(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure) {
    (void)sub; (void)closure;
    if (natsMsg_GetReply(msg)) natsConnection_Publish(nc, natsMsg_GetReply(msg), data, size);
    natsMsg_Destroy(msg);
}

static int64_t got(void) { return __atomic_load_n(&received, __ATOMIC_RELAXED); }

// Waits until `want` messages arrived or nothing arrived for 10 s; returns the count.
static int64_t waitReceived(int64_t want) {
    int64_t last = -1, since = nats_Now();
    while (got() < want) {
        int64_t g = got();
        if (g != last) { last = g; since = nats_Now(); }
        if (nats_Now() - since > 10000) break;
        nats_Sleep(1);
    }
    if (got() < want) fprintf(stderr, "widebench: only %lld of %lld received\n", (long long)got(), (long long)want);
    return got();
}

static void addStream(jsCtx *js, const char *name, const char *subj, jsStorageType st) {
    jsStreamConfig sc; jsStreamInfo *si = NULL; const char *subjs[1] = {subj};
    js_DeleteStream(js, name, NULL, NULL);
    jsStreamConfig_Init(&sc); sc.Name = name; sc.Subjects = subjs; sc.SubjectsLen = 1; sc.Storage = st;
    CHK(js_AddStream(&si, js, &sc, NULL, &jerr));
    jsStreamInfo_Destroy(si);
}

static void asyncPublish(jsCtx *js, const char *subj, int n) {
    jsPubOptions po;
    for (int i = 0; i < n; i++) CHK(js_PublishAsync(js, subj, data, size, NULL));
    jsPubOptions_Init(&po); po.MaxWait = 120000;
    CHK(js_PublishAsyncComplete(js, &po));
}

static jsCtx *newJs(natsConnection *nc) {
    jsCtx *js = NULL; jsOptions jo;
    jsOptions_Init(&jo); jo.PublishAsync.MaxPending = 4096; jo.Wait = 30000;
    jo.PublishAsync.StallWait = 30000;  // a loaded 2-core machine can stall 4096 acks longer than the 200 ms default
    CHK(natsConnection_JetStream(&js, nc, &jo));
    return js;
}

// asap: send each publish at once instead of through libnats' flusher thread (which adds ~1 ms to a
// responder's reply); used for the latency workloads.
static natsConnection *connectOpt(int asap) {
    natsConnection *nc = NULL; natsOptions *o = NULL;
    CHK(natsOptions_Create(&o)); CHK(natsOptions_SetURL(o, url));
    if (asap) CHK(natsOptions_SetSendAsap(o, true));
    CHK(natsOptions_SetTimeout(o, 30000));
    CHK(natsConnection_Connect(&nc, o));
    natsOptions_Destroy(o);
    return nc;
}
static natsConnection *connect(void) { return connectOpt(0); }

static natsSubscription *subscribe(natsConnection *nc, const char *subj, const char *queue, natsMsgHandler cb) {
    natsSubscription *sub = NULL;
    if (queue) CHK(natsConnection_QueueSubscribe(&sub, nc, subj, queue, cb, NULL));
    else CHK(natsConnection_Subscribe(&sub, nc, subj, cb, NULL));
    natsSubscription_SetPendingLimits(sub, -1, -1);
    return sub;
}

static int cmpI64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b; return x < y ? -1 : x > y;
}
static double pct(int64_t *v, int n, double p) {  // v sorted, nanoseconds -> microseconds
    int i = (int)(p * (n - 1) + 0.5); return v[i] / 1000.0;
}

// ---- threads ----
typedef struct { int idx, n; int64_t start; } Job;
static volatile int go = 0;

static void *pubStreamThread(void *arg) {
    Job *j = arg; char subj[32];
    natsConnection *nc = connect(); jsCtx *js = newJs(nc);
    snprintf(subj, sizeof subj, "bench.ms.%d", j->idx);
    while (!go) nats_Sleep(1);
    asyncPublish(js, subj, j->n);
    jsCtx_Destroy(js); natsConnection_Destroy(nc);
    return NULL;
}

static void *pubCoreThread(void *arg) {
    Job *j = arg; natsConnection *nc = connect();
    while (!go) nats_Sleep(1);
    for (int i = 0; i < j->n; i++) CHK(natsConnection_Publish(nc, "bench.p8", data, size));
    CHK(natsConnection_Flush(nc));
    natsConnection_Destroy(nc);
    return NULL;
}

static volatile int bgStop = 0;
static int64_t bgSent = 0;
static double bgRate = 0;
static void *backgroundThread(void *arg) {
    (void)arg; natsConnection *nc = connect();
    int64_t t0 = nats_NowInNanoSeconds();
    while (!bgStop) {  // paced: catch up to RATE * elapsed every millisecond
        double el = (nats_NowInNanoSeconds() - t0) / 1e9;
        int64_t due = (int64_t)(bgRate * el);
        while (bgSent < due) { CHK(natsConnection_Publish(nc, "bench.bg", data, size)); bgSent++; }
        nats_Sleep(1);
    }
    natsConnection_Flush(nc);
    natsConnection_Destroy(nc);
    return NULL;
}

static void latencies(natsConnection *nc, jsCtx *js, int n, int64_t *lat, int js_mode) {
    for (int i = 0; i < n; i++) {
        int64_t a = nats_NowInNanoSeconds();
        if (js_mode) { jsPubAck *pa = NULL; CHK(js_Publish(&pa, js, "bench.lat", data, size, NULL, &jerr)); jsPubAck_Destroy(pa); }
        else { natsMsg *r = NULL; CHK(natsConnection_Request(&r, nc, "bench.rr", data, size, 10000)); natsMsg_Destroy(r); }
        lat[i] = nats_NowInNanoSeconds() - a;
    }
    qsort(lat, n, sizeof *lat, cmpI64);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: widebench URL replay|pub8streams|queue4|subjects|subjectsreply|reqrep|pub8|jspub|consumers|coremax|latency"
                        " [N] [SIZE] [RATE]\n");
        return 2;
    }
    url = argv[1]; const char *w = argv[2];
    int n = argc > 3 ? atoi(argv[3]) : 100000; size = argc > 4 ? atoi(argv[4]) : 128;
    double rate = argc > 5 ? atof(argv[5]) : 0;
    data = malloc(size); memset(data, 'x', size);
    natsConnection *nc = connect(); jsCtx *js = newJs(nc);
    int64_t t0 = 0, t1 = 0; char extra[256] = "";

    if (!strcmp(w, "replay")) {
        natsSubscription *sub = NULL; jsSubOptions so; jsOptions jo;
        addStream(js, "BENCH", "bench.js", js_FileStorage);
        asyncPublish(js, "bench.js", n);
        jsOptions_Init(&jo); jsSubOptions_Init(&so); so.Ordered = true;
        mark("start"); t0 = nats_NowInNanoSeconds();
        CHK(js_Subscribe(&sub, js, "bench.js", onMsg, NULL, &jo, &so, &jerr));
        natsSubscription_SetPendingLimits(sub, -1, -1);
        n = (int)waitReceived(n);
        t1 = nats_NowInNanoSeconds(); mark("end");
        natsSubscription_Unsubscribe(sub); natsSubscription_Destroy(sub);
        js_DeleteStream(js, "BENCH", NULL, NULL);
    } else if (!strcmp(w, "pub8streams")) {
        pthread_t th[8]; Job jobs[8]; char name[16], subj[32];
        for (int i = 0; i < 8; i++) {
            snprintf(name, sizeof name, "BENCH%d", i); snprintf(subj, sizeof subj, "bench.ms.%d", i);
            addStream(js, name, subj, js_FileStorage);
            jobs[i].idx = i; jobs[i].n = n / 8; pthread_create(&th[i], NULL, pubStreamThread, &jobs[i]);
        }
        nats_Sleep(500);  // connections up
        n = (n / 8) * 8;
        mark("start"); t0 = nats_NowInNanoSeconds(); go = 1;
        for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
        t1 = nats_NowInNanoSeconds(); mark("end");
        for (int i = 0; i < 8; i++) { snprintf(name, sizeof name, "BENCH%d", i); js_DeleteStream(js, name, NULL, NULL); }
    } else if (!strcmp(w, "queue4") || !strcmp(w, "subjects") || !strcmp(w, "subjectsreply") || !strcmp(w, "coremax")) {
        int q = !strcmp(w, "queue4"), withReply = !strcmp(w, "subjectsreply");
        int many = withReply || !strcmp(w, "subjects"), nsubs = q ? 4 : many ? 10 : 1;
        natsConnection *sc[10]; natsSubscription *subs[10]; char subj[48];
        for (int i = 0; i < nsubs; i++) {
            sc[i] = connect();
            if (many) snprintf(subj, sizeof subj, "bench.w.%d.*", i); else snprintf(subj, sizeof subj, "bench.core");
            subs[i] = subscribe(sc[i], subj, q ? "workers" : NULL, onMsg);
            CHK(natsConnection_Flush(sc[i]));
        }
        char (*subjects)[32] = NULL, (*replies)[32] = NULL;
        if (many) {
            subjects = malloc(10000 * sizeof *subjects);
            for (int i = 0; i < 10000; i++) snprintf(subjects[i], 32, "bench.w.%d.%d", i % 10, i);
        }
        if (withReply) {
            replies = malloc(10000 * sizeof *replies);
            for (int i = 0; i < 10000; i++) snprintf(replies[i], 32, "_INBOX.bench.%d", i);
        }
        mark("start"); t0 = nats_NowInNanoSeconds();
        for (int i = 0; i < n; i++) {
            if (withReply) CHK(natsConnection_PublishRequest(nc, subjects[i % 10000], replies[i % 10000], data, size));
            else CHK(natsConnection_Publish(nc, many ? subjects[i % 10000] : "bench.core", data, size));
        }
        CHK(natsConnection_Flush(nc));
        n = (int)waitReceived(n);
        t1 = nats_NowInNanoSeconds(); mark("end");
        for (int i = 0; i < nsubs; i++) { natsSubscription_Destroy(subs[i]); natsConnection_Destroy(sc[i]); }
        free(subjects); free(replies);
    } else if (!strcmp(w, "pub8")) {
        natsConnection *sc = connect(); pthread_t th[8]; Job jobs[8];
        natsSubscription *sub = subscribe(sc, "bench.p8", NULL, onMsg);
        CHK(natsConnection_Flush(sc));
        for (int i = 0; i < 8; i++) { jobs[i].idx = i; jobs[i].n = n / 8; pthread_create(&th[i], NULL, pubCoreThread, &jobs[i]); }
        nats_Sleep(500);
        n = (n / 8) * 8;
        mark("start"); t0 = nats_NowInNanoSeconds(); go = 1;
        for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
        n = (int)waitReceived(n);
        t1 = nats_NowInNanoSeconds(); mark("end");
        natsSubscription_Destroy(sub); natsConnection_Destroy(sc);
    } else if (!strcmp(w, "jspub")) {
        addStream(js, "BENCH", "bench.js", js_FileStorage);
        mark("start"); t0 = nats_NowInNanoSeconds();
        asyncPublish(js, "bench.js", n);
        t1 = nats_NowInNanoSeconds(); mark("end");
        js_DeleteStream(js, "BENCH", NULL, NULL);
    } else if (!strcmp(w, "consumers")) {
        char name[32];
        addStream(js, "BENCH", "bench.js", js_FileStorage);
        mark("start"); t0 = nats_NowInNanoSeconds();
        for (int i = 0; i < n; i++) {
            jsConsumerConfig cc; jsConsumerInfo *ci = NULL;
            jsConsumerConfig_Init(&cc); snprintf(name, sizeof name, "D%d", i);
            cc.Durable = name; cc.AckPolicy = js_AckExplicit;
            CHK(js_AddConsumer(&ci, js, "BENCH", &cc, NULL, &jerr));
            jsConsumerInfo_Destroy(ci);
        }
        t1 = nats_NowInNanoSeconds(); mark("end");
        js_DeleteStream(js, "BENCH", NULL, NULL);
    } else if (!strcmp(w, "reqrep") || !strcmp(w, "latency")) {
        int lat = !strcmp(w, "latency");
        natsConnection *rc = connectOpt(1), *bgc = NULL; natsSubscription *rs = subscribe(rc, "bench.rr", NULL, onRequest), *bgs = NULL;
        CHK(natsConnection_Flush(rc));
        int64_t *v = malloc(sizeof *v * n); pthread_t bg;
        if (lat) {
            addStream(js, "BENCHLAT", "bench.lat", js_FileStorage);
            bgc = connect(); bgs = subscribe(bgc, "bench.bg", NULL, onMsg); CHK(natsConnection_Flush(bgc));
            bgRate = rate; pthread_create(&bg, NULL, backgroundThread, NULL);
            nats_Sleep(500);  // let the background flow settle
        }
        int64_t bg0 = got();
        mark("start"); t0 = nats_NowInNanoSeconds();
        latencies(nc, js, n, v, 0);
        int off = snprintf(extra, sizeof extra, lat ? "rr_p50_us=%.1f rr_p99_us=%.1f rr_p999_us=%.1f " : "p50_us=%.1f p99_us=%.1f p999_us=%.1f ",
                           pct(v, n, .5), pct(v, n, .99), pct(v, n, .999));
        if (lat) {
            latencies(nc, js, n, v, 1);
            snprintf(extra + off, sizeof extra - off, "js_p50_us=%.1f js_p99_us=%.1f js_p999_us=%.1f ",
                     pct(v, n, .5), pct(v, n, .99), pct(v, n, .999));
        }
        t1 = nats_NowInNanoSeconds(); mark("end");
        if (lat) {
            double el = (t1 - t0) / 1e9;
            bgStop = 1; pthread_join(bg, NULL);
            off = (int)strlen(extra);
            // msgs: every message the server handled in the measured phase (for CPU per message)
            snprintf(extra + off, sizeof extra - off, "bg_rate=%.0f msgs=%lld ", (got() - bg0) / el,
                     (long long)(2 * n + got() - bg0));
            natsSubscription_Destroy(bgs); natsConnection_Destroy(bgc);
            js_DeleteStream(js, "BENCHLAT", NULL, NULL);
            n *= 2;  // requests + publishes
        }
        natsSubscription_Destroy(rs); natsConnection_Destroy(rc); free(v);
    } else { fprintf(stderr, "widebench: unknown workload %s\n", w); return 2; }

    double secs = (double)(t1 - t0) / 1e9;
    printf("workload=%s n=%d size=%d %srate=%.0f\n", w, n, size, extra, n / secs);
    fflush(stdout);
    jsCtx_Destroy(js); natsConnection_Destroy(nc); nats_Close();
    return 0;
}
