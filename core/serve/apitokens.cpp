#include "serve/apitokens.h"

#include <QCryptographicHash>
#include <QFile>
#include <QRegularExpression>
#include <QSet>

#include <cmath>

namespace once {

namespace {

QByteArray digestOf(const QByteArray &token)
{
    return QCryptographicHash::hash(token, QCryptographicHash::Sha256);
}

// Both digests have the same length; the loop never stops early.
bool sameDigest(const QByteArray &a, const QByteArray &b)
{
    unsigned char difference = a.size() == b.size() ? 0 : 1;
    for (qsizetype i = 0; i < a.size() && i < b.size(); ++i)
        difference |= static_cast<unsigned char>(a.at(i) ^ b.at(i));
    return difference == 0;
}

std::optional<double> parseRate(const QString &text)
{
    static const QRegularExpression pattern(QStringLiteral("^rate=([0-9]+(?:\\.[0-9]+)?)/(s|min)$"));
    const auto match = pattern.match(text);
    if (!match.hasMatch())
        return std::nullopt;
    const double value = match.captured(1).toDouble();
    if (value <= 0)
        return std::nullopt;
    return match.captured(2) == QLatin1String("s") ? value : value / 60.0;
}

} // namespace

std::optional<ApiRole> apiRoleFromName(const QString &name)
{
    if (name == QLatin1String("producer"))
        return ApiRole::Producer;
    if (name == QLatin1String("consumer"))
        return ApiRole::Consumer;
    if (name == QLatin1String("read"))
        return ApiRole::Read;
    if (name == QLatin1String("operator"))
        return ApiRole::Operator;
    return std::nullopt;
}

bool apiRoleAllows(ApiRole role, ApiPermission permission)
{
    switch (role) {
    case ApiRole::Operator:
        return true;
    case ApiRole::Producer:
        return permission == ApiPermission::Publish;
    case ApiRole::Consumer:
        return permission == ApiPermission::Consume;
    case ApiRole::Read:
        return permission == ApiPermission::Read;
    }
    return false;
}

std::optional<ApiTokens> ApiTokens::load(const QString &path, QString *error)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        *error = QStringLiteral("cannot read the tokens file %1: %2").arg(path, file.errorString());
        return std::nullopt;
    }
    QString why;
    auto tokens = parse(file.readAll(), &why);
    if (!tokens)
        *error = QStringLiteral("tokens file %1: %2").arg(path, why);
    return tokens;
}

std::optional<ApiTokens> ApiTokens::parse(const QByteArray &text, QString *error)
{
    static const QRegularExpression namePattern(QStringLiteral("^[A-Za-z0-9._@-]{1,64}$"));
    static const QRegularExpression fieldSeparator(QStringLiteral("[ \\t]+"));
    ApiTokens result;
    QSet<QString> names;
    const QList<QByteArray> lines = text.split('\n');
    for (qsizetype i = 0; i < lines.size(); ++i) {
        QByteArray line = lines.at(i);
        if (const qsizetype hash = line.indexOf('#'); hash >= 0)
            line.truncate(hash);
        line = line.trimmed();
        if (line.isEmpty())
            continue;
        const auto lineError = [&](const QString &why) {
            *error = QStringLiteral("line %1: %2").arg(i + 1).arg(why);
            return std::nullopt;
        };
        const QStringList fields = QString::fromUtf8(line).split(fieldSeparator);
        if (fields.size() < 3 || fields.size() > 4)
            return lineError(QStringLiteral("want NAME TOKEN ROLE [rate=N/s]"));
        ApiToken token;
        token.name = fields.at(0);
        if (!namePattern.match(token.name).hasMatch())
            return lineError(QStringLiteral("a name is 1 to 64 letters, digits, '.', '_', '@' or '-'"));
        if (names.contains(token.name))
            return lineError(QStringLiteral("the name %1 is given twice").arg(token.name));
        const QByteArray secret = fields.at(1).toUtf8();
        if (secret.size() < 16)
            return lineError(QStringLiteral("a token must be at least 16 characters"));
        token.digest = digestOf(secret);
        for (const auto &other : std::as_const(result.m_tokens))
            if (other.digest == token.digest)
                return lineError(QStringLiteral("the token of %1 is also %2's").arg(token.name, other.name));
        const auto role = apiRoleFromName(fields.at(2));
        if (!role)
            return lineError(QStringLiteral("unknown role \"%1\" (producer, consumer, read or operator)").arg(fields.at(2)));
        token.role = *role;
        if (fields.size() == 4) {
            const auto rate = parseRate(fields.at(3));
            if (!rate)
                return lineError(QStringLiteral("the rate must be rate=N/s or rate=N/min with N above 0"));
            token.ratePerSecond = *rate;
        }
        names.insert(token.name);
        result.m_tokens.append(token);
    }
    if (result.m_tokens.isEmpty()) {
        *error = QStringLiteral("no token in the file");
        return std::nullopt;
    }
    return result;
}

const ApiToken *ApiTokens::find(const QByteArray &bearer) const
{
    const QByteArray digest = digestOf(bearer);
    const ApiToken *found = nullptr;
    for (const auto &token : m_tokens)
        if (sameDigest(token.digest, digest))
            found = &token;
    return found;
}

int ApiRateLimiter::take(const ApiToken &token, qint64 nowMs)
{
    if (token.ratePerSecond <= 0)
        return 0;
    const double capacity = std::max(1.0, token.ratePerSecond);
    auto it = m_buckets.find(token.name);
    if (it == m_buckets.end())
        it = m_buckets.insert(token.name, Bucket{capacity, nowMs});
    Bucket &bucket = *it;
    bucket.tokens = std::min(capacity, bucket.tokens + (nowMs - bucket.atMs) / 1000.0 * token.ratePerSecond);
    bucket.atMs = nowMs;
    if (bucket.tokens >= 1.0) {
        bucket.tokens -= 1.0;
        return 0;
    }
    return std::max(1, int(std::ceil((1.0 - bucket.tokens) / token.ratePerSecond)));
}

} // namespace once
