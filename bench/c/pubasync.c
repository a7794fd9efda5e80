// pubasync: async JetStream publish into an existing stream (created by the caller, e.g. with
// compression: s2, which libnats 3.4's jsStreamConfig cannot express). Payloads are compressible
// but not constant: an order-like text record with its number, padded with repeated prose.
// usage: pubasync URL SUBJECT N SIZE        output: "n=N size=SIZE rate=MSGS_PER_S"
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHK(x) do { natsStatus _s = (x); if (_s != NATS_OK) { \
    fprintf(stderr, "pubasync: %s failed: %s\n", #x, natsStatus_GetText(_s)); exit(1); } } while (0)

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: pubasync URL SUBJECT N SIZE\n"); return 2; }
    const char *url = argv[1], *subj = argv[2];
    int n = atoi(argv[3]), size = atoi(argv[4]);
    static const char *prose = " the quick brown fox jumps over the lazy dog; status=pending region=eu-west ";
    char *data = malloc(size + 1);
    natsConnection *nc = NULL; jsCtx *js = NULL; jsOptions jo; jsPubOptions po;
    CHK(natsConnection_ConnectTo(&nc, url));
    // StallWait: how long a publish waits for room among the 4,096 in flight (libnats default
    // 200 ms, after which it fails with Timeout); a loaded machine pauses longer than that.
    jsOptions_Init(&jo); jo.PublishAsync.MaxPending = 4096; jo.PublishAsync.StallWait = 30000; jo.Wait = 10000;
    CHK(natsConnection_JetStream(&js, nc, &jo));
    int64_t t0 = nats_NowInNanoSeconds();
    for (int i = 0; i < n; i++) {
        int k = snprintf(data, size + 1, "{\"order\":%d,\"customer\":\"c-%d\",\"amount\":%d.%02d}", i, i % 977,
                         (i * 37) % 10000, i % 100);
        for (int p = 0; k < size; k++, p++) data[k] = prose[p % 76];
        CHK(js_PublishAsync(js, subj, data, size, NULL));
    }
    jsPubOptions_Init(&po); po.MaxWait = 120000;
    CHK(js_PublishAsyncComplete(js, &po));
    int64_t t1 = nats_NowInNanoSeconds();
    printf("n=%d size=%d rate=%.0f\n", n, size, n / ((t1 - t0) / 1e9));
    jsCtx_Destroy(js); natsConnection_Destroy(nc);
    return 0;
}
