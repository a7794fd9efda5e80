/*
 * libnats with nkeys and JWT credentials: `identities <mode> <good> <bad> <url>`.
 * mode "nkey": the files hold user seeds and <file>.pub the matching public key
 *   (natsOptions_SetNKeyFromSeed); mode "creds": .creds files (natsOptions_SetUserCredentialsFromFiles),
 *   and "creds+token" also sets a token (it must not get in the way of the JWT).
 * The good identity connects and round-trips a request; the bad one is refused: the status and the
 * server's error text are recorded.
 */
#include "compat.h"

static void on_echo(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)sub; (void)closure;
    natsConnection_Publish(nc, natsMsg_GetReply(msg), natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
    natsMsg_Destroy(msg);
}

static natsStatus attempt(const char *mode, const char *file, const char *url, natsConnection **out)
{
    natsOptions *opts = NULL;
    natsStatus   s;
    char         pub[128] = {0};
    MUST(natsOptions_Create(&opts));
    MUST(natsOptions_SetURL(opts, url));
    MUST(natsOptions_SetAllowReconnect(opts, false));
    MUST(natsOptions_SetTimeout(opts, 5000));
    if (strcmp(mode, "nkey") == 0) {
        char path[4096];
        snprintf(path, sizeof(path), "%s.pub", file);
        FILE *f = fopen(path, "r");
        if (f == NULL || fgets(pub, sizeof(pub), f) == NULL) { stage = "read-pub"; finish(0, NATS_ERR, 0); }
        fclose(f);
        pub[strcspn(pub, "\r\n")] = 0;
        MUST(natsOptions_SetNKeyFromSeed(opts, pub, file));
    } else {
        MUST(natsOptions_SetUserCredentialsFromFiles(opts, file, NULL));
        if (strcmp(mode, "creds+token") == 0) MUST(natsOptions_SetToken(opts, "some-token"));
    }
    s = natsConnection_Connect(out, opts);
    natsOptions_Destroy(opts);
    return s;
}

int main(int argc, char **argv)
{
    natsConnection   *nc = NULL;
    natsSubscription *sub = NULL;
    natsMsg          *reply = NULL;
    if (argc < 5) { fprintf(stderr, "usage: %s mode good bad url\n", argv[0]); exit(2); }
    const char *mode = argv[1], *url = argv[4];

    stage = "good";
    MUST(attempt(mode, argv[2], url, &nc));
    MUST(natsConnection_Subscribe(&sub, nc, "id.echo", on_echo, NULL));
    MUST(natsConnection_RequestString(&reply, nc, "id.echo", "ping", 2000));
    KEY("good"); out_raw("\"%.*s\",", natsMsg_GetDataLength(reply), natsMsg_GetData(reply));
    natsMsg_Destroy(reply);
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(nc);
    nc = NULL;

    stage = "bad";
    natsStatus s = attempt(mode, argv[3], url, &nc);
    KV_STATUS("badStatus", s);
    KV_STR("badError", nats_GetLastError(NULL));
    if (nc != NULL) natsConnection_Destroy(nc);
    finish(1, NATS_OK, 0);
    return 0;
}
