#include "queues/sqs/sigv4signer.h"

#include <QCryptographicHash>
#include <QMessageAuthenticationCode>
#include <QUrl>

#include <algorithm>
#include <map>

namespace once {

namespace {

const QByteArray Algorithm = QByteArrayLiteral("AWS4-HMAC-SHA256");

QByteArray sha256Hex(const QByteArray &data)
{
    return QCryptographicHash::hash(data, QCryptographicHash::Sha256).toHex();
}

QByteArray hmac(const QByteArray &key, const QByteArray &message)
{
    return QMessageAuthenticationCode::hash(message, key, QCryptographicHash::Sha256);
}

// RFC 3986's unreserved characters stay, every other byte of the UTF-8 is %XX in upper
// case: what SigV4 asks of path segments and of query names and values.
QByteArray uriEncode(const QByteArray &bytes)
{
    return bytes.toPercentEncoding();
}

// Dot segments resolved and empty segments dropped, as AWS normalises a path for every
// service but S3; a trailing slash (or a final dot segment) stays one.
QByteArray canonicalPath(const QString &path)
{
    const QStringList segments = path.split(QLatin1Char('/'));
    QStringList kept;
    for (const QString &segment : segments) {
        if (segment.isEmpty() || segment == QLatin1String("."))
            continue;
        if (segment == QLatin1String("..")) {
            if (!kept.isEmpty())
                kept.removeLast();
            continue;
        }
        kept.append(segment);
    }
    const QString last = segments.isEmpty() ? QString() : segments.last();
    const bool trailingSlash = last.isEmpty() || last == QLatin1String(".") || last == QLatin1String("..");
    QByteArray canonical = "/";
    for (qsizetype i = 0; i < kept.size(); ++i) {
        if (i > 0)
            canonical += '/';
        canonical += uriEncode(kept.at(i).toUtf8());
    }
    if (!kept.isEmpty() && trailingSlash)
        canonical += '/';
    return canonical;
}

// Each name and value decoded once (the query may come percent-encoded already) and
// encoded the one way SigV4 accepts; sorted by name, then value.
QByteArray canonicalQuery(const QByteArray &query)
{
    QList<QPair<QByteArray, QByteArray>> parameters;
    for (const QByteArray &part : query.split('&')) {
        if (part.isEmpty())
            continue;
        const qsizetype equals = part.indexOf('=');
        const QByteArray name = equals < 0 ? part : part.left(equals);
        const QByteArray value = equals < 0 ? QByteArray() : part.mid(equals + 1);
        parameters.append({uriEncode(QByteArray::fromPercentEncoding(name)), uriEncode(QByteArray::fromPercentEncoding(value))});
    }
    std::sort(parameters.begin(), parameters.end());
    QByteArray canonical;
    for (const auto &[name, value] : std::as_const(parameters)) {
        if (!canonical.isEmpty())
            canonical += '&';
        canonical += name + '=' + value;
    }
    return canonical;
}

} // namespace

QByteArray SigV4Signer::amzDate(const QDateTime &time)
{
    return time.toUTC().toString(QStringLiteral("yyyyMMdd'T'HHmmss'Z'")).toLatin1();
}

QByteArray SigV4Signer::canonicalRequest(const SignableRequest &request, QByteArray *signedHeaders)
{
    std::map<QByteArray, QList<QByteArray>> headers; // sorted by lower-case name
    for (const auto &[name, value] : request.headers)
        headers[name.toLower()].append(value.simplified());
    QByteArray canonicalHeaders;
    QByteArray names;
    for (const auto &[name, values] : headers) {
        canonicalHeaders += name + ':' + values.join(',') + '\n';
        if (!names.isEmpty())
            names += ';';
        names += name;
    }
    if (signedHeaders)
        *signedHeaders = names;
    return request.method + '\n' + canonicalPath(request.path) + '\n' + canonicalQuery(request.query) + '\n'
           + canonicalHeaders + '\n' + names + '\n' + sha256Hex(request.body);
}

QByteArray SigV4Signer::credentialScope(const QByteArray &date) const
{
    return date + '/' + m_region.toUtf8() + '/' + m_service.toUtf8() + "/aws4_request";
}

QByteArray SigV4Signer::stringToSign(const QByteArray &amzDate, const QByteArray &canonicalRequest) const
{
    return Algorithm + '\n' + amzDate + '\n' + credentialScope(amzDate.left(8)) + '\n' + sha256Hex(canonicalRequest);
}

QByteArray SigV4Signer::authorization(const AwsCredentials &credentials, const QByteArray &amzDate,
                                      const QByteArray &canonicalRequest, const QByteArray &signedHeaders) const
{
    const QByteArray date = amzDate.left(8);
    // The signing key is derived for the day, the region and the service: a signature
    // leaked from one request is no key to another scope.
    QByteArray key = hmac("AWS4" + credentials.secretAccessKey, date);
    key = hmac(key, m_region.toUtf8());
    key = hmac(key, m_service.toUtf8());
    key = hmac(key, "aws4_request");
    const QByteArray signature = hmac(key, stringToSign(amzDate, canonicalRequest)).toHex();
    return Algorithm + " Credential=" + credentials.accessKeyId + '/' + credentialScope(date)
           + ", SignedHeaders=" + signedHeaders + ", Signature=" + signature;
}

void SigV4Signer::sign(SignableRequest &request, const AwsCredentials &credentials, const QDateTime &now) const
{
    const QByteArray date = amzDate(now);
    request.headers.append({QByteArrayLiteral("X-Amz-Date"), date});
    if (!credentials.sessionToken.isEmpty())
        request.headers.append({QByteArrayLiteral("X-Amz-Security-Token"), credentials.sessionToken});
    QByteArray signedHeaders;
    const QByteArray canonical = canonicalRequest(request, &signedHeaders);
    request.headers.append({QByteArrayLiteral("Authorization"), authorization(credentials, date, canonical, signedHeaders)});
}

} // namespace once
