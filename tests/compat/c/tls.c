/*
 * libnats over TLS: `tls <pki-dir> <url>`. The directory holds ca.pem, client-cert.pem,
 * client-key.pem and other-ca.pem (tests/helpers/certs.py); the server requires client
 * certificates (tls { verify: true }).
 *
 * Records: a connection that trusts the CA and presents the client certificate (pub/sub with
 * headers, request/reply, 200 kB payload), one with an expected hostname from the certificate's
 * other DNS name, and the status of three that must fail: no client certificate, a server
 * verified against the wrong CA, and a plaintext connection.
 */
#include "compat.h"

static void on_echo(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)sub; (void)closure;
    natsConnection_Publish(nc, natsMsg_GetReply(msg), natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
    natsMsg_Destroy(msg);
}

static natsStatus try_connect(natsConnection **nc, const char *url, const char *dir, const char *ca,
                              bool cert, const char *hostname, bool secure)
{
    natsOptions *opts = NULL;
    char ca_path[1024], cert_path[1024], key_path[1024];
    snprintf(ca_path, sizeof(ca_path), "%s/%s", dir, ca);
    snprintf(cert_path, sizeof(cert_path), "%s/client-cert.pem", dir);
    snprintf(key_path, sizeof(key_path), "%s/client-key.pem", dir);
    natsStatus s = natsOptions_Create(&opts);
    if (s == NATS_OK) s = natsOptions_SetURL(opts, url);
    if (s == NATS_OK) s = natsOptions_SetAllowReconnect(opts, false);
    if (s == NATS_OK) s = natsOptions_SetTimeout(opts, 5000);
    if (s == NATS_OK && secure) s = natsOptions_SetSecure(opts, true);
    if (s == NATS_OK && secure) s = natsOptions_LoadCATrustedCertificates(opts, ca_path);
    if (s == NATS_OK && cert) s = natsOptions_LoadCertificatesChain(opts, cert_path, key_path);
    if (s == NATS_OK && hostname) s = natsOptions_SetExpectedHostname(opts, hostname);
    if (s == NATS_OK) s = natsConnection_Connect(nc, opts);
    natsOptions_Destroy(opts);
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: %s pki-dir url\n", argv[0]); return 2; }
    const char *dir = argv[1], *url = argv[2];
    natsConnection *nc = NULL;
    natsSubscription *sub = NULL, *echo = NULL;
    natsMsg *msg = NULL;

    stage = "connect";
    MUST(try_connect(&nc, url, dir, "ca.pem", true, NULL, true));

    stage = "pubsub";
    MUST(natsConnection_SubscribeSync(&sub, nc, "tls.>"));
    natsMsg *hm = NULL;
    MUST(natsMsg_Create(&hm, "tls.h", NULL, "body", 4));
    MUST(natsMsgHeader_Set(hm, "Trace", "c-1"));
    MUST(natsConnection_PublishMsg(nc, hm));
    natsMsg_Destroy(hm);
    MUST(natsSubscription_NextMsg(&msg, sub, 3000));
    const char *trace = NULL;
    MUST(natsMsgHeader_Get(msg, "Trace", &trace));
    KV_STR("subject", natsMsg_GetSubject(msg));
    KV_STR("trace", trace);
    natsMsg_Destroy(msg);

    stage = "large";
    static char big[200000];
    for (size_t i = 0; i < sizeof(big); i++) big[i] = (char)(i % 251);
    MUST(natsConnection_Publish(nc, "tls.big", big, sizeof(big)));
    MUST(natsSubscription_NextMsg(&msg, sub, 3000));
    KV_BOOL("largeOk", natsMsg_GetDataLength(msg) == (int)sizeof(big)
                       && memcmp(natsMsg_GetData(msg), big, sizeof(big)) == 0);
    natsMsg_Destroy(msg);
    natsSubscription_Destroy(sub);

    stage = "request";
    MUST(natsConnection_Subscribe(&echo, nc, "tls.echo", on_echo, NULL));
    MUST(natsConnection_Flush(nc));
    MUST(natsConnection_RequestString(&msg, nc, "tls.echo", "ping", 3000));
    KV_BOOL("reply", natsMsg_GetDataLength(msg) == 4);
    natsMsg_Destroy(msg);
    natsSubscription_Destroy(echo);
    natsConnection_Destroy(nc);
    nc = NULL;

    stage = "hostname";
    natsStatus s = try_connect(&nc, url, dir, "ca.pem", true, "server.natsd.test", true);
    KV_STATUS("expectedHostname", s);
    natsConnection_Destroy(nc);
    nc = NULL;

    stage = "refusals";
    s = try_connect(&nc, url, dir, "ca.pem", false, NULL, true);
    KV_BOOL("noClientCertRefused", s != NATS_OK);
    natsConnection_Destroy(nc);
    nc = NULL;
    s = try_connect(&nc, url, dir, "other-ca.pem", true, NULL, true);
    KV_BOOL("wrongCaRefused", s != NATS_OK);
    natsConnection_Destroy(nc);
    nc = NULL;
    s = try_connect(&nc, url, dir, "ca.pem", false, NULL, false);
    KV_STATUS("plaintext", s);
    natsConnection_Destroy(nc);

    finish(1, NATS_OK, 0);
    return 0;
}
