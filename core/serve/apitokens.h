#pragma once

#include <QByteArray>
#include <QHash>
#include <QList>
#include <QString>

#include <optional>

namespace once {

// What a request needs its token to allow.
enum class ApiPermission { Publish, Consume, Read, Operate };

// The roles a tokens file may give: producer publishes only; consumer consumes, acks,
// nacks and extends; read looks (stats, dead letters, metrics); operator may do all.
enum class ApiRole { Producer, Consumer, Read, Operator };

std::optional<ApiRole> apiRoleFromName(const QString &name);
bool apiRoleAllows(ApiRole role, ApiPermission permission);

struct ApiToken
{
    QString name;
    QByteArray digest; // SHA-256 of the token: the token itself is not kept
    ApiRole role = ApiRole::Read;
    double ratePerSecond = 0; // 0: no limit
};

// The bearer tokens of `once serve --tokens FILE`. One token a line, fields separated by
// spaces or tabs: NAME TOKEN ROLE [rate=N/s|N/min]; '#' starts a comment. A token is
// compared in constant time (all tokens, whichever matches), and never appears in an
// error: a bad line is named by its number.
class ApiTokens final
{
public:
    static std::optional<ApiTokens> load(const QString &path, QString *error);
    static std::optional<ApiTokens> parse(const QByteArray &text, QString *error);

    const ApiToken *find(const QByteArray &bearer) const;
    const QList<ApiToken> &tokens() const { return m_tokens; }

private:
    QList<ApiToken> m_tokens;
};

// A token bucket per token name: up to a second's worth of requests at once, then the
// configured rate. Returns 0 when the request may go, else the seconds to wait.
class ApiRateLimiter final
{
public:
    int take(const ApiToken &token, qint64 nowMs);

private:
    struct Bucket
    {
        double tokens = 0;
        qint64 atMs = 0;
    };
    QHash<QString, Bucket> m_buckets;
};

} // namespace once
