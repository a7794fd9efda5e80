/*
 * Less common libnats JetStream paths, each recorded under its own key (a call that fails
 * records its status text rather than aborting, so one incompatibility does not hide the rest):
 * js_UpdateStream, js_StreamNames / js_Streams, js_PublishMsg with headers + js_GetMsg headers,
 * js_DirectGetMsg (seq / last-by-subject / next-by-subject), natsSubscription_FetchRequest with
 * MaxBytes, NoWait and Heartbeat, js_PurgeStream with a subject filter, kvStore_Purge and
 * kvStore_PurgeDeletes, natsMsg_Term, and natsConnection_Drain.
 */
#include "compat.h"

int main(int argc, char **argv)
{
    natsConnection   *nc = compat_connect(argc, argv, "compat-c-js-extras");
    jsCtx            *js = NULL;
    jsErrCode         jerr = 0;
    jsStreamInfo     *si = NULL;
    jsPubAck         *pa = NULL;
    natsSubscription *sub = NULL;
    natsMsg          *msg = NULL;
    natsMsgList       list = {0};
    natsStatus        s;

    stage = "setup";
    MUST(natsConnection_JetStream(&js, nc, NULL));
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    const char *subjects[] = {"cx.>"};
    sc.Name = "CX";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.AllowDirect = true;
    MUST_JS(js_AddStream(&si, js, &sc, NULL, &jerr), jerr);
    jsStreamInfo_Destroy(si);
    si = NULL;

    stage = "update-stream";
    sc.MaxMsgs = 1000;
    sc.Description = "updated by libnats";
    jerr = 0;
    s = js_UpdateStream(&si, js, &sc, NULL, &jerr);
    KV_STATUS("updateStatus", s);
    if (s == NATS_OK) {
        KV_INT("updateMaxMsgs", si->Config->MaxMsgs);
        KV_STR("updateDescription", si->Config->Description);
        jsStreamInfo_Destroy(si);
    }
    si = NULL;

    stage = "names-list";
    {
        jsStreamNamesList *names = NULL;
        jsStreamInfoList  *infos = NULL;
        s = js_StreamNames(&names, js, NULL, &jerr);
        KV_STATUS("namesStatus", s);
        if (s == NATS_OK) {
            KEY("names"); out_raw("[");
            for (int i = 0; i < names->Count; i++) { out_raw(i ? "," : ""); out_str(names->List[i]); }
            out_raw("],");
            jsStreamNamesList_Destroy(names);
        }
        s = js_Streams(&infos, js, NULL, &jerr);
        KV_STATUS("listStatus", s);
        if (s == NATS_OK) {
            KV_INT("listCount", infos->Count);
            jsStreamInfoList_Destroy(infos);
        }
    }

    stage = "publish-headers";
    {
        natsMsg *hm = NULL;
        MUST(natsMsg_Create(&hm, "cx.h", NULL, "with-hdr", 8));
        MUST(natsMsgHeader_Set(hm, "App-Tag", "red"));
        MUST_JS(js_PublishMsg(&pa, js, hm, NULL, &jerr), jerr);
        KV_INT("hdrSeq", pa->Sequence);
        jsPubAck_Destroy(pa);
        pa = NULL;
        natsMsg_Destroy(hm);
        for (int i = 0; i < 4; i++) {
            MUST_JS(js_Publish(&pa, js, i % 2 ? "cx.b" : "cx.a", "data", 4, NULL, &jerr), jerr);
            jsPubAck_Destroy(pa);
            pa = NULL;
        }
        s = js_GetMsg(&msg, js, "CX", 1, NULL, &jerr);
        KV_STATUS("getMsgStatus", s);
        if (s == NATS_OK) {
            const char *v = NULL;
            natsMsgHeader_Get(msg, "App-Tag", &v);
            KV_STR("getMsgHeader", v);
            natsMsg_Destroy(msg);
        }
        msg = NULL;
    }

    stage = "direct-get";
    {
        jsDirectGetMsgOptions dg;
        jsDirectGetMsgOptions_Init(&dg);
        dg.Sequence = 2;
        s = js_DirectGetMsg(&msg, js, "CX", NULL, &dg);
        KV_STATUS("directSeqStatus", s);
        if (s == NATS_OK) { KV_STR("directSeqSubject", natsMsg_GetSubject(msg)); natsMsg_Destroy(msg); }
        msg = NULL;
        jsDirectGetMsgOptions_Init(&dg);
        dg.LastBySubject = "cx.a";
        s = js_DirectGetMsg(&msg, js, "CX", NULL, &dg);
        KV_STATUS("directLastStatus", s);
        if (s == NATS_OK) { KV_INT("directLastSeq", natsMsg_GetSequence(msg)); natsMsg_Destroy(msg); }
        msg = NULL;
        jsDirectGetMsgOptions_Init(&dg);
        dg.NextBySubject = "cx.b";
        dg.Sequence = 4;
        s = js_DirectGetMsg(&msg, js, "CX", NULL, &dg);
        KV_STATUS("directNextStatus", s);
        if (s == NATS_OK) { KV_INT("directNextSeq", natsMsg_GetSequence(msg)); natsMsg_Destroy(msg); }
        msg = NULL;
        jsDirectGetMsgOptions_Init(&dg);
        dg.Sequence = 99;
        s = js_DirectGetMsg(&msg, js, "CX", NULL, &dg);
        KV_STATUS("directMissingStatus", s);
        if (s == NATS_OK) natsMsg_Destroy(msg);
        msg = NULL;
    }

    stage = "fetch-request";
    {
        jsSubOptions so;
        jsSubOptions_Init(&so);
        MUST_JS(js_PullSubscribe(&sub, js, "cx.>", "fr", NULL, &so, &jerr), jerr);
        jsFetchRequest fr;
        jsFetchRequest_Init(&fr);
        fr.Batch = 10;
        fr.MaxBytes = 150; /* each record is ~50-70 bytes on the wire accounting */
        fr.Expires = (int64_t)1000 * 1000 * 1000;
        s = natsSubscription_FetchRequest(&list, sub, &fr);
        KV_STATUS("fetchBytesStatus", s);
        KV_INT("fetchBytesCount", list.Count);
        for (int i = 0; i < list.Count; i++) natsMsg_Ack(list.Msgs[i], NULL);
        natsMsgList_Destroy(&list);

        jsFetchRequest_Init(&fr);
        fr.Batch = 10;
        fr.NoWait = true;
        fr.Expires = (int64_t)1000 * 1000 * 1000;
        s = natsSubscription_FetchRequest(&list, sub, &fr);
        KV_STATUS("fetchNoWaitStatus", s);
        KV_INT("fetchNoWaitCount", list.Count);
        for (int i = 0; i < list.Count; i++) natsMsg_Ack(list.Msgs[i], NULL);
        natsMsgList_Destroy(&list);
        natsSubscription_Destroy(sub);
        sub = NULL;

        /* An empty consumer with heartbeats requested: heartbeats, then the request expires. */
        jsSubOptions_Init(&so);
        MUST_JS(js_PullSubscribe(&sub, js, "cx.empty", "hb", NULL, &so, &jerr), jerr);
        jsFetchRequest_Init(&fr);
        fr.Batch = 1;
        fr.Expires = (int64_t)1500 * 1000 * 1000;
        fr.Heartbeat = (int64_t)500 * 1000 * 1000;
        s = natsSubscription_FetchRequest(&list, sub, &fr);
        KV_STATUS("fetchHeartbeatEmptyStatus", s);
        KV_INT("fetchHeartbeatEmptyCount", list.Count);
        natsMsgList_Destroy(&list);
        natsSubscription_Destroy(sub);
        sub = NULL;
    }

    stage = "term";
    {
        jsSubOptions so;
        jsSubOptions_Init(&so);
        MUST_JS(js_PullSubscribe(&sub, js, "cx.t", "term", NULL, &so, &jerr), jerr);
        MUST_JS(js_Publish(&pa, js, "cx.t", "poison", 6, NULL, &jerr), jerr);
        jsPubAck_Destroy(pa);
        pa = NULL;
        MUST_JS(natsSubscription_Fetch(&list, sub, 1, 2000, &jerr), jerr);
        MUST(natsMsg_Term(list.Msgs[0], NULL));
        natsMsgList_Destroy(&list);
        MUST(natsConnection_Flush(nc));
        s = natsSubscription_Fetch(&list, sub, 1, 500, &jerr);
        KV_STATUS("afterTermStatus", s);
        natsMsgList_Destroy(&list);
        jsConsumerInfo *ci = NULL;
        MUST_JS(js_GetConsumerInfo(&ci, js, "CX", "term", NULL, &jerr), jerr);
        KV_INT("afterTermAckPending", ci->NumAckPending);
        KV_INT("afterTermAckFloor", ci->AckFloor.Stream);
        jsConsumerInfo_Destroy(ci);
        natsSubscription_Destroy(sub);
        sub = NULL;
    }

    stage = "purge-filtered";
    {
        jsOptions o;
        jsOptions_Init(&o);
        o.Stream.Purge.Subject = "cx.a";
        jerr = 0;
        s = js_PurgeStream(js, "CX", &o, &jerr);
        KV_STATUS("purgeStatus", s);
        MUST_JS(js_GetStreamInfo(&si, js, "CX", NULL, &jerr), jerr);
        KV_INT("afterPurgeMsgs", si->State.Msgs);
        jsStreamInfo_Destroy(si);
        si = NULL;
    }

    stage = "kv-purge";
    {
        kvStore *kv = NULL;
        kvConfig kc;
        kvConfig_Init(&kc);
        kc.Bucket = "cpurge";
        kc.History = 3;
        MUST(js_CreateKeyValue(&kv, js, &kc));
        uint64_t rev = 0;
        MUST(kvStore_PutString(&rev, kv, "a", "1"));
        MUST(kvStore_PutString(&rev, kv, "a", "2"));
        MUST(kvStore_PutString(&rev, kv, "b", "1"));
        s = kvStore_Purge(kv, "a", NULL);
        KV_STATUS("kvPurgeStatus", s);
        kvEntryList hist = {0};
        s = kvStore_History(&hist, kv, "a", NULL);
        KV_STATUS("kvHistoryAfterPurgeStatus", s);
        KV_INT("kvHistoryAfterPurge", hist.Count);
        if (hist.Count > 0) KV_INT("kvHistoryOp", kvEntry_Operation(hist.Entries[0]));
        kvEntryList_Destroy(&hist);
        MUST(kvStore_Delete(kv, "b"));
        kvPurgeOptions po;
        kvPurgeOptions_Init(&po);
        po.DeleteMarkersOlderThan = -1; /* remove every marker now */
        s = kvStore_PurgeDeletes(kv, &po);
        KV_STATUS("kvPurgeDeletesStatus", s);
        kvStatus *st = NULL;
        MUST(kvStore_Status(&st, kv));
        KV_INT("kvValuesAfterPurgeDeletes", kvStatus_Values(st));
        kvStatus_Destroy(st);
        kvStore_Destroy(kv);
    }

    stage = "drain";
    {
        natsSubscription *ds = NULL;
        MUST(natsConnection_SubscribeSync(&ds, nc, "drain.me"));
        for (int i = 0; i < 5; i++) MUST(natsConnection_PublishString(nc, "drain.me", "d"));
        MUST(natsConnection_Flush(nc));
        int pending = 0;
        natsSubscription_GetPending(ds, &pending, NULL);
        KV_INT("drainPending", pending);
        natsSubscription_Destroy(ds);
        jsCtx_Destroy(js);
        s = natsConnection_DrainTimeout(nc, 3000);
        KV_STATUS("drainStatus", s);
        for (int i = 0; i < 300 && !natsConnection_IsClosed(nc); i++) nats_Sleep(10);
        KV_BOOL("drainClosed", natsConnection_IsClosed(nc));
    }

    natsConnection_Destroy(nc);
    finish(1, NATS_OK, 0);
    return 0;
}
