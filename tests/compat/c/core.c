/*
 * Core NATS with libnats: wildcard sync subscription, queue group, headers (multi-valued),
 * request/reply against an async responder, a 256 kB payload, no-responders, auto-unsubscribe.
 */
#include "compat.h"

static void on_echo(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)sub; (void)closure;
    char reply[256];
    snprintf(reply, sizeof(reply), "echo:%.*s", natsMsg_GetDataLength(msg), natsMsg_GetData(msg));
    natsConnection_PublishString(nc, natsMsg_GetReply(msg), reply);
    natsMsg_Destroy(msg);
}

static int queue_a, queue_b;
static void on_qa(natsConnection *nc, natsSubscription *s, natsMsg *m, void *c) { (void)nc; (void)s; (void)c; queue_a++; natsMsg_Destroy(m); }
static void on_qb(natsConnection *nc, natsSubscription *s, natsMsg *m, void *c) { (void)nc; (void)s; (void)c; queue_b++; natsMsg_Destroy(m); }

int main(int argc, char **argv)
{
    natsConnection   *nc = compat_connect(argc, argv, "compat-c-core");
    natsSubscription *sub = NULL;
    natsMsg          *msg = NULL;

    stage = "server-info";
    KV_BOOL("headerSupport", natsConnection_HasHeaderSupport(nc) == NATS_OK);

    stage = "wildcard";
    MUST(natsConnection_SubscribeSync(&sub, nc, "core.>"));
    MUST(natsConnection_PublishString(nc, "core.a", "one"));
    MUST(natsConnection_PublishString(nc, "core.b.c", "two"));
    MUST(natsConnection_Flush(nc));
    KEY("wildcard"); out_raw("[");
    for (int i = 0; i < 2; i++) {
        MUST(natsSubscription_NextMsg(&msg, sub, 2000));
        out_raw(i ? ",[" : "[");
        out_str(natsMsg_GetSubject(msg));
        out_raw(",\"%.*s\"]", natsMsg_GetDataLength(msg), natsMsg_GetData(msg));
        natsMsg_Destroy(msg);
    }
    out_raw("],");
    natsSubscription_Destroy(sub);

    stage = "queue";
    natsSubscription *q1 = NULL, *q2 = NULL;
    MUST(natsConnection_QueueSubscribe(&q1, nc, "work.q", "workers", on_qa, NULL));
    MUST(natsConnection_QueueSubscribe(&q2, nc, "work.q", "workers", on_qb, NULL));
    MUST(natsConnection_Flush(nc));
    for (int i = 0; i < 20; i++) MUST(natsConnection_PublishString(nc, "work.q", "job"));
    MUST(natsConnection_Flush(nc));
    for (int i = 0; i < 100 && queue_a + queue_b < 20; i++) nats_Sleep(10);
    KV_INT("queueTotal", queue_a + queue_b);
    natsSubscription_Destroy(q1);
    natsSubscription_Destroy(q2);

    stage = "headers";
    MUST(natsConnection_SubscribeSync(&sub, nc, "hdr.test"));
    natsMsg *hm = NULL;
    MUST(natsMsg_Create(&hm, "hdr.test", NULL, "body", 4));
    MUST(natsMsgHeader_Set(hm, "Trace-Id", "abc 123"));
    MUST(natsMsgHeader_Add(hm, "Multi", "1"));
    MUST(natsMsgHeader_Add(hm, "Multi", "2"));
    MUST(natsConnection_PublishMsg(nc, hm));
    natsMsg_Destroy(hm);
    MUST(natsSubscription_NextMsg(&msg, sub, 2000));
    {
        const char *v = NULL;
        const char **vals = NULL;
        int count = 0;
        MUST(natsMsgHeader_Get(msg, "Trace-Id", &v));
        KV_STR("traceId", v);
        MUST(natsMsgHeader_Values(msg, "Multi", &vals, &count));
        KV_INT("multiCount", count);
        free((void *)vals);
        KEY("headerBody"); out_raw("\"%.*s\",", natsMsg_GetDataLength(msg), natsMsg_GetData(msg));
    }
    natsMsg_Destroy(msg);
    natsSubscription_Destroy(sub);

    stage = "request";
    natsSubscription *svc = NULL;
    MUST(natsConnection_Subscribe(&svc, nc, "svc.echo", on_echo, NULL));
    MUST(natsConnection_Flush(nc));
    MUST(natsConnection_RequestString(&msg, nc, "svc.echo", "hi", 3000));
    KEY("reply"); out_raw("\"%.*s\",", natsMsg_GetDataLength(msg), natsMsg_GetData(msg));
    natsMsg_Destroy(msg);
    int good = 0;
    for (int i = 0; i < 20; i++) {
        char want[32], body[16];
        snprintf(body, sizeof(body), "r%d", i);
        snprintf(want, sizeof(want), "echo:r%d", i);
        MUST(natsConnection_RequestString(&msg, nc, "svc.echo", body, 3000));
        if (natsMsg_GetDataLength(msg) == (int)strlen(want) && memcmp(natsMsg_GetData(msg), want, strlen(want)) == 0) good++;
        natsMsg_Destroy(msg);
    }
    KV_INT("manyReplies", good);
    natsSubscription_Destroy(svc);

    stage = "large";
    {
        int   n = 256 * 1024;
        char *big = malloc(n);
        for (int i = 0; i < n; i++) big[i] = (char)(i % 251);
        MUST(natsConnection_SubscribeSync(&sub, nc, "big.payload"));
        MUST(natsConnection_Publish(nc, "big.payload", big, n));
        MUST(natsSubscription_NextMsg(&msg, sub, 3000));
        KV_BOOL("largeOk", natsMsg_GetDataLength(msg) == n && memcmp(natsMsg_GetData(msg), big, n) == 0);
        natsMsg_Destroy(msg);
        natsSubscription_Destroy(sub);
        free(big);
    }

    stage = "no-responders";
    {
        natsStatus s = natsConnection_RequestString(&msg, nc, "nobody.listens", "?", 2000);
        KV_BOOL("noResponders", s == NATS_NO_RESPONDERS);
        KV_STATUS("noRespondersStatus", s);
        if (s == NATS_OK) natsMsg_Destroy(msg);
    }

    stage = "auto-unsubscribe";
    MUST(natsConnection_SubscribeSync(&sub, nc, "auto.unsub"));
    MUST(natsSubscription_AutoUnsubscribe(sub, 2));
    for (int i = 0; i < 5; i++) MUST(natsConnection_PublishString(nc, "auto.unsub", "x"));
    MUST(natsConnection_Flush(nc));
    {
        int got = 0;
        while (natsSubscription_NextMsg(&msg, sub, 300) == NATS_OK) { got++; natsMsg_Destroy(msg); }
        KV_INT("autoUnsub", got);
    }
    natsSubscription_Destroy(sub);

    stage = "close";
    MUST(natsConnection_FlushTimeout(nc, 2000));
    natsConnection_Close(nc);
    natsConnection_Destroy(nc);

    /* A second connection with the less common options: verbose (+OK after every op), pedantic,
     * no_echo (own publishes not delivered back), and old-style requests (one inbox SUB + UNSUB 1
     * per request instead of the muxed _INBOX.<id>.* subscription). */
    stage = "options-connect";
    {
        natsOptions *o = NULL;
        natsConnection *nc2 = NULL, *other = NULL;
        MUST(natsOptions_Create(&o));
        MUST(natsOptions_SetURL(o, argv[1]));
        MUST(natsOptions_SetAllowReconnect(o, false));
        MUST(natsOptions_SetVerbose(o, true));
        MUST(natsOptions_SetPedantic(o, true));
        MUST(natsOptions_SetNoEcho(o, true));
        MUST(natsOptions_UseOldRequestStyle(o, true));
        MUST(natsConnection_Connect(&nc2, o));
        natsOptions_Destroy(o);
        other = compat_connect(argc, argv, "compat-c-core-other");

        stage = "options-old-request";
        natsSubscription *echo = NULL;
        MUST(natsConnection_Subscribe(&echo, other, "svc.old", on_echo, NULL));
        MUST(natsConnection_Flush(other));
        int good = 0;
        for (int i = 0; i < 5; i++) {
            MUST(natsConnection_RequestString(&msg, nc2, "svc.old", "x", 3000));
            if (natsMsg_GetDataLength(msg) == 6 && memcmp(natsMsg_GetData(msg), "echo:x", 6) == 0) good++;
            natsMsg_Destroy(msg);
        }
        KV_INT("oldStyleReplies", good);

        stage = "options-no-echo";
        natsSubscription *self = NULL, *peer = NULL;
        MUST(natsConnection_SubscribeSync(&self, nc2, "echo.test"));
        MUST(natsConnection_SubscribeSync(&peer, other, "echo.test"));
        MUST(natsConnection_Flush(nc2));
        MUST(natsConnection_Flush(other));
        MUST(natsConnection_PublishString(nc2, "echo.test", "mine"));
        MUST(natsConnection_Flush(nc2));
        KV_BOOL("noEchoPeerGot", natsSubscription_NextMsg(&msg, peer, 2000) == NATS_OK);
        if (msg) natsMsg_Destroy(msg);
        msg = NULL;
        KV_BOOL("noEchoSelfGot", natsSubscription_NextMsg(&msg, self, 300) == NATS_OK);
        if (msg) natsMsg_Destroy(msg);
        msg = NULL;

        stage = "options-close";
        natsSubscription_Destroy(self);
        natsSubscription_Destroy(peer);
        natsSubscription_Destroy(echo);
        MUST(natsConnection_FlushTimeout(nc2, 2000));
        natsConnection_Destroy(nc2);
        natsConnection_Destroy(other);
    }
    finish(1, NATS_OK, 0);
    return 0;
}
