/*
 * Key-Value with libnats: js_CreateKeyValue (history 5; libnats sends deny_delete:true and
 * allow_direct:true), put/get (direct get), create-if-absent, update with a right and a stale
 * revision, watch (initial values, the NULL "caught up" marker, then live updates and a delete
 * marker), delete -> get says NOT_FOUND, keys, history, status, bucket delete.
 */
#include "compat.h"

static const char *op_name(kvOperation op)
{
    switch (op) {
    case kvOp_Put: return "PUT";
    case kvOp_Delete: return "DEL";
    case kvOp_Purge: return "PURGE";
    default: return "?";
    }
}

/* {"key":..,"value":..,"rev":..,"op":..} for an entry (or null). */
static void entry(kvEntry *e)
{
    if (e == NULL) { out_raw("null"); return; }
    out_raw("{\"key\":");
    out_str(kvEntry_Key(e));
    out_raw(",\"value\":\"%.*s\",\"rev\":%llu,\"op\":\"%s\"}", kvEntry_ValueLen(e),
            (const char *)kvEntry_Value(e), (unsigned long long)kvEntry_Revision(e), op_name(kvEntry_Operation(e)));
}

int main(int argc, char **argv)
{
    natsConnection *nc = compat_connect(argc, argv, "compat-c-kv");
    jsCtx          *js = NULL;
    kvStore        *kv = NULL;
    kvEntry        *e = NULL;
    uint64_t        rev = 0, rev1 = 0;
    natsStatus      s;

    stage = "create-bucket";
    MUST(natsConnection_JetStream(&js, nc, NULL));
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = "ckv";
    kc.History = 5;
    MUST(js_CreateKeyValue(&kv, js, &kc));
    KV_STR("bucket", kvStore_Bucket(kv));

    stage = "put-get";
    MUST(kvStore_PutString(&rev1, kv, "k1", "v1"));
    KV_INT("put1", rev1);
    MUST(kvStore_PutString(&rev, kv, "k2", "v2"));
    KV_INT("put2", rev);
    MUST(kvStore_Get(&e, kv, "k1"));
    KEY("get1"); entry(e); out_raw(",");
    kvEntry_Destroy(e);
    e = NULL;
    s = kvStore_Get(&e, kv, "missing");
    KV_STATUS("getMissingStatus", s);
    if (s == NATS_OK) kvEntry_Destroy(e);
    e = NULL;

    stage = "create";
    MUST(kvStore_CreateString(&rev, kv, "k3", "new"));
    KV_INT("create", rev);
    s = kvStore_CreateString(&rev, kv, "k3", "again");
    KV_STATUS("createExistingStatus", s);

    stage = "update";
    MUST(kvStore_UpdateString(&rev, kv, "k1", "v1b", rev1));
    KV_INT("update", rev);
    s = kvStore_UpdateString(&rev, kv, "k1", "stale", rev1);
    KV_STATUS("updateStaleStatus", s);

    stage = "watch";
    kvWatcher *w = NULL;
    MUST(kvStore_WatchAll(&w, kv, NULL));
    KEY("watchInitial"); out_raw("[");
    {
        int first = 1;
        for (;;) {
            MUST(kvWatcher_Next(&e, w, 3000));
            if (e == NULL) break; /* caught up with the initial values */
            if (!first) out_raw(",");
            first = 0;
            entry(e);
            kvEntry_Destroy(e);
        }
    }
    out_raw("],");
    MUST(kvStore_PutString(&rev, kv, "k2", "v2b"));
    MUST(kvStore_Delete(kv, "k3"));
    KEY("watchLive"); out_raw("[");
    for (int i = 0; i < 2; i++) {
        MUST(kvWatcher_Next(&e, w, 3000));
        if (i) out_raw(",");
        entry(e);
        kvEntry_Destroy(e);
    }
    out_raw("],");
    kvWatcher_Stop(w);
    kvWatcher_Destroy(w);
    e = NULL;

    stage = "after-delete";
    s = kvStore_Get(&e, kv, "k3");
    KV_STATUS("getDeletedStatus", s);
    if (s == NATS_OK) kvEntry_Destroy(e);
    e = NULL;

    stage = "keys";
    kvKeysList keys = {0};
    MUST(kvStore_Keys(&keys, kv, NULL));
    KEY("keys"); out_raw("[");
    {
        /* Sort so the JSON does not depend on delivery order. */
        for (int i = 0; i < keys.Count; i++)
            for (int j = i + 1; j < keys.Count; j++)
                if (strcmp(keys.Keys[i], keys.Keys[j]) > 0) { char *t = keys.Keys[i]; keys.Keys[i] = keys.Keys[j]; keys.Keys[j] = t; }
        for (int i = 0; i < keys.Count; i++) { out_raw(i ? "," : ""); out_str(keys.Keys[i]); }
    }
    out_raw("],");
    kvKeysList_Destroy(&keys);

    stage = "history";
    kvEntryList hist = {0};
    MUST(kvStore_History(&hist, kv, "k1", NULL));
    KEY("history"); out_raw("[");
    for (int i = 0; i < hist.Count; i++) { out_raw(i ? "," : ""); entry(hist.Entries[i]); }
    out_raw("],");
    kvEntryList_Destroy(&hist);

    stage = "get-revision";
    MUST(kvStore_GetRevision(&e, kv, "k1", rev1));
    KEY("getRev1"); entry(e); out_raw(",");
    kvEntry_Destroy(e);

    stage = "status";
    kvStatus *st = NULL;
    MUST(kvStore_Status(&st, kv));
    KV_INT("statusValues", kvStatus_Values(st));
    KV_INT("statusHistory", kvStatus_History(st));
    kvStatus_Destroy(st);

    stage = "delete-bucket";
    kvStore_Destroy(kv);
    MUST(js_DeleteKeyValue(js, "ckv"));
    kv = NULL;
    s = js_KeyValue(&kv, js, "ckv");
    KV_STATUS("openDeletedStatus", s);
    if (s == NATS_OK) kvStore_Destroy(kv);

    stage = "close";
    jsCtx_Destroy(js);
    MUST(natsConnection_FlushTimeout(nc, 2000));
    natsConnection_Destroy(nc);
    finish(1, NATS_OK, 0);
    return 0;
}
