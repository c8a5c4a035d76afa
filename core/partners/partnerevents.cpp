#include "partners/partnerevents.h"

#include <QDateTime>
#include <QMessageAuthenticationCode>
#include <QRegularExpression>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <algorithm>
#include <memory>

namespace once {

QString partnerEventKindName(PartnerEvent::Kind kind)
{
    switch (kind) {
    case PartnerEvent::Kind::Delivered:
        return QStringLiteral("delivered");
    case PartnerEvent::Kind::Bounced:
        return QStringLiteral("bounced");
    case PartnerEvent::Kind::Failed:
        return QStringLiteral("failed");
    case PartnerEvent::Kind::Deferred:
        return QStringLiteral("deferred");
    case PartnerEvent::Kind::Opened:
        return QStringLiteral("opened");
    case PartnerEvent::Kind::Clicked:
        return QStringLiteral("clicked");
    case PartnerEvent::Kind::Complained:
        return QStringLiteral("complained");
    case PartnerEvent::Kind::Other:
        return QStringLiteral("other");
    }
    return QStringLiteral("other");
}

qint64 providerTimeMs(const QJsonValue &value)
{
    if (value.isDouble())
        return qint64(value.toDouble() * 1000);
    QString text = value.toString().trimmed();
    bool number = false;
    const double seconds = text.toDouble(&number);
    if (number)
        return qint64(seconds * 1000);
    // Qt reads at most milliseconds: a longer fraction is cut to three digits.
    static const QRegularExpression fraction(QStringLiteral("(\\.\\d{3})\\d+"));
    text.replace(fraction, QStringLiteral("\\1"));
    const QDateTime time = QDateTime::fromString(text, Qt::ISODateWithMs);
    return time.isValid() ? time.toMSecsSinceEpoch() : 0;
}

QList<std::pair<QByteArray, QByteArray>> formFields(const QByteArray &body)
{
    QList<std::pair<QByteArray, QByteArray>> fields;
    for (const QByteArray &pair : body.split('&')) {
        if (pair.isEmpty())
            continue;
        const qsizetype equals = pair.indexOf('=');
        const auto decode = [](QByteArray text) {
            return QByteArray::fromPercentEncoding(text.replace('+', ' '));
        };
        fields.append({decode(pair.left(equals < 0 ? pair.size() : equals)),
                       equals < 0 ? QByteArray() : decode(pair.mid(equals + 1))});
    }
    return fields;
}

namespace eventsignatures {

bool sameBytes(const QByteArray &a, const QByteArray &b)
{
    if (a.size() != b.size())
        return false;
    unsigned char difference = 0;
    for (qsizetype i = 0; i < a.size(); ++i)
        difference |= static_cast<unsigned char>(a[i] ^ b[i]);
    return difference == 0;
}

QByteArray hmacSha256(const QByteArray &key, const QByteArray &message)
{
    return QMessageAuthenticationCode::hash(message, key, QCryptographicHash::Sha256);
}

QByteArray hmacSha1(const QByteArray &key, const QByteArray &message)
{
    return QMessageAuthenticationCode::hash(message, key, QCryptographicHash::Sha1);
}

std::optional<QByteArray> svixKey(const QByteArray &secret)
{
    if (!secret.startsWith("whsec_"))
        return std::nullopt;
    auto decoded = QByteArray::fromBase64Encoding(secret.mid(6), QByteArray::AbortOnBase64DecodingErrors);
    if (!decoded || decoded.decoded.isEmpty())
        return std::nullopt;
    return *decoded;
}

QByteArray svixSignature(const QByteArray &key, const QByteArray &id, const QByteArray &timestamp,
                         const QByteArray &body)
{
    return "v1," + hmacSha256(key, id + '.' + timestamp + '.' + body).toBase64();
}

QByteArray twilioSignature(const QByteArray &authToken, const QByteArray &url,
                           const QList<std::pair<QByteArray, QByteArray>> &formFields)
{
    auto sorted = formFields;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });
    QByteArray data = url;
    for (const auto &[name, value] : sorted)
        data += name + value;
    return hmacSha1(authToken, data).toBase64();
}

QByteArray onceSignature(const QByteArray &secret, qint64 unixSeconds, const QByteArray &body)
{
    const QByteArray t = QByteArray::number(unixSeconds);
    return "t=" + t + ",v1=" + hmacSha256(secret, t + '.' + body).toBase64();
}

namespace {

struct PkeyFree
{
    void operator()(EVP_PKEY *key) const { EVP_PKEY_free(key); }
};
struct MdCtxFree
{
    void operator()(EVP_MD_CTX *context) const { EVP_MD_CTX_free(context); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

QByteArray derOf(EVP_PKEY *key, bool isPrivate)
{
    unsigned char *der = nullptr;
    int length = 0;
    if (isPrivate) {
        std::unique_ptr<PKCS8_PRIV_KEY_INFO, decltype(&PKCS8_PRIV_KEY_INFO_free)> info(
            EVP_PKEY2PKCS8(key), &PKCS8_PRIV_KEY_INFO_free);
        length = info ? i2d_PKCS8_PRIV_KEY_INFO(info.get(), &der) : 0;
    } else {
        length = i2d_PUBKEY(key, &der);
    }
    if (length <= 0)
        return {};
    QByteArray bytes(reinterpret_cast<const char *>(der), length);
    OPENSSL_free(der);
    return bytes;
}

} // namespace

bool ecdsaVerify(const QByteArray &publicKeyBase64, const QByteArray &message,
                 const QByteArray &signatureBase64, QString *error)
{
    const QByteArray der = QByteArray::fromBase64(publicKeyBase64.trimmed());
    const auto *bytes = reinterpret_cast<const unsigned char *>(der.constData());
    Pkey key(d2i_PUBKEY(nullptr, &bytes, long(der.size())));
    if (!key || EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_EC) {
        *error = QStringLiteral("the events public key is not a base64 DER EC public key");
        return false;
    }
    const auto decoded =
        QByteArray::fromBase64Encoding(signatureBase64.trimmed(), QByteArray::AbortOnBase64DecodingErrors);
    if (!decoded || decoded.decoded.isEmpty()) {
        *error = QStringLiteral("the signature is not base64");
        return false;
    }
    std::unique_ptr<EVP_MD_CTX, MdCtxFree> context(EVP_MD_CTX_new());
    if (!context || EVP_DigestVerifyInit(context.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1) {
        *error = QStringLiteral("OpenSSL could not check an ECDSA signature");
        return false;
    }
    const int verified = EVP_DigestVerify(
        context.get(), reinterpret_cast<const unsigned char *>(decoded.decoded.constData()),
        size_t(decoded.decoded.size()), reinterpret_cast<const unsigned char *>(message.constData()),
        size_t(message.size()));
    if (verified != 1) {
        *error = QStringLiteral("the ECDSA signature does not match the events public key");
        return false;
    }
    return true;
}

QByteArray ecdsaSign(const QByteArray &privateKeyBase64, const QByteArray &message)
{
    const QByteArray der = QByteArray::fromBase64(privateKeyBase64.trimmed());
    const auto *bytes = reinterpret_cast<const unsigned char *>(der.constData());
    std::unique_ptr<PKCS8_PRIV_KEY_INFO, decltype(&PKCS8_PRIV_KEY_INFO_free)> info(
        d2i_PKCS8_PRIV_KEY_INFO(nullptr, &bytes, long(der.size())), &PKCS8_PRIV_KEY_INFO_free);
    Pkey key(info ? EVP_PKCS82PKEY(info.get()) : nullptr);
    std::unique_ptr<EVP_MD_CTX, MdCtxFree> context(EVP_MD_CTX_new());
    if (!key || !context || EVP_DigestSignInit(context.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1)
        return {};
    size_t length = 0;
    const auto *data = reinterpret_cast<const unsigned char *>(message.constData());
    if (EVP_DigestSign(context.get(), nullptr, &length, data, size_t(message.size())) != 1)
        return {};
    QByteArray signature(qsizetype(length), Qt::Uninitialized);
    if (EVP_DigestSign(context.get(), reinterpret_cast<unsigned char *>(signature.data()), &length, data,
                       size_t(message.size())) != 1)
        return {};
    signature.resize(qsizetype(length));
    return signature.toBase64();
}

std::pair<QByteArray, QByteArray> newEcdsaKeyPair()
{
    Pkey key(EVP_EC_gen("P-256"));
    if (!key)
        return {};
    return {derOf(key.get(), true).toBase64(), derOf(key.get(), false).toBase64()};
}

} // namespace eventsignatures

} // namespace once
