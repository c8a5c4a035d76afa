// Google credentials for Pub/Sub (core/queues/pubsub/googlecredentials): RS256 held against
// RFC 7515's own example, and the three places a token comes from held against a fake
// token endpoint and a fake metadata server on this machine, hostile answers included.
// Every error must be one line, and no error or log line may show the private key, the
// signed assertion or a token.

#include "queues/pubsub/googlecredentials.h"
#include "threadedfakeserver.h"

#include <QDir>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QMutex>
#include <QRegularExpression>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <QUrlQuery>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

#include <functional>
#include <memory>
#include <optional>
#include <utility>

using namespace once;

namespace {

// RFC 7515 (JSON Web Signature), Appendix A.2 "Example JWS Using RSASSA-PKCS1-v1_5 SHA-256":
// the RSA key of A.2.1 as the JWK the RFC prints, the JWS Protected Header and Payload as
// the octets it lists (the payload is A.1's, with its CRLFs), the JWS Signing Input and the
// signature it prints, each on one line as printed. PKCS#1 v1.5 is deterministic, so the
// signature must come out byte for byte.
// clang-format off
namespace rfc7515a2 {
const char N[] = "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ";
const char E[] = "AQAB";
const char D[] = "Eq5xpGnNCivDflJsRQBXHx1hdR1k6Ulwe2JZD50LpXyWPEAeP88vLNO97IjlA7_GQ5sLKMgvfTeXZx9SE-7YwVol2NXOoAJe46sui395IW_GO-pWJ1O0BkTGoVEn2bKVRUCgu-GjBVaYLU6f3l9kJfFNS3E0QbVdxzubSu3Mkqzjkn439X0M_V51gfpRLI9JYanrC4D4qAdGcopV_0ZHHzQlBjudU2QvXt4ehNYTCBr6XCLQUShb1juUO1ZdiYoFaFQT5Tw8bGUl_x_jTj3ccPDVZFD9pIuhLhBOneufuBiB4cS98l2SR_RQyGWSeWjnczT0QU91p1DhOVRuOopznQ";
const char P[] = "4BzEEOtIpmVdVEZNCqS7baC4crd0pqnRH_5IB3jw3bcxGn6QLvnEtfdUdiYrqBdss1l58BQ3KhooKeQTa9AB0Hw_Py5PJdTJNPY8cQn7ouZ2KKDcmnPGBY5t7yLc1QlQ5xHdwW1VhvKn-nXqhJTBgIPgtldC-KDV5z-y2XDwGUc";
const char Q[] = "uQPEfgmVtjL0Uyyx88GZFF1fOunH3-7cepKmtH4pxhtCoHqpWmT8YAmZxaewHgHAjLYsp1ZSe7zFYHj7C6ul7TjeLQeZD_YwD66t62wDmpe_HlB-TnBA-njbglfIsRLtXlnDzQkv5dTltRJ11BKBBypeeF6689rjcJIDEz9RWdc";
const char DP[] = "BwKfV3Akq5_MFZDFZCnW-wzl-CCo83WoZvnLQwCTeDv8uzluRSnm71I3QCLdhrqE2e9YkxvuxdBfpT_PI7Yz-FOKnu1R6HsJeDCjn12Sk3vmAktV2zb34MCdy7cpdTh_YVr7tss2u6vneTwrA86rZtu5Mbr1C1XsmvkxHQAdYo0";
const char DQ[] = "h_96-mK1R_7glhsum81dZxjTnYynPbZpHziZjeeHcXYsXaaMwkOlODsWa7I9xXDoRwbKgB719rrmI2oKr6N3Do9U0ajaHF-NKJnwgjMd2w9cjz3_-kyNlxAr2v4IKhGNpmM5iIgOS1VZnOZ68m6_pbLBSp3nssTdlqvd0tIiTHU";
const char QI[] = "IYd7DHOhrWvxkwPQsRM2tOgrjbcrfvtQJipd-DlcxyVuuM9sQLdgjVk2oy26F0EmpScGLq2MowX7fhd_QJQ3ydy5cY7YIBi87w93IKLEdfnbJtoOPLUW0ITrJReOgo1cq9SbsxYawBgfp_gh6A5603k2-ZQwVK0JKSHuLFkuQ3U";
const unsigned char ProtectedHeader[] = {123, 34, 97, 108, 103, 34, 58, 34, 82, 83, 50, 53, 54, 34, 125};
const unsigned char Payload[] = {123, 34, 105, 115, 115, 34, 58, 34, 106, 111, 101, 34, 44, 13, 10, 32, 34, 101, 120, 112, 34, 58,
                                 49, 51, 48, 48, 56, 49, 57, 51, 56, 48, 44, 13, 10, 32, 34, 104, 116, 116, 112, 58, 47, 47, 101,
                                 120, 97, 109, 112, 108, 101, 46, 99, 111, 109, 47, 105, 115, 95, 114, 111, 111, 116, 34, 58, 116,
                                 114, 117, 101, 125};
const char SigningInput[] = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ";
const char Signature[] = "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw";
} // namespace rfc7515a2
// clang-format on

const char TestEmail[] = "once-test@once-test.iam.gserviceaccount.com";
const char TestKeyId[] = "0f1e2d3c4b5a69788796a5b4c3d2e1f0-once-test";
const char TokenPath[] = "/token";
const char MetadataPath[] = "/computeMetadata/v1/instance/service-accounts/default/token";
const QString NoCredentials = QStringLiteral(
    "no Google credentials: set GOOGLE_APPLICATION_CREDENTIALS (a service-account key file), "
    "GOOGLE_OAUTH_ACCESS_TOKEN, or PUBSUB_EMULATOR_HOST for an emulator, or run on Google Cloud");
// What every token the fake hands out, and every hostile answer's token, contains.
const char TokenMark[] = "once-test-token";

QByteArray base64Url(const QByteArray &bytes)
{
    return bytes.toBase64(QByteArray::Base64UrlEncoding | QByteArray::OmitTrailingEquals);
}

// Strict: base64url without padding, nothing else.
std::optional<QByteArray> fromBase64Url(const QByteArray &text)
{
    if (text.contains('='))
        return std::nullopt;
    auto decoded = QByteArray::fromBase64Encoding(text, QByteArray::Base64UrlEncoding |
                                                            QByteArray::AbortOnBase64DecodingErrors);
    return decoded ? std::optional<QByteArray>(*decoded) : std::nullopt;
}

// ---- libcrypto, for keys the test makes and for checking signatures ----

struct FreeKey
{
    void operator()(EVP_PKEY *key) const { EVP_PKEY_free(key); }
};
using Key = std::unique_ptr<EVP_PKEY, FreeKey>;

enum class PemKind
{
    PrivateKey,
    PublicKey,
    EncryptedPrivateKey
};

QByteArray pemOf(EVP_PKEY *key, PemKind kind)
{
    BIO *bio = BIO_new(BIO_s_mem());
    bool written = false;
    switch (kind) {
    case PemKind::PrivateKey: // PKCS#8, "BEGIN PRIVATE KEY", as Google's key files hold it
        written = PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
        break;
    case PemKind::PublicKey:
        written = PEM_write_bio_PUBKEY(bio, key) == 1;
        break;
    case PemKind::EncryptedPrivateKey: {
        char passphrase[] = "once-test-passphrase";
        written = PEM_write_bio_PKCS8PrivateKey(bio, key, EVP_aes_256_cbc(), passphrase,
                                                int(sizeof passphrase - 1), nullptr, nullptr) == 1;
        break;
    }
    }
    char *data = nullptr;
    const long size = BIO_get_mem_data(bio, &data);
    QByteArray pem = written ? QByteArray(data, size) : QByteArray();
    BIO_free(bio);
    return pem;
}

// The RFC's key, built from its JWK numbers so that the RFC is visibly where it comes from.
Key keyFromRfc7515Jwk()
{
    const auto number = [](const char *base64url) {
        const QByteArray bytes = *fromBase64Url(QByteArray(base64url));
        return BN_bin2bn(reinterpret_cast<const unsigned char *>(bytes.constData()), int(bytes.size()),
                         nullptr);
    };
    using namespace rfc7515a2;
    const std::pair<const char *, const char *> parts[] = {
        {OSSL_PKEY_PARAM_RSA_N, N},          {OSSL_PKEY_PARAM_RSA_E, E},
        {OSSL_PKEY_PARAM_RSA_D, D},          {OSSL_PKEY_PARAM_RSA_FACTOR1, P},
        {OSSL_PKEY_PARAM_RSA_FACTOR2, Q},    {OSSL_PKEY_PARAM_RSA_EXPONENT1, DP},
        {OSSL_PKEY_PARAM_RSA_EXPONENT2, DQ}, {OSSL_PKEY_PARAM_RSA_COEFFICIENT1, QI},
    };
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    QList<BIGNUM *> numbers;
    for (const auto &[name, value] : parts) {
        numbers.append(number(value));
        OSSL_PARAM_BLD_push_BN(builder, name, numbers.last());
    }
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(builder);
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr);
    EVP_PKEY *key = nullptr;
    if (!context || EVP_PKEY_fromdata_init(context) != 1 ||
        EVP_PKEY_fromdata(context, &key, EVP_PKEY_KEYPAIR, params) != 1)
        key = nullptr;
    EVP_PKEY_CTX_free(context);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(builder);
    for (BIGNUM *n : std::as_const(numbers))
        BN_free(n);
    return Key(key);
}

bool verifyRs256(EVP_PKEY *key, const QByteArray &signingInput, const QByteArray &signature)
{
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    const bool valid =
        EVP_DigestVerifyInit(context, nullptr, EVP_sha256(), nullptr, key) == 1 &&
        EVP_DigestVerify(context, reinterpret_cast<const unsigned char *>(signature.constData()),
                         size_t(signature.size()),
                         reinterpret_cast<const unsigned char *>(signingInput.constData()),
                         size_t(signingInput.size())) == 1;
    EVP_MD_CTX_free(context);
    return valid;
}

// The base64 lines of a PEM: any one of them in a text is a leak.
QList<QByteArray> pemBodyLines(const QByteArray &pem)
{
    QList<QByteArray> lines;
    for (const QByteArray &line : pem.split('\n')) {
        if (line.size() >= 16 && !line.startsWith("-----") && !line.contains(':'))
            lines.append(line);
    }
    return lines;
}

// ---- a fake Google on this machine (threadedfakeserver.h) ----

using FakeGoogle = oncetest::ThreadedFakeServer;
using oncetest::Answer;
using oncetest::SeenRequest;
using oncetest::jsonAnswer;

// What Google's token endpoint checks of a JWT-bearer grant, and what this test asks of
// ours besides: empty when all is well, else what is wrong (the fake then answers 400
// invalid_grant with it, and the test's error shows it).
QString problemWithTokenRequest(const SeenRequest &request, EVP_PKEY *publicKey, const QString &tokenUri,
                                const QByteArray &keyId)
{
    if (request.method != "POST" || request.path != TokenPath)
        return QStringLiteral("expected POST %1, got %2 %3")
            .arg(QLatin1String(TokenPath), QString::fromLatin1(request.method),
                 QString::fromLatin1(request.path));
    if (request.header("Content-Type") != "application/x-www-form-urlencoded")
        return QStringLiteral("Content-Type is not application/x-www-form-urlencoded");
    if (request.formValue(QStringLiteral("grant_type")) != "urn:ietf:params:oauth:grant-type:jwt-bearer")
        return QStringLiteral("grant_type is not urn:ietf:params:oauth:grant-type:jwt-bearer");
    const QList<QByteArray> parts = request.formValue(QStringLiteral("assertion")).split('.');
    if (parts.size() != 3)
        return QStringLiteral("the assertion is not three base64url parts");
    const auto header = fromBase64Url(parts[0]);
    const auto claims = fromBase64Url(parts[1]);
    const auto signature = fromBase64Url(parts[2]);
    if (!header || !claims || !signature)
        return QStringLiteral("a part of the assertion is not unpadded base64url");
    QJsonObject expectedHeader{{QStringLiteral("alg"), QStringLiteral("RS256")},
                               {QStringLiteral("typ"), QStringLiteral("JWT")}};
    if (!keyId.isEmpty())
        expectedHeader.insert(QStringLiteral("kid"), QString::fromLatin1(keyId));
    if (QJsonDocument::fromJson(*header).object() != expectedHeader)
        return QStringLiteral("the JWT header is %1").arg(QString::fromUtf8(*header));
    if (!verifyRs256(publicKey, parts[0] + '.' + parts[1], *signature))
        return QStringLiteral("the assertion's RS256 signature does not verify with the key file's key");
    const QJsonObject claim = QJsonDocument::fromJson(*claims).object();
    const qint64 iat = claim.value(QLatin1String("iat")).toInteger(-1);
    const qint64 exp = claim.value(QLatin1String("exp")).toInteger(-1);
    const qint64 now = QDateTime::currentSecsSinceEpoch();
    if (claim.value(QLatin1String("iss")).toString() != QLatin1String(TestEmail) ||
        claim.value(QLatin1String("scope")).toString() !=
            QLatin1String("https://www.googleapis.com/auth/pubsub") ||
        claim.value(QLatin1String("aud")).toString() != tokenUri || claim.size() != 5 ||
        !claim.value(QLatin1String("iat")).isDouble() || qAbs(iat - now) > 60 || exp - iat != 3600)
        return QStringLiteral("the JWT claims are %1").arg(QString::fromUtf8(*claims));
    return {};
}

// ---- what the code under test logs ----

QMutex logMutex;
QStringList logLines;
QtMessageHandler previousHandler = nullptr;

void captureMessage(QtMsgType type, const QMessageLogContext &context, const QString &message)
{
    {
        QMutexLocker lock(&logMutex);
        logLines.append(message);
    }
    if (previousHandler)
        previousHandler(type, context, message);
}

QStringList takeLogLines()
{
    QMutexLocker lock(&logMutex);
    return std::exchange(logLines, {});
}

} // namespace

class GoogleAuthTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void rs256SignsRfc7515AppendixA2();
    void rs256RefusesWhatIsNotAnRsaPrivateKey_data();
    void rs256RefusesWhatIsNotAnRsaPrivateKey();

    void serviceAccountTradesASignedAssertionForAToken();
    void keyFileWithoutPrivateKeyIdSignsWithoutKid();
    void freshTokenIsReusedWithoutARequest();
    void tokenAboutToExpireIsRefreshed();
    void failedRefreshKeepsTheTokenWhileItLasts();
    void acceptedTokenAnswers_data();
    void acceptedTokenAnswers();
    void hostileTokenAnswersGiveOneLineWithoutSecrets_data();
    void hostileTokenAnswersGiveOneLineWithoutSecrets();
    void keyFileThatCannotBeReadIsNamed_data();
    void keyFileThatCannotBeReadIsNamed();
    void keyFileProblemsNameTheFileAndTheField_data();
    void keyFileProblemsNameTheFileAndTheField();
    void tokenUriMayBePlainHttpOnlyToThisMachine_data();
    void tokenUriMayBePlainHttpOnlyToThisMachine();

    void metadataServerGivesTheToken();
    void metadataTokenAboutToExpireIsRefreshed();
    void metadataAnswerWithoutFlavorIsNotBelieved();
    void noMetadataServerMeansNoCredentials();
    void metadataHostMustBeAHost();
    void silentMetadataServerIsGivenUpWithinSeconds();

    void givenAccessTokenWinsOverKeyFileAndMetadataServer();
    void keyFileWinsOverMetadataServer();
    void givenAccessTokenWithALineBreakIsRefused();

private:
    QJsonObject keyFileJson() const;
    QString writeKeyFile(const QJsonObject &json, const QString &name = QStringLiteral("key.json"));
    QString writeKeyFile(const QByteArray &content, const QString &name = QStringLiteral("key.json"));
    // The token endpoint: checks each request, then answers with `answer` (N counts the
    // tokens issued; {assertion}, {signature} and {request} in a body become what the
    // request sent).
    void serveTokens(std::function<Answer(int n)> answer);
    void serveMetadataTokens(std::function<Answer(int n)> answer);
    static Answer tokenAnswer(int n, qint64 expiresIn);
    static QByteArray tokenNumber(int n)
    {
        return QByteArray("ya29.") + TokenMark + '-' + QByteArray::number(n);
    }
    // Empty if `text` holds no secret of this test, else which.
    QString leakIn(const QString &text) const;

    Key m_key;
    QByteArray m_pem;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<FakeGoogle> m_fake;
};

void GoogleAuthTest::initTestCase()
{
    m_key.reset(EVP_RSA_gen(2048));
    QVERIFY(m_key);
    m_pem = pemOf(m_key.get(), PemKind::PrivateKey);
    QVERIFY(m_pem.startsWith("-----BEGIN PRIVATE KEY-----"));
    QLoggingCategory::setFilterRules(QStringLiteral("once.*.debug=true"));
    previousHandler = qInstallMessageHandler(captureMessage);
}

void GoogleAuthTest::init()
{
    for (const char *name : {"GOOGLE_OAUTH_ACCESS_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS",
                             "GCE_METADATA_HOST", "PUBSUB_EMULATOR_HOST"})
        qunsetenv(name);
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_fake = std::make_unique<FakeGoogle>();
    QVERIFY(m_fake->port() != 0);
    takeLogLines();
}

// Whatever the test did, nothing it made the code log may show a secret.
void GoogleAuthTest::cleanup()
{
    for (const QString &line : takeLogLines())
        QVERIFY2(leakIn(line).isEmpty(), qPrintable(QStringLiteral("a log line shows %1").arg(leakIn(line))));
    m_fake.reset();
}

QString GoogleAuthTest::leakIn(const QString &text) const
{
    if (text.contains(QLatin1String("PRIVATE KEY")))
        return QStringLiteral("a PEM private key");
    for (const QByteArray &line : pemBodyLines(m_pem))
        if (text.contains(QLatin1String(line)))
            return QStringLiteral("a line of the private key");
    if (text.contains(QLatin1String(TokenMark)))
        return QStringLiteral("an access token");
    if (m_fake) {
        for (const SeenRequest &request : m_fake->requests()) {
            const QByteArray assertion = request.formValue(QStringLiteral("assertion"));
            if (assertion.isEmpty())
                continue;
            if (text.contains(QLatin1String(assertion)))
                return QStringLiteral("the signed assertion");
            // Any stretch of the signature, as a line cut short would show it.
            const QByteArray signature = assertion.mid(assertion.lastIndexOf('.') + 1);
            for (qsizetype at = 0; at + 24 <= signature.size(); ++at)
                if (text.contains(QLatin1String(signature.mid(at, 24))))
                    return QStringLiteral("a part of the assertion's signature");
        }
    }
    return {};
}

QJsonObject GoogleAuthTest::keyFileJson() const
{
    // The fields the Cloud console writes, in its order.
    return {{QStringLiteral("type"), QStringLiteral("service_account")},
            {QStringLiteral("project_id"), QStringLiteral("once-test")},
            {QStringLiteral("private_key_id"), QLatin1String(TestKeyId)},
            {QStringLiteral("private_key"), QString::fromLatin1(m_pem)},
            {QStringLiteral("client_email"), QLatin1String(TestEmail)},
            {QStringLiteral("client_id"), QStringLiteral("100000000000000000001")},
            {QStringLiteral("auth_uri"), QStringLiteral("https://accounts.google.com/o/oauth2/auth")},
            {QStringLiteral("token_uri"), m_fake->url(TokenPath)},
            {QStringLiteral("universe_domain"), QStringLiteral("googleapis.com")}};
}

QString GoogleAuthTest::writeKeyFile(const QJsonObject &json, const QString &name)
{
    return writeKeyFile(QJsonDocument(json).toJson(), name);
}

QString GoogleAuthTest::writeKeyFile(const QByteArray &content, const QString &name)
{
    const QString path = m_dir->filePath(name);
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(content) != content.size())
        return {};
    return path;
}

Answer GoogleAuthTest::tokenAnswer(int n, qint64 expiresIn)
{
    return jsonAnswer(200, {{QStringLiteral("access_token"), QString::fromLatin1(tokenNumber(n))},
                            {QStringLiteral("expires_in"), expiresIn},
                            {QStringLiteral("token_type"), QStringLiteral("Bearer")}});
}

void GoogleAuthTest::serveTokens(std::function<Answer(int n)> answer)
{
    const QString tokenUri = m_fake->url(TokenPath);
    EVP_PKEY *key = m_key.get();
    auto issued = std::make_shared<int>(0);
    m_fake->setResponder([=](const SeenRequest &request) {
        const QString problem = problemWithTokenRequest(request, key, tokenUri, QByteArray(TestKeyId));
        if (!problem.isEmpty())
            return jsonAnswer(400, {{QStringLiteral("error"), QStringLiteral("invalid_grant")},
                                    {QStringLiteral("error_description"), problem}});
        Answer reply = answer(++*issued);
        reply.body.replace("{assertion}", request.formValue(QStringLiteral("assertion")));
        reply.body.replace("{request}", request.body);
        const QByteArray assertion = request.formValue(QStringLiteral("assertion"));
        reply.body.replace("{signature}", assertion.mid(assertion.lastIndexOf('.') + 1));
        return reply;
    });
}

void GoogleAuthTest::serveMetadataTokens(std::function<Answer(int n)> answer)
{
    auto issued = std::make_shared<int>(0);
    m_fake->setResponder([=](const SeenRequest &request) {
        if (request.method != "GET" || request.path != MetadataPath || !request.body.isEmpty())
            return Answer{Answer::Kind::Respond, 404, "not a metadata path", {}, 0};
        // What the real server does without the header: it refuses.
        if (request.header("Metadata-Flavor") != "Google")
            return Answer{Answer::Kind::Respond,
                          403,
                          "Missing Metadata-Flavor:Google header.",
                          {{"Metadata-Flavor", "Google"}},
                          0};
        Answer reply = answer(++*issued);
        return reply;
    });
}

// ---- RS256 ----

void GoogleAuthTest::rs256SignsRfc7515AppendixA2()
{
    using namespace rfc7515a2;
    // The signing input rebuilt from the RFC's octets is the one it prints.
    const QByteArray signingInput =
        base64Url(QByteArray(reinterpret_cast<const char *>(ProtectedHeader), sizeof ProtectedHeader)) + '.' +
        base64Url(QByteArray(reinterpret_cast<const char *>(Payload), sizeof Payload));
    QCOMPARE(signingInput, QByteArray(SigningInput));

    const Key key = keyFromRfc7515Jwk();
    QVERIFY(key);
    const QByteArray pem = pemOf(key.get(), PemKind::PrivateKey);
    QVERIFY(pem.startsWith("-----BEGIN PRIVATE KEY-----"));
    const QByteArray expected = *fromBase64Url(QByteArray(Signature));
    QCOMPARE(expected.size(), 256);
    // The published signature is one of this key's: the JWK was read right.
    QVERIFY(verifyRs256(key.get(), signingInput, expected));

    QString error;
    const QByteArray signature = signRs256(signingInput, pem, &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(signature.toHex(), expected.toHex());
    QCOMPARE(base64Url(signature), QByteArray(Signature));
}

void GoogleAuthTest::rs256RefusesWhatIsNotAnRsaPrivateKey_data()
{
    QTest::addColumn<QByteArray>("pem");
    QTest::addColumn<QString>("expected");
    const Key small(EVP_RSA_gen(1024));
    const Key ec(EVP_EC_gen("P-256"));
    QTest::newRow("empty") << QByteArray() << QStringLiteral("not a PEM private key");
    QTest::newRow("garbage")
        << QByteArray("-----BEGIN PRIVATE KEY-----\nMIIBogusBogusBogusBogus\n-----END PRIVATE KEY-----\n")
        << QStringLiteral("not a PEM private key");
    QTest::newRow("cut in half") << m_pem.left(m_pem.size() / 2) << QStringLiteral("not a PEM private key");
    QTest::newRow("public key") << pemOf(m_key.get(), PemKind::PublicKey)
                                << QStringLiteral("not a PEM private key");
    // OpenSSL would ask for a passphrase on the terminal, were it let.
    QTest::newRow("encrypted") << pemOf(m_key.get(), PemKind::EncryptedPrivateKey)
                               << QStringLiteral("not a PEM private key");
    QTest::newRow("EC P-256") << pemOf(ec.get(), PemKind::PrivateKey) << QStringLiteral("not an RSA key");
    QTest::newRow("RSA 1024") << pemOf(small.get(), PemKind::PrivateKey)
                              << QStringLiteral("1024-bit RSA key; RS256 needs 2048 bits");
}

void GoogleAuthTest::rs256RefusesWhatIsNotAnRsaPrivateKey()
{
    QFETCH(QByteArray, pem);
    QFETCH(QString, expected);
    QString error;
    QVERIFY(signRs256("anything", pem, &error).isEmpty());
    QVERIFY2(error.contains(expected), qPrintable(error));
    QVERIFY(!error.contains(QLatin1Char('\n')));
    for (const QByteArray &line : pemBodyLines(pem))
        QVERIFY2(!error.contains(QLatin1String(line)), qPrintable(error));
    QVERIFY(!error.contains(QLatin1String("Bogus")));
}

// ---- a service-account key file ----

void GoogleAuthTest::serviceAccountTradesASignedAssertionForAToken()
{
    serveTokens([](int n) { return tokenAnswer(n, 3599); });
    const QString path = writeKeyFile(keyFileJson());
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", path.toLocal8Bit());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QVERIFY2(credentials, qPrintable(error));
    QCOMPARE(credentials->source(),
             QStringLiteral("service account %1 from %2").arg(QLatin1String(TestEmail), path));
    QCOMPARE(m_fake->requestCount(), 0); // nothing is fetched before it is asked for

    QCOMPARE(credentials->accessToken(&error), tokenNumber(1));
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(m_fake->requestCount(), 1);
    // The fake checked the grant, the header, the signature and the claims; and the
    // form's values are percent-encoded as a form wants them.
    QVERIFY(m_fake->requests().constFirst().body.startsWith(
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="));
    QVERIFY(leakIn(credentials->source()).isEmpty());
}

// Google's libraries take a key file without private_key_id: the JWT then names no key.
void GoogleAuthTest::keyFileWithoutPrivateKeyIdSignsWithoutKid()
{
    const QString tokenUri = m_fake->url(TokenPath);
    EVP_PKEY *key = m_key.get();
    m_fake->setResponder([=](const SeenRequest &request) {
        const QString problem = problemWithTokenRequest(request, key, tokenUri, QByteArray());
        return problem.isEmpty()
                   ? tokenAnswer(1, 3599)
                   : jsonAnswer(400, {{QStringLiteral("error"), QStringLiteral("invalid_grant")},
                                      {QStringLiteral("error_description"), problem}});
    });
    QJsonObject json = keyFileJson();
    json.remove(QStringLiteral("private_key_id"));
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", writeKeyFile(json).toLocal8Bit());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QVERIFY2(credentials, qPrintable(error));
    QCOMPARE(credentials->accessToken(&error), tokenNumber(1));
    QVERIFY2(error.isEmpty(), qPrintable(error));
}

void GoogleAuthTest::freshTokenIsReusedWithoutARequest()
{
    serveTokens([](int n) { return tokenAnswer(n, 3599); });
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", writeKeyFile(keyFileJson()).toLocal8Bit());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QVERIFY2(credentials, qPrintable(error));
    for (int call = 0; call < 5; ++call) {
        QCOMPARE(credentials->accessToken(&error), tokenNumber(1));
        QVERIFY2(error.isEmpty(), qPrintable(error));
    }
    QCOMPARE(m_fake->requestCount(), 1);
}

// A token with less than five minutes left is fetched anew on the next call.
void GoogleAuthTest::tokenAboutToExpireIsRefreshed()
{
    serveTokens([](int n) { return tokenAnswer(n, n == 1 ? 299 : 3599); });
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", writeKeyFile(keyFileJson()).toLocal8Bit());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QVERIFY2(credentials, qPrintable(error));
    QCOMPARE(credentials->accessToken(&error), tokenNumber(1));
    QCOMPARE(credentials->accessToken(&error), tokenNumber(2));
    QCOMPARE(credentials->accessToken(&error), tokenNumber(2));
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(m_fake->requestCount(), 2);
}

// The endpoint failing while the token still lasts (here 200 s) is logged, not an error;
// the next attempt waits RetryAfterFailedRefresh rather than hitting it on every call.
void GoogleAuthTest::failedRefreshKeepsTheTokenWhileItLasts()
{
    serveTokens([](int n) {
        return n == 1 ? tokenAnswer(n, 200)
                      : jsonAnswer(503, {{QStringLiteral("error"), QStringLiteral("temporarily_unavailable")},
                                         {QStringLiteral("error_description"),
                                          QString(QStringLiteral("try later, {assertion}, ") +
                                                  QLatin1String(tokenNumber(1)))}});
    });
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", writeKeyFile(keyFileJson()).toLocal8Bit());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QVERIFY2(credentials, qPrintable(error));
    QCOMPARE(credentials->accessToken(&error), tokenNumber(1));
    QTest::ignoreMessage(QtWarningMsg,
                         QRegularExpression(QStringLiteral(
                             "HTTP 503 temporarily_unavailable: try later, \\[redacted\\], \\[redacted\\]; "
                             "the current token lasts \\d+ s more, another refresh in 30 s")));
    QCOMPARE(credentials->accessToken(&error), tokenNumber(1));
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(m_fake->requestCount(), 2);
    QCOMPARE(credentials->accessToken(&error), tokenNumber(1));
    QCOMPARE(m_fake->requestCount(), 2);
}

void GoogleAuthTest::acceptedTokenAnswers_data()
{
    QTest::addColumn<QByteArray>("body");
    const QByteArray token = tokenNumber(1);
    QTest::newRow("Google's own") << R"({"access_token":")" + token +
                                         R"(","expires_in":3599,"token_type":"Bearer"})";
    QTest::newRow("expires_in as digits")
        << R"({"access_token":")" + token + R"(","expires_in":"3599","token_type":"Bearer"})";
    QTest::newRow("bearer in lower case")
        << R"({"access_token":")" + token + R"(","expires_in":3599,"token_type":"bearer"})";
    QTest::newRow("no token_type") << R"({"access_token":")" + token + R"(","expires_in":3599})";
    QTest::newRow("more fields")
        << R"({"access_token":")" + token +
               R"(","expires_in":3599,"token_type":"Bearer","id_token":"x","scope":"s"})";
}

void GoogleAuthTest::acceptedTokenAnswers()
{
    QFETCH(QByteArray, body);
    serveTokens([body](int) {
        return Answer{Answer::Kind::Respond, 200, body, {{"Content-Type", "application/json"}}, 0};
    });
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", writeKeyFile(keyFileJson()).toLocal8Bit());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QVERIFY2(credentials, qPrintable(error));
    QCOMPARE(credentials->accessToken(&error), tokenNumber(1));
    QVERIFY2(error.isEmpty(), qPrintable(error));
}

void GoogleAuthTest::hostileTokenAnswersGiveOneLineWithoutSecrets_data()
{
    QTest::addColumn<int>("status"); // 0: the connection closes without an answer
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<qint64>("padding");
    QTest::addColumn<QString>("expected"); // what the error says after the URL

    const QByteArray token = QByteArray("ya29.") + TokenMark + "-hostile";
    // QByteArray, not auto: a QStringBuilder returned would outlive `rest`.
    const auto grant = [&token](const QByteArray &rest) -> QByteArray {
        return R"({"access_token":")" + token + "\"" + rest + '}';
    };
    QTest::newRow("400 invalid_grant")
        << 400 << QByteArray(R"({"error":"invalid_grant","error_description":"Invalid JWT Signature."})")
        << qint64(0) << QStringLiteral("HTTP 400 invalid_grant: Invalid JWT Signature.");
    QTest::newRow("400 quoting the assertion")
        << 400 << QByteArray(R"({"error":"invalid_grant","error_description":"bad {assertion}"})")
        << qint64(0) << QStringLiteral("HTTP 400 invalid_grant: bad [redacted]");
    QTest::newRow("400 quoting the signature")
        << 400 << QByteArray(R"({"error":"invalid_grant","error_description":"{signature} is not valid"})")
        << qint64(0) << QStringLiteral("HTTP 400 invalid_grant: [redacted] is not valid");
    QTest::newRow("401 text echoing the request")
        << 401 << QByteArray("you sent:\r\n{request}\n") << qint64(0)
        << QStringLiteral(
               "HTTP 401: you sent:  "
               "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=[redacted]");
    QTest::newRow("403 Google API error")
        << 403
        << QByteArray(R"({"error":{"code":403,"message":"Permission denied.","status":"PERMISSION_DENIED"}})")
        << qint64(0) << QStringLiteral("HTTP 403 PERMISSION_DENIED: Permission denied.");
    QTest::newRow("500 HTML") << 500 << QByteArray("<html>\n<body>\r\nInternal error\x1b[31m</body></html>")
                              << qint64(0)
                              << QStringLiteral("HTTP 500: <html> <body>  Internal error [31m</body></html>");
    QTest::newRow("503 empty") << 503 << QByteArray() << qint64(0) << QStringLiteral("HTTP 503");
    QTest::newRow("200 not JSON") << 200 << token << qint64(0)
                                  << QStringLiteral("the answer (HTTP 200) is not a JSON object");
    QTest::newRow("200 JSON array") << 200 << "[\"" + token + "\"]" << qint64(0)
                                    << QStringLiteral("the answer (HTTP 200) is not a JSON object");
    QTest::newRow("200 no access_token") << 200 << QByteArray(R"({"expires_in":3599,"token_type":"Bearer"})")
                                         << qint64(0) << QStringLiteral("the answer has no access_token");
    QTest::newRow("200 access_token a number")
        << 200 << QByteArray(R"({"access_token":42,"expires_in":3599})") << qint64(0)
        << QStringLiteral("the answer has no access_token");
    QTest::newRow("200 access_token with a line break")
        << 200
        << QByteArray(R"({"access_token":"ya29.)") + TokenMark + R"(\r\nX-Injected: 1","expires_in":3599})"
        << qint64(0)
        << QStringLiteral("the answer's access_token has characters an Authorization header cannot carry");
    QTest::newRow("200 token_type MAC")
        << 200 << grant(R"(,"expires_in":3599,"token_type":"MAC")") << qint64(0)
        << QStringLiteral("the answer's token_type is not Bearer");
    QTest::newRow("200 no expires_in") << 200 << grant(R"(,"token_type":"Bearer")") << qint64(0)
                                       << QStringLiteral("the answer has no expires_in");
    const QString badLifetime =
        QStringLiteral("the answer's expires_in is not a whole number of seconds from 1 to 86400");
    QTest::newRow("200 expires_in negative")
        << 200 << grant(R"(,"expires_in":-5)") << qint64(0) << badLifetime;
    QTest::newRow("200 expires_in zero") << 200 << grant(R"(,"expires_in":0)") << qint64(0) << badLifetime;
    QTest::newRow("200 expires_in fractional")
        << 200 << grant(R"(,"expires_in":3599.5)") << qint64(0) << badLifetime;
    QTest::newRow("200 expires_in absurd")
        << 200 << grant(R"(,"expires_in":1e12)") << qint64(0) << badLifetime;
    QTest::newRow("200 expires_in words")
        << 200 << grant(R"(,"expires_in":"an hour")") << qint64(0) << badLifetime;
    QTest::newRow("200 expires_in null") << 200 << grant(R"(,"expires_in":null)") << qint64(0) << badLifetime;
    // The client reads 64 KiB at most; the rest is never read.
    QTest::newRow("200 of 10 MB") << 200 << grant(R"(,"expires_in":3599,"padding":")")
                                  << qint64(10 * 1024 * 1024) << QStringLiteral("no answer: ");
    QTest::newRow("closed without an answer")
        << 0 << QByteArray() << qint64(0) << QStringLiteral("no answer: ");
}

void GoogleAuthTest::hostileTokenAnswersGiveOneLineWithoutSecrets()
{
    QFETCH(int, status);
    QFETCH(QByteArray, body);
    QFETCH(qint64, padding);
    QFETCH(QString, expected);
    serveTokens([=](int) {
        return status == 0 ? Answer{Answer::Kind::Close, 0, {}, {}, 0}
                           : Answer{Answer::Kind::Respond, status, body, {}, padding};
    });
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", writeKeyFile(keyFileJson()).toLocal8Bit());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QVERIFY2(credentials, qPrintable(error));
    QVERIFY(credentials->accessToken(&error).isEmpty());
    QCOMPARE(m_fake->requestCount(), 1);
    const QString prefix =
        QStringLiteral("getting a Google access token from %1: ").arg(m_fake->url(TokenPath));
    QVERIFY2(error.startsWith(prefix + expected), qPrintable(error));
    QVERIFY2(!error.contains(QLatin1Char('\n')) && !error.contains(QLatin1Char('\r')) &&
                 !error.contains(QChar(0x1b)),
             qPrintable(error));
    QVERIFY2(leakIn(error).isEmpty(), qPrintable(leakIn(error)));
    QVERIFY(error.size() < 700);
}

void GoogleAuthTest::keyFileThatCannotBeReadIsNamed_data()
{
    QTest::addColumn<QString>("name"); // in the test's folder
    QTest::addColumn<QByteArray>("content");
    QTest::addColumn<QString>("expected");
    QTest::newRow("missing") << QStringLiteral("missing.json") << QByteArray()
                             << QStringLiteral("cannot be read: ");
    QTest::newRow("a folder") << QStringLiteral("folder") << QByteArray()
                              << QStringLiteral("cannot be read: ");
    QTest::newRow("100 KB") << QStringLiteral("large.json") << QByteArray(100 * 1024, ' ')
                            << QStringLiteral("is too large to be a key file (102400 bytes)");
}

void GoogleAuthTest::keyFileThatCannotBeReadIsNamed()
{
    QFETCH(QString, name);
    QFETCH(QByteArray, content);
    QFETCH(QString, expected);
    const QString path = m_dir->filePath(name);
    if (name == QLatin1String("folder"))
        QVERIFY(QDir(m_dir->path()).mkdir(name));
    else if (!content.isEmpty())
        QCOMPARE(writeKeyFile(content, name), path);
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", path.toLocal8Bit());
    QString error;
    QVERIFY(!GoogleCredentials::fromEnvironment(&error));
    QVERIFY2(error.startsWith(
                 QStringLiteral("the Google service-account key file %1 (GOOGLE_APPLICATION_CREDENTIALS) %2")
                     .arg(path, expected)),
             qPrintable(error));
}

void GoogleAuthTest::keyFileProblemsNameTheFileAndTheField_data()
{
    QTest::addColumn<QByteArray>("raw");   // the file as it is, or empty for keyFileJson() changed as below
    QTest::addColumn<QString>("field");    // to change
    QTest::addColumn<QJsonValue>("value"); // undefined: the field removed
    QTest::addColumn<QString>("expected");

    const QJsonValue removed(QJsonValue::Undefined);
    const Key ec(EVP_EC_gen("P-256"));
    QTest::newRow("not JSON") << QByteArray("{\"type\": \"service_account\",") << QString() << removed
                              << QStringLiteral("is not JSON");
    QTest::newRow("JSON array") << QByteArray("[]") << QString() << removed
                                << QStringLiteral("is not a JSON object");
    QTest::newRow("no type") << QByteArray() << QStringLiteral("type") << removed
                             << QStringLiteral("has no type");
    QTest::newRow("a user's credentials")
        << QByteArray() << QStringLiteral("type") << QJsonValue(QStringLiteral("authorized_user"))
        << QStringLiteral("has type \"authorized_user\", not \"service_account\"");
    QTest::newRow("no client_email") << QByteArray() << QStringLiteral("client_email") << removed
                                     << QStringLiteral("has no client_email");
    QTest::newRow("client_email a number")
        << QByteArray() << QStringLiteral("client_email") << QJsonValue(7)
        << QStringLiteral("has a client_email that is not a non-empty string");
    QTest::newRow("client_email empty")
        << QByteArray() << QStringLiteral("client_email") << QJsonValue(QString())
        << QStringLiteral("has a client_email that is not a non-empty string");
    QTest::newRow("no private_key") << QByteArray() << QStringLiteral("private_key") << removed
                                    << QStringLiteral("has no private_key");
    QTest::newRow("private_key garbage")
        << QByteArray() << QStringLiteral("private_key")
        << QJsonValue(
               QStringLiteral("-----BEGIN PRIVATE KEY-----\nMIIBogusBogusBogus\n-----END PRIVATE KEY-----\n"))
        << QStringLiteral("has a private_key that is not a PEM private key OpenSSL can read");
    QTest::newRow("private_key EC") << QByteArray() << QStringLiteral("private_key")
                                    << QJsonValue(QString::fromLatin1(pemOf(ec.get(), PemKind::PrivateKey)))
                                    << QStringLiteral("has a private_key that is not an RSA key");
    QTest::newRow("private_key public")
        << QByteArray() << QStringLiteral("private_key")
        << QJsonValue(QString::fromLatin1(pemOf(m_key.get(), PemKind::PublicKey)))
        << QStringLiteral("has a private_key that is not a PEM private key");
    QTest::newRow("private_key_id a number")
        << QByteArray() << QStringLiteral("private_key_id") << QJsonValue(7)
        << QStringLiteral("has a private_key_id that is not a non-empty string");
    QTest::newRow("no token_uri") << QByteArray() << QStringLiteral("token_uri") << removed
                                  << QStringLiteral("has no token_uri");
    QTest::newRow("token_uri plain http elsewhere")
        << QByteArray() << QStringLiteral("token_uri")
        << QJsonValue(QStringLiteral("http://oauth2.googleapis.com/token"))
        << QStringLiteral(
               "has a token_uri, \"http://oauth2.googleapis.com/token\", that is not an https URL");
    QTest::newRow("token_uri ftp")
        << QByteArray() << QStringLiteral("token_uri") << QJsonValue(QStringLiteral("ftp://127.0.0.1/token"))
        << QStringLiteral("has a token_uri, \"ftp://127.0.0.1/token\", that is not an https URL");
    QTest::newRow("token_uri no URL")
        << QByteArray() << QStringLiteral("token_uri") << QJsonValue(QStringLiteral("oauth2 token\nplease"))
        << QStringLiteral("has a token_uri, \"oauth2 token\\nplease\", that is not an https URL");
}

void GoogleAuthTest::keyFileProblemsNameTheFileAndTheField()
{
    QFETCH(QByteArray, raw);
    QFETCH(QString, field);
    QFETCH(QJsonValue, value);
    QFETCH(QString, expected);
    QJsonObject json = keyFileJson();
    if (value.isUndefined())
        json.remove(field);
    else
        json.insert(field, value);
    const QString path = raw.isEmpty() ? writeKeyFile(json) : writeKeyFile(raw);
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", path.toLocal8Bit());
    // Were the key file skipped, the metadata server would be asked; it must not be.
    qputenv("GCE_METADATA_HOST", QStringLiteral("127.0.0.1:%1").arg(m_fake->port()).toLatin1());
    QString error;
    QVERIFY(!GoogleCredentials::fromEnvironment(&error));
    QVERIFY2(error.startsWith(
                 QStringLiteral("the Google service-account key file %1 (GOOGLE_APPLICATION_CREDENTIALS) %2")
                     .arg(path, expected)),
             qPrintable(error));
    QVERIFY2(!error.contains(QLatin1Char('\n')), qPrintable(error));
    QVERIFY2(leakIn(error).isEmpty(), qPrintable(leakIn(error)));
    QVERIFY2(!error.contains(QLatin1String("Bogus")) && !error.contains(QLatin1String("-----BEGIN")),
             qPrintable(error));
    QCOMPARE(m_fake->requestCount(), 0);
}

void GoogleAuthTest::tokenUriMayBePlainHttpOnlyToThisMachine_data()
{
    QTest::addColumn<QString>("tokenUri");
    QTest::addColumn<bool>("accepted");
    QTest::newRow("Google's") << QStringLiteral("https://oauth2.googleapis.com/token") << true;
    QTest::newRow("http 127.0.0.1") << QStringLiteral("http://127.0.0.1:9/token") << true;
    QTest::newRow("http 127.1.2.3") << QStringLiteral("http://127.1.2.3/token") << true;
    QTest::newRow("http localhost") << QStringLiteral("http://localhost:9/token") << true;
    QTest::newRow("http [::1]") << QStringLiteral("http://[::1]:9/token") << true;
    QTest::newRow("http 10.0.0.1") << QStringLiteral("http://10.0.0.1/token") << false;
    QTest::newRow("http localhost.example.com")
        << QStringLiteral("http://localhost.example.com/token") << false;
    QTest::newRow("http 127.0.0.1.example.com")
        << QStringLiteral("http://127.0.0.1.example.com/token") << false;
    QTest::newRow("https without host") << QStringLiteral("https:///token") << false;
}

void GoogleAuthTest::tokenUriMayBePlainHttpOnlyToThisMachine()
{
    QFETCH(QString, tokenUri);
    QFETCH(bool, accepted);
    QJsonObject json = keyFileJson();
    json.insert(QStringLiteral("token_uri"), tokenUri);
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", writeKeyFile(json).toLocal8Bit());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QCOMPARE(bool(credentials), accepted);
    QCOMPARE(error.contains(QLatin1String("token_uri")), !accepted);
}

// ---- the metadata server ----

void GoogleAuthTest::metadataServerGivesTheToken()
{
    serveMetadataTokens([](int n) {
        Answer answer = tokenAnswer(n, 3599);
        answer.headers = {{"Metadata-Flavor", "Google"}, {"Content-Type", "application/json"}};
        return answer;
    });
    const QString host = QStringLiteral("127.0.0.1:%1").arg(m_fake->port());
    qputenv("GCE_METADATA_HOST", host.toLatin1());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QVERIFY2(credentials, qPrintable(error));
    QCOMPARE(credentials->source(), QStringLiteral("the metadata server at ") + host);
    QCOMPARE(m_fake->requestCount(), 1); // asked at once: that is how it is known to be there
    QCOMPARE(credentials->accessToken(&error), tokenNumber(1));
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(m_fake->requestCount(), 1);
    const SeenRequest request = m_fake->requests().constFirst();
    QCOMPARE(request.method, QByteArray("GET"));
    QCOMPARE(request.path, QByteArray(MetadataPath));
    QCOMPARE(request.header("Metadata-Flavor"), QByteArray("Google"));
}

void GoogleAuthTest::metadataTokenAboutToExpireIsRefreshed()
{
    serveMetadataTokens([](int n) {
        Answer answer = tokenAnswer(n, n == 1 ? 60 : 3599);
        answer.headers = {{"Metadata-Flavor", "Google"}};
        return answer;
    });
    qputenv("GCE_METADATA_HOST", QStringLiteral("127.0.0.1:%1").arg(m_fake->port()).toLatin1());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QVERIFY2(credentials, qPrintable(error));
    QCOMPARE(credentials->accessToken(&error), tokenNumber(2));
    QCOMPARE(credentials->accessToken(&error), tokenNumber(2));
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(m_fake->requestCount(), 2);
}

// Something else answering on the metadata address (a proxy, a captive portal) does not
// mark its answer: it is not taken for a token.
void GoogleAuthTest::metadataAnswerWithoutFlavorIsNotBelieved()
{
    serveMetadataTokens([](int n) { return tokenAnswer(n, 3599); });
    qputenv("GCE_METADATA_HOST", QStringLiteral("127.0.0.1:%1").arg(m_fake->port()).toLatin1());
    QString error;
    QVERIFY(!GoogleCredentials::fromEnvironment(&error));
    QVERIFY2(error.startsWith(NoCredentials +
                              QStringLiteral(" (getting a Google access token from http://127.0.0.1:")),
             qPrintable(error));
    QVERIFY2(error.contains(QLatin1String("Metadata-Flavor")), qPrintable(error));
    QVERIFY2(leakIn(error).isEmpty(), qPrintable(leakIn(error)));
}

void GoogleAuthTest::noMetadataServerMeansNoCredentials()
{
    quint16 closedPort = 0;
    {
        QTcpServer server;
        QVERIFY(server.listen(QHostAddress::LocalHost, 0));
        closedPort = server.serverPort();
    }
    qputenv("GCE_METADATA_HOST", QStringLiteral("127.0.0.1:%1").arg(closedPort).toLatin1());
    QString error;
    QVERIFY(!GoogleCredentials::fromEnvironment(&error));
    QVERIFY2(error.startsWith(
                 NoCredentials +
                 QStringLiteral(" (getting a Google access token from http://127.0.0.1:%1").arg(closedPort)),
             qPrintable(error));
    QVERIFY(!error.contains(QLatin1Char('\n')));
}

void GoogleAuthTest::metadataHostMustBeAHost()
{
    for (const char *host : {"127.0.0.1:80/evil", "user@127.0.0.1", "127.0.0.1?x", "metadata google"}) {
        qputenv("GCE_METADATA_HOST", host);
        QString error;
        QVERIFY2(!GoogleCredentials::fromEnvironment(&error), host);
        QVERIFY2(error.startsWith(QLatin1String("GCE_METADATA_HOST must be HOST or HOST:PORT, not \"")),
                 qPrintable(error));
    }
}

void GoogleAuthTest::silentMetadataServerIsGivenUpWithinSeconds()
{
    m_fake->setResponder([](const SeenRequest &) { return Answer{Answer::Kind::Silent, 0, {}, {}, 0}; });
    qputenv("GCE_METADATA_HOST", QStringLiteral("127.0.0.1:%1").arg(m_fake->port()).toLatin1());
    QElapsedTimer timer;
    timer.start();
    QString error;
    QVERIFY(!GoogleCredentials::fromEnvironment(&error));
    QVERIFY2(timer.elapsed() < 4000, qPrintable(QString::number(timer.elapsed())));
    QVERIFY2(error.startsWith(NoCredentials + QStringLiteral(" (")) &&
                 error.contains(QLatin1String("no answer")),
             qPrintable(error));
    QCOMPARE(m_fake->requestCount(), 1);
}

// ---- which comes first ----

void GoogleAuthTest::givenAccessTokenWinsOverKeyFileAndMetadataServer()
{
    serveTokens([](int n) { return tokenAnswer(n, 3599); });
    const QByteArray given = QByteArray("ya29.") + TokenMark + "-given";
    qputenv("GOOGLE_OAUTH_ACCESS_TOKEN", given);
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", writeKeyFile(keyFileJson()).toLocal8Bit());
    qputenv("GCE_METADATA_HOST", QStringLiteral("127.0.0.1:%1").arg(m_fake->port()).toLatin1());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QVERIFY2(credentials, qPrintable(error));
    QCOMPARE(credentials->source(), QStringLiteral("GOOGLE_OAUTH_ACCESS_TOKEN"));
    for (int call = 0; call < 3; ++call)
        QCOMPARE(credentials->accessToken(&error), given);
    QVERIFY(error.isEmpty());
    QCOMPARE(m_fake->requestCount(), 0);
}

void GoogleAuthTest::keyFileWinsOverMetadataServer()
{
    serveTokens([](int n) { return tokenAnswer(n, 3599); });
    qputenv("GOOGLE_APPLICATION_CREDENTIALS", writeKeyFile(keyFileJson()).toLocal8Bit());
    qputenv("GCE_METADATA_HOST", QStringLiteral("127.0.0.1:%1").arg(m_fake->port()).toLatin1());
    QString error;
    const auto credentials = GoogleCredentials::fromEnvironment(&error);
    QVERIFY2(credentials, qPrintable(error));
    QVERIFY2(credentials->source().startsWith(QLatin1String("service account ")),
             qPrintable(credentials->source()));
    QCOMPARE(credentials->accessToken(&error), tokenNumber(1));
    QCOMPARE(m_fake->requestCount(), 1);
    QCOMPARE(m_fake->requests().constFirst().path, QByteArray(TokenPath));
}

void GoogleAuthTest::givenAccessTokenWithALineBreakIsRefused()
{
    qputenv("GOOGLE_OAUTH_ACCESS_TOKEN", QByteArray("ya29.") + TokenMark + "\nX-Injected: 1");
    QString error;
    QVERIFY(!GoogleCredentials::fromEnvironment(&error));
    QVERIFY2(error.startsWith(QLatin1String(
                 "GOOGLE_OAUTH_ACCESS_TOKEN has characters an Authorization header cannot carry")),
             qPrintable(error));
    QVERIFY(leakIn(error).isEmpty());
}

QTEST_GUILESS_MAIN(GoogleAuthTest)
#include "tst_googleauth.moc"
