#pragma once

#include <QByteArray>
#include <QString>
#include <QUrl>

#include <memory>

namespace once {

class BlockingHttpClient;

// The OAuth 2.0 access token every call to the Pub/Sub REST API carries ("Authorization:
// Bearer TOKEN"), found where Google's own client libraries look, first match wins:
//   1. GOOGLE_OAUTH_ACCESS_TOKEN: a token used as it is and never refreshed (one from
//      `gcloud auth print-access-token` lasts an hour: for a short run);
//   2. GOOGLE_APPLICATION_CREDENTIALS: a service-account key file, whose key signs a JWT
//      that its token_uri exchanges for a token (RFC 7523; Google's "Using OAuth 2.0 for
//      Server to Server Applications");
//   3. the metadata server of the Compute Engine, GKE or Cloud Run instance we run on
//      (GCE_METADATA_HOST, else metadata.google.internal). It is asked once by
//      fromEnvironment(), so that off Google Cloud the answer is "no credentials" at start
//      and not a failed call later.
// A fetched token is kept and fetched anew once less than RefreshMargin of it is left, so
// asking before every call costs a clock read. A refresh that fails while the kept token
// still has time left is logged and retried RetryAfterFailedRefresh later: Google's token
// endpoint having a bad minute does not stop the queue.
//
// Secrets: the private key, the signed assertion and the tokens are never logged, shown
// or put in an error, not even in part; a server's words quoted in an error are scrubbed
// of them first. source() says where the token comes from without any of them.
//
// Not thread-safe: one caller at a time, like the queue that owns it. accessToken() blocks
// while it fetches (on a BlockingHttpClient of its own: a token is fetched about once an
// hour, from another host than the API's).
class GoogleCredentials final
{
    Q_DISABLE_COPY_MOVE(GoogleCredentials)

public:
    static constexpr qint64 RefreshMarginMs = 5 * 60 * 1000;
    static constexpr qint64 RetryAfterFailedRefreshMs = 30 * 1000;
    // What a service-account token is asked for: Pub/Sub, and nothing else.
    static constexpr char PubSubScope[] = "https://www.googleapis.com/auth/pubsub";

    // nullptr with a one-line error when none of the three is there or usable: a key file
    // that cannot be read or lacks a field (the error names the file and the field), a
    // metadata server that does not answer.
    static std::unique_ptr<GoogleCredentials> fromEnvironment(QString *error);
    ~GoogleCredentials();

    // A token valid for at least RefreshMargin more (or, after a failed refresh, for as
    // long as it lasts), fetched if need be; empty with a one-line error if none can be had.
    QByteArray accessToken(QString *error);

    // "service account NAME@PROJECT.iam.gserviceaccount.com from FILE", "the metadata
    // server at HOST", "GOOGLE_OAUTH_ACCESS_TOKEN": for logs and errors.
    QString source() const { return m_source; }

private:
    enum class Kind
    {
        GivenToken,     // GOOGLE_OAUTH_ACCESS_TOKEN
        ServiceAccount, // GOOGLE_APPLICATION_CREDENTIALS
        MetadataServer,
    };
    struct ServiceAccount; // the key file's fields and its parsed key (OpenSSL), in the .cpp

    GoogleCredentials(Kind kind, QString source);
    bool refresh(QString *error);

    Kind m_kind;
    QString m_source;
    std::unique_ptr<ServiceAccount> m_serviceAccount; // ServiceAccount only
    QUrl m_tokenUrl;                                  // token_uri, or the metadata server's
    std::unique_ptr<BlockingHttpClient> m_http;       // none for a given token
    QByteArray m_token;
    qint64 m_expiresAtMs = 0;
    qint64 m_noRefreshBeforeMs = 0; // after a failed refresh, while m_token still lasts
};

// RS256 (RFC 7518 section 3.3): RSASSA-PKCS1-v1_5 with SHA-256 over signingInput, with an
// RSA private key of at least 2048 bits in PEM: PKCS#8 ("BEGIN PRIVATE KEY", as Google's
// key files carry it) or PKCS#1. Returns the raw signature, as long as the modulus (JWS
// base64url-encodes it: QByteArray::Base64UrlEncoding | OmitTrailingEquals), or empty with
// a one-line error that never quotes the key.
QByteArray signRs256(const QByteArray &signingInput, const QByteArray &pemPrivateKey, QString *error);

} // namespace once
