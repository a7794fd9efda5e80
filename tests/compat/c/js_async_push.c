/*
 * JetStream with libnats: js_PublishAsync (500 messages in flight, ack handler counting PubAcks)
 * + js_PublishAsyncComplete; an async push subscription (js_Subscribe, durable, manual acks,
 * idle heartbeat + flow control) that acks every message; a sync push subscription with
 * natsMsg_AckSync; a deliver-group (queue) push consumer shared by two subscriptions; an ordered
 * push consumer (jsSubOptions.Ordered) reading the stream in order.
 */
#include "compat.h"

#define N 500

static int acked_pubs, failed_pubs;
static void on_puback(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
    (void)js; (void)closure;
    if (pa != NULL && pae == NULL) acked_pubs++;
    else failed_pubs++;
    natsMsg_Destroy(msg);
}

static int push_got, push_in_order = 1;
static uint64_t push_last;
static void on_push(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)nc; (void)sub; (void)closure;
    jsMsgMetaData *meta = NULL;
    if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
        if (meta->Sequence.Stream != push_last + 1) push_in_order = 0;
        push_last = meta->Sequence.Stream;
        jsMsgMetaData_Destroy(meta);
    }
    natsMsg_Ack(msg, NULL);
    push_got++;
    natsMsg_Destroy(msg);
}

int main(int argc, char **argv)
{
    natsConnection   *nc = compat_connect(argc, argv, "compat-c-js-async-push");
    jsCtx            *js = NULL;
    jsErrCode         jerr = 0;
    jsStreamInfo     *si = NULL;
    natsSubscription *sub = NULL;
    natsMsg          *msg = NULL;

    stage = "stream-create";
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.AckHandler = on_puback;
    jo.PublishAsync.MaxPending = 256;
    MUST(natsConnection_JetStream(&js, nc, &jo));
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    const char *subjects[] = {"apush.>"};
    sc.Name = "APUSH";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.Storage = js_MemoryStorage;
    MUST_JS(js_AddStream(&si, js, &sc, NULL, &jerr), jerr);
    jsStreamInfo_Destroy(si);

    stage = "publish-async";
    for (int i = 0; i < N; i++) {
        char body[32];
        int  n = snprintf(body, sizeof(body), "m%d", i);
        MUST(js_PublishAsync(js, i % 2 ? "apush.odd" : "apush.even", body, n, NULL));
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 10000;
    MUST(js_PublishAsyncComplete(js, &po));
    /* Ack handlers run on libnats' delivery thread; give the last ones a moment to be counted. */
    for (int i = 0; i < 200 && acked_pubs + failed_pubs < N; i++) nats_Sleep(10);
    KV_INT("asyncAcked", acked_pubs);
    KV_INT("asyncFailed", failed_pubs);
    MUST_JS(js_GetStreamInfo(&si, js, "APUSH", NULL, &jerr), jerr);
    KV_INT("streamMsgs", si->State.Msgs);
    jsStreamInfo_Destroy(si);

    stage = "push-async";
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = "APUSH";
    so.ManualAck = true;
    so.Config.Durable = "pushdur";
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.Heartbeat = (int64_t)1000 * 1000 * 1000;
    so.Config.FlowControl = true;
    MUST_JS(js_Subscribe(&sub, js, "apush.>", on_push, NULL, NULL, &so, &jerr), jerr);
    for (int i = 0; i < 500 && push_got < N; i++) nats_Sleep(10);
    KV_INT("pushReceived", push_got);
    KV_BOOL("pushInOrder", push_in_order);
    MUST(natsConnection_Flush(nc));
    {
        jsConsumerInfo *ci = NULL;
        /* Acks are fire-and-forget: poll until the server has processed the last of them. */
        for (int i = 0; i < 100; i++) {
            MUST_JS(js_GetConsumerInfo(&ci, js, "APUSH", "pushdur", NULL, &jerr), jerr);
            if (ci->NumAckPending == 0) break;
            jsConsumerInfo_Destroy(ci);
            ci = NULL;
            nats_Sleep(20);
        }
        if (ci == NULL) MUST_JS(js_GetConsumerInfo(&ci, js, "APUSH", "pushdur", NULL, &jerr), jerr);
        KV_INT("pushAckFloor", ci->AckFloor.Stream);
        KV_INT("pushNumAckPending", ci->NumAckPending);
        KV_BOOL("pushBound", ci->PushBound);
        KV_BOOL("pushHasDeliverSubject", ci->Config->DeliverSubject != NULL);
        jsConsumerInfo_Destroy(ci);
    }
    natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
    sub = NULL;

    stage = "push-sync";
    jsSubOptions_Init(&so);
    so.Stream = "APUSH";
    so.ManualAck = true;
    so.Config.Durable = "syncdur";
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.DeliverPolicy = js_DeliverLast;
    MUST_JS(js_SubscribeSync(&sub, js, "apush.odd", NULL, &so, &jerr), jerr);
    MUST(natsSubscription_NextMsg(&msg, sub, 3000));
    KEY("syncLast"); out_raw("\"%.*s\",", natsMsg_GetDataLength(msg), natsMsg_GetData(msg));
    MUST_JS(natsMsg_AckSync(msg, NULL, &jerr), jerr);
    natsMsg_Destroy(msg);
    msg = NULL;
    natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
    sub = NULL;

    stage = "push-queue";
    {
        /* Two members of one deliver group (jsSubOptions.Queue) share a durable push consumer:
         * every message goes to exactly one of them. */
        natsSubscription *m1 = NULL, *m2 = NULL;
        jsSubOptions_Init(&so);
        so.Stream = "APUSH";
        so.Queue = "grp";
        so.Config.Durable = "grp";
        so.Config.DeliverPolicy = js_DeliverNew;
        so.Config.AckPolicy = js_AckExplicit;
        MUST_JS(js_SubscribeSync(&m1, js, "apush.q", NULL, &so, &jerr), jerr);
        MUST_JS(js_SubscribeSync(&m2, js, "apush.q", NULL, &so, &jerr), jerr);
        jsPubAck *qa = NULL;
        for (int i = 0; i < 40; i++) {
            MUST_JS(js_Publish(&qa, js, "apush.q", "q", 1, NULL, &jerr), jerr);
            jsPubAck_Destroy(qa);
            qa = NULL;
        }
        int got1 = 0, got2 = 0;
        for (int idle = 0; idle < 3 && got1 + got2 < 40;) {
            int before = got1 + got2;
            while (natsSubscription_NextMsg(&msg, m1, 100) == NATS_OK) { natsMsg_Ack(msg, NULL); natsMsg_Destroy(msg); got1++; }
            while (natsSubscription_NextMsg(&msg, m2, 100) == NATS_OK) { natsMsg_Ack(msg, NULL); natsMsg_Destroy(msg); got2++; }
            idle = (got1 + got2 == before) ? idle + 1 : 0;
        }
        msg = NULL;
        KV_INT("queueTotal", got1 + got2);
        natsSubscription_Unsubscribe(m1);
        natsSubscription_Unsubscribe(m2);
        natsSubscription_Destroy(m1);
        natsSubscription_Destroy(m2);
    }

    stage = "ordered";
    jsSubOptions_Init(&so);
    so.Ordered = true;
    so.Config.Heartbeat = (int64_t)1000 * 1000 * 1000;
    MUST_JS(js_SubscribeSync(&sub, js, "apush.even", NULL, &so, &jerr), jerr);
    {
        int got = 0, in_order = 1;
        uint64_t last = 0;
        while (got < N / 2) {
            MUST(natsSubscription_NextMsg(&msg, sub, 3000));
            jsMsgMetaData *meta = NULL;
            MUST(natsMsg_GetMetaData(&meta, msg));
            if (meta->Sequence.Stream <= last) in_order = 0;
            last = meta->Sequence.Stream;
            jsMsgMetaData_Destroy(meta);
            natsMsg_Destroy(msg);
            got++;
        }
        KV_INT("orderedReceived", got);
        KV_BOOL("orderedInOrder", in_order);
        KV_INT("orderedLastSeq", last);
    }
    natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);

    stage = "close";
    MUST_JS(js_DeleteStream(js, "APUSH", NULL, &jerr), jerr);
    jsCtx_Destroy(js);
    MUST(natsConnection_FlushTimeout(nc, 2000));
    natsConnection_Destroy(nc);
    finish(1, NATS_OK, 0);
    return 0;
}
