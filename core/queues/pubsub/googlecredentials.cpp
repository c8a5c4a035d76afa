#include "queues/pubsub/googlecredentials.h"

#include "http/blockinghttpclient.h"
#include "model/clock.h"
#include "text/quotedtext.h"

#include <QFile>
#include <QHostAddress>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>

namespace once {

Q_LOGGING_CATEGORY(lcGoogleAuth, "once.queues.pubsub.auth")

namespace {

// What a signed assertion asks for: a token for an hour, the most Google grants.
constexpr qint64 AssertionLifetimeSeconds = 3600;
// Off Google Cloud metadata.google.internal does not resolve or does not answer; Google's
// client libraries give up on it within seconds, and so does this.
constexpr int MetadataTimeoutMs = 2000;
constexpr int TokenEndpointTimeoutMs = 10000;
// A token answer is a few hundred bytes and a key file about 2.3 KB.
constexpr qint64 MaxTokenAnswerBytes = 64 * 1024;
constexpr qint64 MaxKeyFileBytes = 64 * 1024;
// After a failed refresh the kept token is handed out only with this much time left, for
// the call it goes with to arrive before it expires.
constexpr qint64 UsableMarginMs = 10 * 1000;
// Google's tokens last an hour; no answer is believed beyond a day.
constexpr qint64 MaxTokenLifetimeSeconds = 24 * 3600;
// RFC 7518 section 3.3: RS256 keys have 2048 bits or more.
constexpr int MinRsaBits = 2048;

const QByteArray JwtBearerGrant = QByteArrayLiteral("urn:ietf:params:oauth:grant-type:jwt-bearer");
const QString DefaultMetadataHost = QStringLiteral("metadata.google.internal");
const QString MetadataTokenPath =
    QStringLiteral("/computeMetadata/v1/instance/service-accounts/default/token");
const QString NoCredentials = QStringLiteral(
    "no Google credentials: set GOOGLE_APPLICATION_CREDENTIALS (a service-account key file), "
    "GOOGLE_OAUTH_ACCESS_TOKEN, or PUBSUB_EMULATOR_HOST for an emulator, or run on Google Cloud");

struct FreeKey
{
    void operator()(EVP_PKEY *key) const { EVP_PKEY_free(key); }
};
using PrivateKey = std::unique_ptr<EVP_PKEY, FreeKey>;

struct FreeDigestContext
{
    void operator()(EVP_MD_CTX *context) const { EVP_MD_CTX_free(context); }
};

const unsigned char *bytesOf(const QByteArray &bytes)
{
    return reinterpret_cast<const unsigned char *>(bytes.constData());
}

QByteArray base64Url(const QByteArray &bytes)
{
    return bytes.toBase64(QByteArray::Base64UrlEncoding | QByteArray::OmitTrailingEquals);
}

// The reason of OpenSSL's latest error: it names what went wrong, never the key's bytes.
// The queue is emptied so that the next call starts clean.
QString openSslReason()
{
    unsigned long last = 0;
    while (const unsigned long code = ERR_get_error())
        last = code;
    const char *reason = last == 0 ? nullptr : ERR_reason_error_string(last);
    return reason ? QString::fromLatin1(reason) : QStringLiteral("no reason given");
}

// OpenSSL asks for a passphrase on the terminal when a PEM key is encrypted, unless a
// callback answers instead: this one declines, and the key is refused as unreadable.
int declinePassphrase(char *, int, int, void *)
{
    return -1;
}

// *problem completes "the key is ..." / "has a private_key that is ...".
PrivateKey readRsaPrivateKey(const QByteArray &pem, QString *problem)
{
    ERR_clear_error();
    PrivateKey key;
    if (pem.size() <= MaxKeyFileBytes) {
        if (BIO *bio = BIO_new_mem_buf(pem.constData(), int(pem.size()))) {
            key.reset(PEM_read_bio_PrivateKey(bio, nullptr, declinePassphrase, nullptr));
            BIO_free(bio);
        }
    }
    if (!key) {
        *problem =
            QStringLiteral("not a PEM private key OpenSSL can read (OpenSSL: %1)").arg(openSslReason());
        return nullptr;
    }
    if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_RSA) {
        *problem = QStringLiteral("not an RSA key, which RS256 needs");
        return nullptr;
    }
    if (const int bits = EVP_PKEY_get_bits(key.get()); bits < MinRsaBits) {
        *problem = QStringLiteral("a %1-bit RSA key; RS256 needs %2 bits or more").arg(bits).arg(MinRsaBits);
        return nullptr;
    }
    return key;
}

QByteArray signWithKey(EVP_PKEY *key, const QByteArray &signingInput, QString *error)
{
    ERR_clear_error();
    const std::unique_ptr<EVP_MD_CTX, FreeDigestContext> context(EVP_MD_CTX_new());
    EVP_PKEY_CTX *keyContext = nullptr; // belongs to context
    size_t length = 0;
    // PKCS#1 v1.5 is OpenSSL's default padding for RSA; RS256 is defined by it, so it is
    // asked for rather than assumed.
    const bool ready =
        context && EVP_DigestSignInit(context.get(), &keyContext, EVP_sha256(), nullptr, key) == 1 &&
        EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PADDING) > 0 &&
        EVP_DigestSign(context.get(), nullptr, &length, bytesOf(signingInput), size_t(signingInput.size())) ==
            1;
    QByteArray signature(ready ? qsizetype(length) : 0, Qt::Uninitialized);
    if (!ready || EVP_DigestSign(context.get(), reinterpret_cast<unsigned char *>(signature.data()), &length,
                                 bytesOf(signingInput), size_t(signingInput.size())) != 1) {
        *error = QStringLiteral("signing with RS256 failed (OpenSSL: %1)").arg(openSslReason());
        return {};
    }
    signature.resize(qsizetype(length));
    return signature;
}

// What an Authorization header can carry: visible ASCII, no spaces, no line breaks.
bool isHeaderSafe(const QByteArray &token)
{
    return !token.isEmpty() &&
           std::all_of(token.cbegin(), token.cend(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// Google's token endpoint is https://oauth2.googleapis.com/token. The assertion is a
// credential for an hour, so plain http only to this machine (a test's endpoint).
bool isAcceptableTokenUrl(const QUrl &url)
{
    if (!url.isValid() || url.host().isEmpty())
        return false;
    if (url.scheme() == QLatin1String("https"))
        return true;
    const QHostAddress address(url.host());
    const bool loopback =
        url.host().compare(QLatin1String("localhost"), Qt::CaseInsensitive) == 0 || address.isLoopback();
    return url.scheme() == QLatin1String("http") && loopback;
}

// A token's lifetime in seconds: a whole number from 1 to a day, written as a number or (as
// some Google endpoints do, and its client libraries accept) as a string of digits.
std::optional<qint64> lifetimeSeconds(const QJsonValue &value)
{
    double seconds = -1;
    if (value.isDouble()) {
        seconds = value.toDouble();
    } else if (value.isString()) {
        bool ok = false;
        const qint64 parsed = value.toString().toLongLong(&ok);
        if (ok)
            seconds = double(parsed);
    }
    if (seconds != std::floor(seconds) || seconds < 1 || seconds > double(MaxTokenLifetimeSeconds))
        return std::nullopt;
    return qint64(seconds);
}

// What an error answer says: OAuth's {"error": "invalid_grant", "error_description": "..."},
// the Google APIs' {"error": {"status": "...", "message": "..."}}, or else its start. The
// server's own words: the caller scrubs secrets from them.
QString errorOfAnswer(const QByteArray &body)
{
    const QJsonObject answer = QJsonDocument::fromJson(body).object();
    const QJsonValue error = answer.value(QLatin1String("error"));
    QString code;
    QString description;
    if (error.isString()) {
        code = error.toString();
        description = answer.value(QLatin1String("error_description")).toString();
    } else if (error.isObject()) {
        code = error.toObject().value(QLatin1String("status")).toString();
        description = error.toObject().value(QLatin1String("message")).toString();
    }
    if (code.isEmpty() && description.isEmpty())
        return body.trimmed().isEmpty() ? QString()
                                        : QStringLiteral(": ") + QString::fromUtf8(body.trimmed());
    return (code.isEmpty() ? QString() : QLatin1Char(' ') + code) +
           (description.isEmpty() ? QString() : QStringLiteral(": ") + description);
}

struct TokenAnswer
{
    QByteArray token;
    qint64 lifetimeSeconds = 0;
};

// What an answer of a token endpoint or of the metadata server means. A successful answer
// carries a token, so nothing of it is ever quoted in *why; an error answer is.
std::optional<TokenAnswer> readTokenAnswer(const HttpResult &result, bool fromMetadataServer, QString *why)
{
    switch (result.status) {
    case HttpResult::Status::Response:
        break;
    case HttpResult::Status::NotSent:
        *why = QStringLiteral("not reachable: ") + result.error;
        return std::nullopt;
    case HttpResult::Status::InDoubt:
        *why = QStringLiteral("no answer: ") + result.error;
        return std::nullopt;
    }
    if (result.httpStatus < 200 || result.httpStatus > 299) {
        *why = QStringLiteral("HTTP %1").arg(result.httpStatus) + errorOfAnswer(result.body);
        return std::nullopt;
    }
    // The metadata server marks its answers; one without the mark came from something
    // else that answers on port 80 (a captive portal, a proxy).
    if (fromMetadataServer && result.header("Metadata-Flavor") != "Google") {
        *why = QStringLiteral("the answer has no \"Metadata-Flavor: Google\": not a metadata server");
        return std::nullopt;
    }
    const QJsonDocument document = QJsonDocument::fromJson(result.body);
    if (!document.isObject()) {
        *why = QStringLiteral("the answer (HTTP %1) is not a JSON object").arg(result.httpStatus);
        return std::nullopt;
    }
    const QJsonObject answer = document.object();
    TokenAnswer token;
    token.token = answer.value(QLatin1String("access_token")).toString().toUtf8();
    if (token.token.isEmpty()) {
        *why = QStringLiteral("the answer has no access_token");
        return std::nullopt;
    }
    if (!isHeaderSafe(token.token)) {
        *why =
            QStringLiteral("the answer's access_token has characters an Authorization header cannot carry");
        return std::nullopt;
    }
    const QJsonValue type = answer.value(QLatin1String("token_type"));
    if (!type.isUndefined() && type.toString().compare(QLatin1String("Bearer"), Qt::CaseInsensitive) != 0) {
        *why = QStringLiteral("the answer's token_type is not Bearer");
        return std::nullopt;
    }
    const QJsonValue expiresIn = answer.value(QLatin1String("expires_in"));
    const std::optional<qint64> lifetime = lifetimeSeconds(expiresIn);
    if (!lifetime) {
        *why = expiresIn.isUndefined()
                   ? QStringLiteral("the answer has no expires_in")
                   : QStringLiteral("the answer's expires_in is not a whole number of seconds from 1 to %1")
                         .arg(MaxTokenLifetimeSeconds);
        return std::nullopt;
    }
    token.lifetimeSeconds = *lifetime;
    return token;
}

// An error line fit for a log: each secret replaced before the line is cut (a cut secret
// would no longer match), and so is the part after its last dot on its own (an assertion's
// signature, which is what makes it a credential); control characters and line separators
// become spaces.
QString oneLineWithoutSecrets(QString text, std::initializer_list<QByteArray> secrets)
{
    const QString redacted = QStringLiteral("[redacted]");
    for (const QByteArray &secret : secrets) {
        if (secret.isEmpty())
            continue;
        text.replace(QString::fromLatin1(secret), redacted);
        if (const qsizetype dot = secret.lastIndexOf('.'); dot > 0 && secret.size() - dot > 16)
            text.replace(QString::fromLatin1(secret.mid(dot + 1)), redacted);
    }
    for (QChar &c : text) {
        if (c.category() == QChar::Other_Control || c.category() == QChar::Separator_Line ||
            c.category() == QChar::Separator_Paragraph)
            c = QLatin1Char(' ');
    }
    return asOneLine(text, 500);
}

QString keyFileError(const QString &path, const QString &problem)
{
    return asOneLine(
        QStringLiteral("the Google service-account key file %1 (GOOGLE_APPLICATION_CREDENTIALS) %2")
            .arg(path, problem));
}

// A field that must be a non-empty string, or empty with *problem saying why.
QString textField(const QJsonObject &json, const QString &name, QString *problem)
{
    const QJsonValue value = json.value(name);
    if (value.isUndefined())
        *problem = QStringLiteral("has no %1").arg(name);
    else if (!value.isString() || value.toString().isEmpty())
        *problem = QStringLiteral("has a %1 that is not a non-empty string").arg(name);
    return value.toString();
}

} // namespace

// A service-account key file as the Cloud console writes it: {"type": "service_account",
// "project_id", "private_key_id", "private_key": PEM PKCS#8, "client_email", "token_uri",
// ...}. private_key_id names the key in the JWT header (kid); Google's libraries do without
// it, and so does this.
struct GoogleCredentials::ServiceAccount
{
    QString clientEmail;
    QString privateKeyId;
    QString tokenUri; // as written: it is also the assertion's audience
    PrivateKey key;

    static std::unique_ptr<ServiceAccount> read(const QString &path, QString *error)
    {
        QFile file(path);
        if (!file.open(QIODevice::ReadOnly)) {
            *error = keyFileError(path, QStringLiteral("cannot be read: %1").arg(file.errorString()));
            return nullptr;
        }
        if (file.size() > MaxKeyFileBytes) {
            *error = keyFileError(
                path, QStringLiteral("is too large to be a key file (%1 bytes)").arg(file.size()));
            return nullptr;
        }
        QJsonParseError parseError;
        const QJsonDocument document = QJsonDocument::fromJson(file.read(MaxKeyFileBytes), &parseError);
        if (parseError.error != QJsonParseError::NoError) {
            // errorString() names the kind of mistake, never the text around it.
            *error = keyFileError(path, QStringLiteral("is not JSON: %1 at byte %2")
                                            .arg(parseError.errorString())
                                            .arg(parseError.offset));
            return nullptr;
        }
        if (!document.isObject()) {
            *error = keyFileError(path, QStringLiteral("is not a JSON object"));
            return nullptr;
        }
        const QJsonObject json = document.object();
        QString problem;
        const QString type = textField(json, QStringLiteral("type"), &problem);
        if (problem.isEmpty() && type != QLatin1String("service_account"))
            problem =
                QStringLiteral("has type %1, not \"service_account\", the only kind read here (for your own "
                               "account: GOOGLE_OAUTH_ACCESS_TOKEN=$(gcloud auth print-access-token))")
                    .arg(quotedForError(type));
        auto account = std::make_unique<ServiceAccount>();
        if (problem.isEmpty())
            account->clientEmail = textField(json, QStringLiteral("client_email"), &problem);
        if (problem.isEmpty())
            account->tokenUri = textField(json, QStringLiteral("token_uri"), &problem);
        if (problem.isEmpty() && !isAcceptableTokenUrl(QUrl(account->tokenUri, QUrl::StrictMode)))
            problem =
                QStringLiteral("has a token_uri, %1, that is not an https URL (http only to this machine)")
                    .arg(quotedForError(account->tokenUri, 200));
        if (problem.isEmpty() && json.contains(QLatin1String("private_key_id")))
            account->privateKeyId = textField(json, QStringLiteral("private_key_id"), &problem);
        QByteArray pem;
        if (problem.isEmpty())
            pem = textField(json, QStringLiteral("private_key"), &problem).toUtf8();
        if (problem.isEmpty()) {
            QString keyProblem;
            account->key = readRsaPrivateKey(pem, &keyProblem);
            if (!account->key)
                problem = QStringLiteral("has a private_key that is ") + keyProblem;
        }
        if (!problem.isEmpty()) {
            *error = keyFileError(path, problem);
            return nullptr;
        }
        return account;
    }

    // The JWT of RFC 7523 that Google's token endpoint takes for a token ("Preparing to make
    // an authorized API call", service accounts): signed now, valid for an hour.
    QByteArray assertion(qint64 nowSeconds, QString *error) const
    {
        QJsonObject header{{QStringLiteral("alg"), QStringLiteral("RS256")},
                           {QStringLiteral("typ"), QStringLiteral("JWT")}};
        if (!privateKeyId.isEmpty())
            header.insert(QStringLiteral("kid"), privateKeyId);
        const QJsonObject claims{{QStringLiteral("iss"), clientEmail},
                                 {QStringLiteral("scope"), QLatin1String(PubSubScope)},
                                 {QStringLiteral("aud"), tokenUri},
                                 {QStringLiteral("iat"), nowSeconds},
                                 {QStringLiteral("exp"), nowSeconds + AssertionLifetimeSeconds}};
        const QByteArray signingInput = base64Url(QJsonDocument(header).toJson(QJsonDocument::Compact)) +
                                        '.' + base64Url(QJsonDocument(claims).toJson(QJsonDocument::Compact));
        const QByteArray signature = signWithKey(key.get(), signingInput, error);
        return signature.isEmpty() ? QByteArray() : signingInput + '.' + base64Url(signature);
    }
};

GoogleCredentials::GoogleCredentials(Kind kind, QString source) : m_kind(kind), m_source(std::move(source)) {}

GoogleCredentials::~GoogleCredentials() = default;

std::unique_ptr<GoogleCredentials> GoogleCredentials::fromEnvironment(QString *error)
{
    if (const QByteArray given = qgetenv("GOOGLE_OAUTH_ACCESS_TOKEN").trimmed(); !given.isEmpty()) {
        if (!isHeaderSafe(given)) {
            *error = QStringLiteral(
                "GOOGLE_OAUTH_ACCESS_TOKEN has characters an Authorization header cannot carry "
                "(spaces, line breaks or other control characters)");
            return nullptr;
        }
        std::unique_ptr<GoogleCredentials> credentials(
            new GoogleCredentials(Kind::GivenToken, QStringLiteral("GOOGLE_OAUTH_ACCESS_TOKEN")));
        credentials->m_token = given;
        return credentials;
    }

    if (const QString keyFile = qEnvironmentVariable("GOOGLE_APPLICATION_CREDENTIALS"); !keyFile.isEmpty()) {
        std::unique_ptr<ServiceAccount> account = ServiceAccount::read(keyFile, error);
        if (!account)
            return nullptr;
        std::unique_ptr<GoogleCredentials> credentials(new GoogleCredentials(
            Kind::ServiceAccount,
            QStringLiteral("service account %1 from %2").arg(account->clientEmail, keyFile)));
        credentials->m_tokenUrl = QUrl(account->tokenUri, QUrl::StrictMode);
        credentials->m_serviceAccount = std::move(account);
        // No token yet: the key file is all there is to check before the first call.
        credentials->m_http = std::make_unique<BlockingHttpClient>();
        return credentials;
    }

    QString host = qEnvironmentVariable("GCE_METADATA_HOST");
    if (host.isEmpty())
        host = DefaultMetadataHost;
    const QUrl url(QStringLiteral("http://") + host + MetadataTokenPath, QUrl::StrictMode);
    const bool hostOnly = std::none_of(host.cbegin(), host.cend(), [](QChar c) {
        return c.isSpace() || c == QLatin1Char('/') || c == QLatin1Char('?') || c == QLatin1Char('#') ||
               c == QLatin1Char('@');
    });
    if (!hostOnly || !url.isValid() || url.host().isEmpty()) {
        *error =
            QStringLiteral("GCE_METADATA_HOST must be HOST or HOST:PORT, not %1").arg(quotedForError(host));
        return nullptr;
    }
    std::unique_ptr<GoogleCredentials> credentials(
        new GoogleCredentials(Kind::MetadataServer, QStringLiteral("the metadata server at ") + host));
    credentials->m_tokenUrl = url;
    credentials->m_http = std::make_unique<BlockingHttpClient>();
    // The first token is fetched now: whether it comes is what says we run on Google Cloud.
    QString why;
    if (!credentials->refresh(&why)) {
        *error = asOneLine(NoCredentials + QStringLiteral(" (") + why + QLatin1Char(')'), 800);
        return nullptr;
    }
    return credentials;
}

QByteArray GoogleCredentials::accessToken(QString *error)
{
    if (m_kind == Kind::GivenToken)
        return m_token;
    const qint64 now = nowMs();
    const bool fresh = !m_token.isEmpty() && now < m_expiresAtMs - RefreshMarginMs;
    const bool usable = !m_token.isEmpty() && now < m_expiresAtMs - UsableMarginMs;
    if (fresh || (usable && now < m_noRefreshBeforeMs))
        return m_token;
    QString why;
    if (refresh(&why))
        return m_token;
    if (usable) {
        m_noRefreshBeforeMs = now + RetryAfterFailedRefreshMs;
        qCWarning(lcGoogleAuth).noquote()
            << QStringLiteral("%1; the current token lasts %2 s more, another refresh in %3 s")
                   .arg(why)
                   .arg((m_expiresAtMs - now) / 1000)
                   .arg(RetryAfterFailedRefreshMs / 1000);
        return m_token;
    }
    m_token.clear();
    *error = why;
    return {};
}

bool GoogleCredentials::refresh(QString *error)
{
    // The lifetime counts from the moment the token was asked for: the answer may be slow.
    const qint64 askedAtMs = nowMs();
    HttpRequest request;
    request.url = m_tokenUrl;
    request.maxResponseBodyBytes = MaxTokenAnswerBytes;
    request.headers = {{"Accept", "application/json"}};
    QByteArray assertion;
    QString why;
    switch (m_kind) {
    case Kind::ServiceAccount:
        assertion = m_serviceAccount->assertion(askedAtMs / 1000, &why);
        request.method = "POST";
        request.headers.emplaceBack("Content-Type", "application/x-www-form-urlencoded");
        request.body = "grant_type=" + JwtBearerGrant.toPercentEncoding() +
                       "&assertion=" + assertion.toPercentEncoding();
        request.timeoutMs = TokenEndpointTimeoutMs;
        break;
    case Kind::MetadataServer:
        request.method = "GET";
        request.headers.emplaceBack("Metadata-Flavor", "Google");
        request.timeoutMs = MetadataTimeoutMs;
        break;
    case Kind::GivenToken:
        why = QStringLiteral("a token given in GOOGLE_OAUTH_ACCESS_TOKEN cannot be refreshed");
        break;
    }
    std::optional<TokenAnswer> answer;
    if (why.isEmpty())
        answer = readTokenAnswer(m_http->send(request), m_kind == Kind::MetadataServer, &why);
    if (!answer) {
        *error = oneLineWithoutSecrets(QStringLiteral("getting a Google access token from %1: %2")
                                           .arg(m_tokenUrl.toDisplayString(), why),
                                       {assertion, m_token});
        return false;
    }
    m_token = answer->token;
    m_expiresAtMs = askedAtMs + answer->lifetimeSeconds * 1000;
    m_noRefreshBeforeMs = 0;
    qCDebug(lcGoogleAuth).noquote() << QStringLiteral("a Google access token from %1, for %2 s")
                                           .arg(m_source)
                                           .arg(answer->lifetimeSeconds);
    return true;
}

QByteArray signRs256(const QByteArray &signingInput, const QByteArray &pemPrivateKey, QString *error)
{
    QString problem;
    const PrivateKey key = readRsaPrivateKey(pemPrivateKey, &problem);
    if (!key) {
        *error = QStringLiteral("cannot sign with RS256: the key is ") + problem;
        return {};
    }
    return signWithKey(key.get(), signingInput, error);
}

} // namespace once
