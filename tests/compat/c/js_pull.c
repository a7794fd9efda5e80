/*
 * JetStream with libnats: stream create (libnats sends max_msgs_per_subject:0 and a full config),
 * js_Publish with MsgId de-duplication and expectations, durable js_PullSubscribe + Fetch + Ack,
 * Fetch on an empty consumer (timeout), Nak -> redelivery, consumer/stream info, get a stored
 * message, API errors for a missing stream/consumer, stream delete.
 */
#include "compat.h"

static void pubak(const char *key, jsPubAck *pa)
{
    KEY(key);
    out_raw("{\"stream\":");
    out_str(pa ? pa->Stream : NULL);
    out_raw(",\"seq\":%llu,\"duplicate\":%s},", pa ? (unsigned long long)pa->Sequence : 0ULL,
            pa && pa->Duplicate ? "true" : "false");
}

int main(int argc, char **argv)
{
    natsConnection   *nc = compat_connect(argc, argv, "compat-c-js-pull");
    jsCtx            *js = NULL;
    jsErrCode         jerr = 0;
    jsStreamInfo     *si = NULL;
    jsPubAck         *pa = NULL;
    natsSubscription *sub = NULL;
    natsMsgList       list = {0};
    natsStatus        s;

    stage = "stream-create";
    MUST(natsConnection_JetStream(&js, nc, NULL));
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    const char *subjects[] = {"csmoke.>"};
    sc.Name = "CSMOKE";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    MUST_JS(js_AddStream(&si, js, &sc, NULL, &jerr), jerr);
    KV_STR("streamName", si->Config->Name);
    KV_INT("maxMsgsPerSubject", si->Config->MaxMsgsPerSubject);
    KV_INT("duplicates", si->Config->Duplicates);
    jsStreamInfo_Destroy(si);

    stage = "publish";
    for (int i = 0; i < 3; i++) {
        MUST_JS(js_Publish(&pa, js, "csmoke.a", "hello", 5, NULL, &jerr), jerr);
        if (i == 2) pubak("pub3", pa);
        jsPubAck_Destroy(pa);
        pa = NULL;
    }

    stage = "publish-msgid";
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = "dedupe-1";
    MUST_JS(js_Publish(&pa, js, "csmoke.b", "x", 1, &po, &jerr), jerr);
    pubak("idFirst", pa);
    jsPubAck_Destroy(pa);
    MUST_JS(js_Publish(&pa, js, "csmoke.b", "x", 1, &po, &jerr), jerr);
    pubak("idDuplicate", pa);
    jsPubAck_Destroy(pa);
    pa = NULL;

    stage = "publish-expect";
    jsPubOptions_Init(&po);
    po.ExpectLastSeq = 1;
    jerr = 0;
    s = js_Publish(&pa, js, "csmoke.b", "y", 1, &po, &jerr);
    KV_STATUS("expectLastSeqStatus", s);
    KV_INT("expectLastSeqErrCode", jerr);
    if (s == NATS_OK) jsPubAck_Destroy(pa);
    pa = NULL;
    jsPubOptions_Init(&po);
    po.ExpectStream = "CSMOKE";
    po.ExpectLastSeq = 4;
    MUST_JS(js_Publish(&pa, js, "csmoke.b", "z", 1, &po, &jerr), jerr);
    pubak("expectOk", pa);
    jsPubAck_Destroy(pa);
    pa = NULL;

    stage = "publish-no-stream";
    jerr = 0;
    s = js_Publish(&pa, js, "not.a.stream", "x", 1, NULL, &jerr);
    KV_STATUS("noStreamStatus", s);
    if (s == NATS_OK) jsPubAck_Destroy(pa);
    pa = NULL;

    stage = "pull-subscribe";
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Config.FilterSubject = "csmoke.a";
    MUST_JS(js_PullSubscribe(&sub, js, "csmoke.a", "cdur", NULL, &so, &jerr), jerr);

    stage = "fetch";
    MUST_JS(natsSubscription_Fetch(&list, sub, 3, 5000, &jerr), jerr);
    KV_INT("fetched", list.Count);
    KEY("fetchedMeta"); out_raw("[");
    for (int i = 0; i < list.Count; i++) {
        jsMsgMetaData *meta = NULL;
        MUST(natsMsg_GetMetaData(&meta, list.Msgs[i]));
        out_raw("%s{\"stream\":", i ? "," : "");
        out_str(meta->Stream);
        out_raw(",\"consumer\":");
        out_str(meta->Consumer);
        out_raw(",\"sseq\":%llu,\"dseq\":%llu,\"delivered\":%llu,\"pending\":%llu,\"data\":\"%.*s\"}",
                (unsigned long long)meta->Sequence.Stream, (unsigned long long)meta->Sequence.Consumer,
                (unsigned long long)meta->NumDelivered, (unsigned long long)meta->NumPending,
                natsMsg_GetDataLength(list.Msgs[i]), natsMsg_GetData(list.Msgs[i]));
        jsMsgMetaData_Destroy(meta);
        MUST(natsMsg_Ack(list.Msgs[i], NULL));
    }
    out_raw("],");
    natsMsgList_Destroy(&list);
    MUST(natsConnection_Flush(nc));

    stage = "consumer-info";
    jsConsumerInfo *ci = NULL;
    /* Acks are published without a reply: a server may apply them after answering a request sent
     * right behind them (nats-server queues them internally), so wait up to 2 s for the floor. */
    for (int tries = 0;; tries++) {
        MUST_JS(js_GetConsumerInfo(&ci, js, "CSMOKE", "cdur", NULL, &jerr), jerr);
        if (ci->AckFloor.Stream >= 3 || tries >= 40) break;
        jsConsumerInfo_Destroy(ci);
        ci = NULL;
        nats_Sleep(50);
    }
    KV_INT("ackFloorStream", ci->AckFloor.Stream);
    KV_INT("numAckPending", ci->NumAckPending);
    KV_INT("numPending", ci->NumPending);
    KV_STR("ackPolicy", ci->Config->AckPolicy == js_AckExplicit ? "explicit" : "other");
    jsConsumerInfo_Destroy(ci);

    stage = "fetch-empty";
    jerr = 0;
    s = natsSubscription_Fetch(&list, sub, 1, 500, &jerr);
    KV_STATUS("emptyFetchStatus", s);
    KV_INT("emptyFetchCount", list.Count);
    natsMsgList_Destroy(&list);

    stage = "nak";
    MUST_JS(js_Publish(&pa, js, "csmoke.a", "again", 5, NULL, &jerr), jerr);
    jsPubAck_Destroy(pa);
    pa = NULL;
    MUST_JS(natsSubscription_Fetch(&list, sub, 1, 3000, &jerr), jerr);
    MUST(natsMsg_Nak(list.Msgs[0], NULL));
    natsMsgList_Destroy(&list);
    MUST_JS(natsSubscription_Fetch(&list, sub, 1, 3000, &jerr), jerr);
    {
        jsMsgMetaData *meta = NULL;
        MUST(natsMsg_GetMetaData(&meta, list.Msgs[0]));
        KV_INT("nakRedelivered", meta->NumDelivered);
        KV_INT("nakSeq", meta->Sequence.Stream);
        jsMsgMetaData_Destroy(meta);
        MUST_JS(natsMsg_AckSync(list.Msgs[0], NULL, &jerr), jerr);
    }
    natsMsgList_Destroy(&list);
    natsSubscription_Destroy(sub);

    stage = "get-msg";
    natsMsg *got = NULL;
    MUST_JS(js_GetMsg(&got, js, "CSMOKE", 4, NULL, &jerr), jerr);
    KV_STR("getMsgSubject", natsMsg_GetSubject(got));
    natsMsg_Destroy(got);
    got = NULL;
    MUST_JS(js_GetLastMsg(&got, js, "CSMOKE", "csmoke.b", NULL, &jerr), jerr);
    KV_INT("lastBySubjSeq", natsMsg_GetSequence(got));
    natsMsg_Destroy(got);

    stage = "stream-info";
    MUST_JS(js_GetStreamInfo(&si, js, "CSMOKE", NULL, &jerr), jerr);
    KV_INT("msgs", si->State.Msgs);
    KV_INT("lastSeq", si->State.LastSeq);
    KV_INT("consumers", si->State.Consumers);
    jsStreamInfo_Destroy(si);
    si = NULL;

    stage = "errors";
    jerr = 0;
    s = js_GetStreamInfo(&si, js, "NOPE", NULL, &jerr);
    KV_STATUS("missingStreamStatus", s);
    KV_INT("missingStreamErrCode", jerr);
    if (s == NATS_OK) jsStreamInfo_Destroy(si);
    ci = NULL;
    jerr = 0;
    s = js_GetConsumerInfo(&ci, js, "CSMOKE", "ghost", NULL, &jerr);
    KV_STATUS("missingConsumerStatus", s);
    KV_INT("missingConsumerErrCode", jerr);
    if (s == NATS_OK) jsConsumerInfo_Destroy(ci);

    stage = "delete";
    MUST_JS(js_DeleteConsumer(js, "CSMOKE", "cdur", NULL, &jerr), jerr);
    MUST_JS(js_DeleteStream(js, "CSMOKE", NULL, &jerr), jerr);
    jerr = 0;
    s = js_DeleteStream(js, "CSMOKE", NULL, &jerr);
    KV_INT("deleteAgainErrCode", jerr);

    stage = "close";
    jsCtx_Destroy(js);
    MUST(natsConnection_FlushTimeout(nc, 2000));
    natsConnection_Destroy(nc);
    finish(1, NATS_OK, 0);
    return 0;
}
