/*
 * libnats rides through a server restart (same port, same store). Line protocol with the test:
 * this program prints {"phase":"ready",...} once a core subscription and a durable pull consumer
 * have worked (3 messages fetched and AckSync'ed); the test restarts the server and writes "go" to
 * stdin; this program waits for the reconnect, checks that the core subscription was replayed and
 * that the durable consumer continues at stream sequence 4, then prints its final JSON line.
 */
#include "compat.h"

static volatile int reconnects, disconnects;
static void on_reconnected(natsConnection *nc, void *closure) { (void)nc; (void)closure; reconnects++; }
static void on_disconnected(natsConnection *nc, void *closure) { (void)nc; (void)closure; disconnects++; }

int main(int argc, char **argv)
{
    natsOptions      *opts = NULL;
    natsConnection   *nc = NULL;
    jsCtx            *js = NULL;
    jsErrCode         jerr = 0;
    jsStreamInfo     *si = NULL;
    jsPubAck         *pa = NULL;
    natsSubscription *core = NULL, *pull = NULL;
    natsMsg          *msg = NULL;
    natsMsgList       list = {0};

    if (argc < 2) { fprintf(stderr, "usage: %s nats://host:port\n", argv[0]); return 2; }
    stage = "connect";
    MUST(natsOptions_Create(&opts));
    MUST(natsOptions_SetURL(opts, argv[1]));
    MUST(natsOptions_SetAllowReconnect(opts, true));
    MUST(natsOptions_SetMaxReconnect(opts, 200));
    MUST(natsOptions_SetReconnectWait(opts, 100));
    MUST(natsOptions_SetReconnectedCB(opts, on_reconnected, NULL));
    MUST(natsOptions_SetDisconnectedCB(opts, on_disconnected, NULL));
    MUST(natsConnection_Connect(&nc, opts));
    natsOptions_Destroy(opts);

    stage = "setup";
    MUST(natsConnection_SubscribeSync(&core, nc, "rc.core"));
    MUST(natsConnection_JetStream(&js, nc, NULL));
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    const char *subjects[] = {"rcc.>"};
    sc.Name = "RCC";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    MUST_JS(js_AddStream(&si, js, &sc, NULL, &jerr), jerr);
    jsStreamInfo_Destroy(si);
    for (int i = 0; i < 3; i++) {
        MUST_JS(js_Publish(&pa, js, "rcc.x", "before", 6, NULL, &jerr), jerr);
        jsPubAck_Destroy(pa);
        pa = NULL;
    }
    MUST_JS(js_PullSubscribe(&pull, js, "rcc.x", "d", NULL, NULL, &jerr), jerr);
    MUST_JS(natsSubscription_Fetch(&list, pull, 3, 3000, &jerr), jerr);
    int before = list.Count;
    for (int i = 0; i < list.Count; i++) MUST_JS(natsMsg_AckSync(list.Msgs[i], NULL, &jerr), jerr);
    natsMsgList_Destroy(&list);
    MUST(natsConnection_PublishString(nc, "rc.core", "before"));
    MUST(natsSubscription_NextMsg(&msg, core, 3000));
    natsMsg_Destroy(msg);
    msg = NULL;
    printf("{\"phase\":\"ready\",\"fetched\":%d}\n", before);
    fflush(stdout);

    stage = "wait-go";
    char line[16];
    if (fgets(line, sizeof(line), stdin) == NULL) finish(0, NATS_ERR, 0);

    stage = "reconnect";
    for (int i = 0; i < 300 && reconnects == 0; i++) nats_Sleep(50);
    KV_BOOL("reconnected", reconnects > 0);
    KV_BOOL("disconnected", disconnects > 0);

    stage = "core-after";
    MUST(natsConnection_PublishString(nc, "rc.core", "after"));
    MUST(natsConnection_Flush(nc));
    {
        natsStatus s = natsSubscription_NextMsg(&msg, core, 3000);
        KV_BOOL("coreReplayed", s == NATS_OK);
        if (s == NATS_OK) natsMsg_Destroy(msg);
        msg = NULL;
    }

    stage = "js-after";
    for (int i = 0; i < 3; i++) {
        natsStatus s;
        /* The stream's responders may need a moment after the restart: retry briefly. */
        for (int attempt = 0; (s = js_Publish(&pa, js, "rcc.x", "after", 5, NULL, &jerr)) != NATS_OK && attempt < 30; attempt++)
            nats_Sleep(100);
        MUST_JS(s, jerr);
        jsPubAck_Destroy(pa);
        pa = NULL;
    }
    MUST_JS(natsSubscription_Fetch(&list, pull, 3, 5000, &jerr), jerr);
    KEY("afterSeqs"); out_raw("[");
    for (int i = 0; i < list.Count; i++) {
        jsMsgMetaData *meta = NULL;
        MUST(natsMsg_GetMetaData(&meta, list.Msgs[i]));
        out_raw("%s%llu", i ? "," : "", (unsigned long long)meta->Sequence.Stream);
        jsMsgMetaData_Destroy(meta);
        MUST_JS(natsMsg_AckSync(list.Msgs[i], NULL, &jerr), jerr);
    }
    out_raw("],");
    natsMsgList_Destroy(&list);

    stage = "close";
    natsSubscription_Destroy(pull);
    natsSubscription_Destroy(core);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    finish(1, NATS_OK, 0);
    return 0;
}
