#include "partners/partnersettings.h"

#include "delivery/partnersender.h"
#include "model/partnerpolicy.h"
#include "partners/partnerprofile.h"
#include "text/quantities.h"

#include <QFile>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QUrlQuery>

#include <cmath>

namespace once {

namespace {
// What a partners file may hold: a handful of partners, not a database.
constexpr qint64 MaxPartnersFileBytes = 1024 * 1024;
const QStringList CommonKeys{
    QStringLiteral("profile"),     QStringLiteral("url"),     QStringLiteral("token"),
    QStringLiteral("account"),     QStringLiteral("from"),    QStringLiteral("subject"),
    QStringLiteral("lookup"),      QStringLiteral("concurrency"), QStringLiteral("rate"),
    QStringLiteral("max_attempts"), QStringLiteral("lookup_grace_s"), QStringLiteral("expire_after"),
};

bool readString(const QJsonObject &object, const QString &key, QString *value, QString *error)
{
    const QJsonValue found = object.value(key);
    if (found.isUndefined())
        return true;
    if (!found.isString()) {
        *error = QStringLiteral("\"%1\" must be a string").arg(key);
        return false;
    }
    *value = found.toString();
    return true;
}

bool readWhole(const QJsonObject &object, const QString &key, qint64 least, qint64 most, qint64 *value, QString *error)
{
    const QJsonValue found = object.value(key);
    if (found.isUndefined())
        return true;
    const double number = found.toDouble(-1);
    if (!found.isDouble() || number != std::floor(number) || number < least || number > most) {
        *error = QStringLiteral("\"%1\" must be a whole number from %2 to %3").arg(key).arg(least).arg(most);
        return false;
    }
    *value = qint64(number);
    return true;
}

std::optional<PartnerSettings> readPartner(const QString &name, const QJsonValue &value, QString *error)
{
    if (!value.isObject()) {
        *error = QStringLiteral("must be an object");
        return std::nullopt;
    }
    const QJsonObject object = value.toObject();
    PartnerSettings partner;
    partner.name = name;
    QString url;
    QString token;
    QString account;
    QString rate;
    if (!readString(object, QStringLiteral("profile"), &partner.profile, error)
        || !readString(object, QStringLiteral("url"), &url, error)
        || !readString(object, QStringLiteral("token"), &token, error)
        || !readString(object, QStringLiteral("account"), &account, error)
        || !readString(object, QStringLiteral("from"), &partner.from, error)
        || !readString(object, QStringLiteral("subject"), &partner.subject, error)
        || !readString(object, QStringLiteral("lookup"), &partner.lookup, error)
        || !readString(object, QStringLiteral("rate"), &rate, error))
        return std::nullopt;
    qint64 concurrency = 0;
    qint64 maxAttempts = 0;
    qint64 graceSeconds = -1;
    if (!readWhole(object, QStringLiteral("concurrency"), 1, 1024, &concurrency, error)
        || !readWhole(object, QStringLiteral("max_attempts"), 1, 100, &maxAttempts, error)
        || !readWhole(object, QStringLiteral("lookup_grace_s"), 0, 7 * 24 * 3600, &graceSeconds, error))
        return std::nullopt;
    partner.concurrency = int(concurrency);
    partner.maxAttempts = int(maxAttempts);
    partner.lookupGraceMs = graceSeconds < 0 ? -1 : graceSeconds * 1000;
    if (const QJsonValue expireAfter = object.value(QLatin1String("expire_after")); !expireAfter.isUndefined()) {
        const auto ms = parseExpireAfter(expireAfter, error);
        if (!ms)
            return std::nullopt;
        partner.expireAfterMs = *ms;
    }
    partner.url = QUrl(url, QUrl::StrictMode);
    if (partner.profile.isEmpty())
        partner.profile = profileForUrl(partner.url);
    const PartnerProfile *profile = partnerProfile(partner.profile);
    if (!profile) {
        *error = QStringLiteral("\"profile\" \"%1\" is not one of %2").arg(partner.profile, partnerProfileNames());
        return std::nullopt;
    }
    if (!partner.url.password().isEmpty()) {
        *error = QStringLiteral("\"url\" must not carry a password: give it as \"token\": \"env:NAME\" or \"file:PATH\"");
        return std::nullopt;
    }
    if (!partner.url.userName().isEmpty() && account.isEmpty())
        account = partner.url.userName();
    partner.url.setUserInfo(QString());
    partner.account = account.toUtf8();
    if (!rate.isEmpty()) {
        const auto perSecond = parseRate(rate);
        if (!perSecond) {
            *error = QStringLiteral("\"rate\" must read like \"5/s\", \"300/min\" or \"1000/h\"");
            return std::nullopt;
        }
        partner.ratePerSecond = *perSecond;
    }
    if (!token.isEmpty()) {
        QString secretError;
        const auto secret = resolveSecretReference(token, &secretError);
        if (!secret) {
            *error = QStringLiteral("\"token\": ") + secretError;
            return std::nullopt;
        }
        if (const QString problem = partnerTokenProblem(*secret); !problem.isEmpty()) {
            *error = QStringLiteral("\"token\" ") + problem;
            return std::nullopt;
        }
        partner.token = *secret;
    }
    const QStringList options = profile->optionNames();
    for (auto it = object.begin(); it != object.end(); ++it) {
        if (CommonKeys.contains(it.key()))
            continue;
        if (!options.contains(it.key())) {
            *error = QStringLiteral("\"%1\" is not a setting of the %2 profile").arg(it.key(), partner.profile);
            return std::nullopt;
        }
        if (profile->secretOptionNames().contains(it.key())) {
            QString secretError;
            const auto secret = it.value().isString() ? resolveSecretReference(it.value().toString(), &secretError)
                                                      : std::optional<QByteArray>();
            if (!secret) {
                *error = QStringLiteral("\"%1\": %2").arg(it.key(), it.value().isString() ? secretError
                                                                  : QStringLiteral("must be \"env:NAME\" or \"file:PATH\""));
                return std::nullopt;
            }
            partner.secretOptions.insert(it.key(), *secret);
            continue;
        }
        partner.options.insert(it.key(), it.value());
    }
    if (const QString problem = profile->settingsProblem(partner); !problem.isEmpty()) {
        *error = QStringLiteral("the %1 profile ").arg(partner.profile) + problem;
        return std::nullopt;
    }
    return partner;
}
} // namespace

QList<QByteArray> PartnerSettings::secrets() const
{
    QList<QByteArray> secrets;
    if (!token.isEmpty())
        secrets.append(token);
    for (const QByteArray &secret : secretOptions)
        secrets.append(secret);
    if (const PartnerProfile *found = partnerProfile(profile))
        secrets.append(found->urlSecrets(*this));
    return secrets;
}

QString PartnerRoutes::partnerFor(const QString &channel) const
{
    return byChannel.value(channel, otherwise);
}

qint64 PartnerRoutes::expireAfterFor(const QString &channel) const
{
    return byChannel.contains(channel) ? expireAfterByChannel.value(channel) : otherwiseExpireAfterMs;
}

qint64 PartnersConfig::expireAfterFor(const QString &channel) const
{
    if (const qint64 route = routes.expireAfterFor(channel))
        return route;
    const PartnerSettings *partner = find(routes.partnerFor(channel));
    return partner ? partner->expireAfterMs : 0;
}

std::optional<qint64> parseExpireAfter(const QJsonValue &value, QString *error)
{
    constexpr qint64 Most = 30LL * 24 * 3600 * 1000; // the queues' longest retention
    const auto ms = value.isString() ? parseDurationSetting(value.toString()) : std::nullopt;
    if (!ms || *ms < 1000 || *ms > Most) {
        *error = QStringLiteral("\"expire_after\" must be a duration such as \"90s\", \"5m\", \"2h\" or \"7d\" "
                                "(1s to 30d)");
        return std::nullopt;
    }
    return ms;
}

const PartnerSettings *PartnersConfig::find(const QString &name) const
{
    for (const PartnerSettings &partner : partners) {
        if (partner.name == name)
            return &partner;
    }
    return nullptr;
}

PartnersConfig PartnersConfig::single(PartnerSettings partner)
{
    PartnersConfig config;
    config.routes.otherwise = partner.name;
    config.partners.append(std::move(partner));
    return config;
}

std::optional<QByteArray> resolveSecretReference(const QString &reference, QString *error)
{
    if (reference.startsWith(QLatin1String("env:"))) {
        const QString variable = reference.mid(4);
        if (variable.isEmpty() || !qEnvironmentVariableIsSet(variable.toLocal8Bit().constData())) {
            *error = QStringLiteral("the environment variable %1 is not set").arg(variable.isEmpty() ? QStringLiteral("(no name)") : variable);
            return std::nullopt;
        }
        return qgetenv(variable.toLocal8Bit().constData());
    }
    if (reference.startsWith(QLatin1String("file:"))) {
        const QString path = reference.mid(5);
        QFile file(path);
        if (path.isEmpty() || !file.open(QIODevice::ReadOnly)) {
            *error = QStringLiteral("cannot read %1: %2").arg(path, file.errorString());
            return std::nullopt;
        }
        QByteArray line = file.readLine(64 * 1024);
        while (line.endsWith('\n') || line.endsWith('\r'))
            line.chop(1);
        if (line.isEmpty()) {
            *error = QStringLiteral("%1 is empty").arg(path);
            return std::nullopt;
        }
        return line;
    }
    *error = QStringLiteral("a secret is written as \"env:NAME\" or \"file:PATH\", never as itself");
    return std::nullopt;
}

std::optional<double> parseRate(const QString &text)
{
    static const QRegularExpression pattern(QStringLiteral(R"(^\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$)"));
    const auto match = pattern.match(text);
    if (!match.hasMatch())
        return std::nullopt;
    const double count = match.captured(1).toDouble();
    const QString unit = match.captured(2);
    const double seconds = unit.startsWith(QLatin1Char('s')) ? 1 : unit.startsWith(QLatin1Char('m')) ? 60 : 3600;
    if (count <= 0)
        return std::nullopt;
    return count / seconds;
}

std::optional<PartnerSettings> partnerFromUrl(const QString &text, const QString &profileName, const QByteArray &token,
                                              QString *error)
{
    QUrl url = QUrl::fromUserInput(text);
    const QString scheme = url.scheme();
    const bool smtp = scheme == QLatin1String("smtp") || scheme == QLatin1String("smtps");
    if (!url.isValid() || url.host().isEmpty()
        || (!smtp && scheme != QLatin1String("http") && scheme != QLatin1String("https"))) {
        *error = QStringLiteral("--partner must be an http://, https://, smtp:// or smtps:// URL");
        return std::nullopt;
    }
    PartnerSettings partner;
    partner.profile = profileName.isEmpty() ? profileForUrl(url) : profileName;
    const PartnerProfile *profile = partnerProfile(partner.profile);
    if (!profile) {
        *error = QStringLiteral("--partner-profile must be one of %1").arg(partnerProfileNames());
        return std::nullopt;
    }
    partner.token = token;
    if (smtp) {
        partner.account = url.userName().toUtf8();
        if (!url.password().isEmpty())
            partner.token = url.password().toUtf8();
        QUrlQuery query(url);
        partner.from = query.queryItemValue(QStringLiteral("from"), QUrl::FullyDecoded);
        query.removeAllQueryItems(QStringLiteral("from"));
        url.setQuery(query);
        url.setUserInfo(QString());
    } else if (partner.profile != QLatin1String("webhook")) {
        // A provider's API base has no query or user of its own: they carry what the
        // shorthand has no other place for (https://AC123@api.twilio.com?from=%2B15550001111).
        // A webhook's URL is the team's own and is kept whole.
        QUrlQuery query(url);
        if (query.hasQueryItem(QStringLiteral("from"))) {
            partner.from = query.queryItemValue(QStringLiteral("from"), QUrl::FullyDecoded);
            query.removeAllQueryItems(QStringLiteral("from"));
            url.setQuery(query);
        }
        if (!url.password().isEmpty()) {
            *error = QStringLiteral("--partner must not carry a password: the token comes from ONCE_PARTNER_TOKEN");
            return std::nullopt;
        }
        partner.account = url.userName().toUtf8();
        url.setUserInfo(QString());
    }
    partner.url = url;
    // What logs, the store and the console show: a Slack webhook's path is its secret.
    partner.name = profile->displayUrl(partner);
    if (const QString problem = partnerTokenProblem(partner.token); !problem.isEmpty()) {
        *error = (smtp && !url.password().isEmpty() ? QStringLiteral("the password ") : QStringLiteral("ONCE_PARTNER_TOKEN "))
                 + problem;
        return std::nullopt;
    }
    if (const QString problem = profile->settingsProblem(partner); !problem.isEmpty()) {
        *error = QStringLiteral("--partner: the %1 profile ").arg(partner.profile) + problem;
        return std::nullopt;
    }
    return partner;
}

std::optional<PartnersConfig> parsePartners(const QByteArray &json, QString *error)
{
    QJsonParseError parseError;
    const QJsonDocument document = QJsonDocument::fromJson(json, &parseError);
    if (parseError.error != QJsonParseError::NoError || !document.isObject()) {
        *error = parseError.error != QJsonParseError::NoError
                     ? QStringLiteral("not JSON: %1 at byte %2").arg(parseError.errorString()).arg(parseError.offset)
                     : QStringLiteral("must be a JSON object with \"partners\" and \"routes\"");
        return std::nullopt;
    }
    const QJsonObject root = document.object();
    for (auto it = root.begin(); it != root.end(); ++it) {
        if (it.key() != QLatin1String("partners") && it.key() != QLatin1String("routes")) {
            *error = QStringLiteral("\"%1\" is not part of a partners file (\"partners\", \"routes\")").arg(it.key());
            return std::nullopt;
        }
    }
    if (!root.value(QLatin1String("partners")).isObject() || root.value(QLatin1String("partners")).toObject().isEmpty()) {
        *error = QStringLiteral("\"partners\" must be an object naming at least one partner");
        return std::nullopt;
    }
    PartnersConfig config;
    const QJsonObject partners = root.value(QLatin1String("partners")).toObject();
    for (auto it = partners.begin(); it != partners.end(); ++it) {
        if (it.key().trimmed().isEmpty() || it.key().size() > 64 || it.key() != it.key().trimmed()) {
            *error = QStringLiteral("partner names must be 1 to 64 characters without leading or trailing spaces");
            return std::nullopt;
        }
        QString partnerError;
        auto partner = readPartner(it.key(), it.value(), &partnerError);
        if (!partner) {
            *error = QStringLiteral("partner \"%1\": %2").arg(it.key(), partnerError);
            return std::nullopt;
        }
        config.partners.append(std::move(*partner));
    }
    const QJsonValue routes = root.value(QLatin1String("routes"));
    if (routes.isUndefined()) {
        if (config.partners.size() > 1) {
            *error = QStringLiteral("\"routes\" must say which channel goes to which partner when there are several");
            return std::nullopt;
        }
        config.routes.otherwise = config.partners.constFirst().name;
        return config;
    }
    if (!routes.isObject() || routes.toObject().isEmpty()) {
        *error = QStringLiteral("\"routes\" must be an object: a channel (or \"*\") -> a partner's name");
        return std::nullopt;
    }
    const QJsonObject table = routes.toObject();
    for (auto it = table.begin(); it != table.end(); ++it) {
        // A route is a partner's name, or an object naming it with the route's own
        // settings: {"partner": "twilio", "expire_after": "30m"}.
        QString target = it.value().toString();
        qint64 expireAfterMs = 0;
        if (it.value().isObject()) {
            const QJsonObject route = it.value().toObject();
            for (auto key = route.begin(); key != route.end(); ++key) {
                if (key.key() != QLatin1String("partner") && key.key() != QLatin1String("expire_after")) {
                    *error = QStringLiteral("route \"%1\": \"%2\" is not a setting of a route (\"partner\", "
                                            "\"expire_after\")")
                                 .arg(it.key(), key.key());
                    return std::nullopt;
                }
            }
            target = route.value(QLatin1String("partner")).toString();
            if (route.contains(QLatin1String("expire_after"))) {
                QString expireError;
                const auto ms = parseExpireAfter(route.value(QLatin1String("expire_after")), &expireError);
                if (!ms) {
                    *error = QStringLiteral("route \"%1\": %2").arg(it.key(), expireError);
                    return std::nullopt;
                }
                expireAfterMs = *ms;
            }
        } else if (!it.value().isString()) {
            target.clear();
        }
        if (!config.find(target)) {
            *error = QStringLiteral("route \"%1\" names no partner of this file").arg(it.key());
            return std::nullopt;
        }
        if (it.key() == QLatin1String("*")) {
            config.routes.otherwise = target;
            config.routes.otherwiseExpireAfterMs = expireAfterMs;
        } else {
            config.routes.byChannel.insert(it.key(), target);
            if (expireAfterMs)
                config.routes.expireAfterByChannel.insert(it.key(), expireAfterMs);
        }
    }
    return config;
}

std::optional<PartnersConfig> readPartnersFile(const QString &path, QString *error)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        *error = QStringLiteral("cannot read the partners file %1: %2").arg(path, file.errorString());
        return std::nullopt;
    }
    if (file.size() > MaxPartnersFileBytes) {
        *error = QStringLiteral("the partners file %1 is larger than 1 MiB").arg(path);
        return std::nullopt;
    }
    QString parseError;
    auto config = parsePartners(file.readAll(), &parseError);
    if (!config)
        *error = QStringLiteral("%1: %2").arg(path, parseError);
    return config;
}

} // namespace once
